"""Timestamp extractors: how a source chooses each record's timestamp, as in Kafka Streams.

The timestamp drives stream time, punctuation and windows. An extractor gets the deserialized
`ConsumerRecord` and the partition time as the caller keeps it (-1 when unknown) and returns a
timestamp in ms. A negative result makes the task drop the record with a warning (counted in
`dropped_records`), which is how `LogAndSkipOnInvalidTimestamp` skips. An extractor is an object
with `extract(record, partition_time)` or a plain function of the same two arguments.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from streams_core.errors import StreamsError
from streams_core.processor.consumer_record import ConsumerRecord

__all__ = [
    "FailOnInvalidTimestamp",
    "LogAndSkipOnInvalidTimestamp",
    "TimestampExtractor",
    "UsePartitionTimeOnInvalidTimestamp",
    "WallclockTimestampExtractor",
    "as_extract_function",
]


@runtime_checkable
class TimestampExtractor(Protocol):
    """Chooses the timestamp (ms) of a consumed record; negative means "drop the record"."""

    def extract(self, record: ConsumerRecord, partition_time: int) -> int: ...


class FailOnInvalidTimestamp:
    """The default: the record's own timestamp; a negative one stops processing with an error."""

    def extract(self, record: ConsumerRecord, partition_time: int) -> int:
        timestamp = record.timestamp
        if timestamp < 0:
            raise StreamsError(
                f"record at topic={record.topic}, partition={record.partition}, offset={record.offset} "
                f"has an invalid (negative) timestamp {timestamp}; configure "
                "default.timestamp.extractor (e.g. LogAndSkipOnInvalidTimestamp or "
                "UsePartitionTimeOnInvalidTimestamp) to process such data"
            )
        return timestamp

    def __repr__(self) -> str:
        return "FailOnInvalidTimestamp()"


class LogAndSkipOnInvalidTimestamp:
    """The record's own timestamp; a negative one is returned as is, so the task logs and drops the record."""

    def extract(self, record: ConsumerRecord, partition_time: int) -> int:
        return record.timestamp

    def __repr__(self) -> str:
        return "LogAndSkipOnInvalidTimestamp()"


class UsePartitionTimeOnInvalidTimestamp:
    """The record's own timestamp; a negative one is replaced by the partition time.

    Fails when the partition time is not known yet (the first record of a partition).
    """

    def extract(self, record: ConsumerRecord, partition_time: int) -> int:
        timestamp = record.timestamp
        if timestamp >= 0:
            return timestamp
        if partition_time < 0:
            raise StreamsError(
                f"record at topic={record.topic}, partition={record.partition}, offset={record.offset} "
                f"has an invalid (negative) timestamp {timestamp} and the partition time is not "
                "known yet, so no timestamp can be inferred"
            )
        return partition_time

    def __repr__(self) -> str:
        return "UsePartitionTimeOnInvalidTimestamp()"


class WallclockTimestampExtractor:
    """The system clock at extraction time: processing-time semantics."""

    def extract(self, record: ConsumerRecord, partition_time: int) -> int:
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "WallclockTimestampExtractor()"


ExtractFunction = Callable[[ConsumerRecord, int], int]


def as_extract_function(extractor: object) -> ExtractFunction:
    """The `extract` callable of an extractor object, or the extractor itself if it is a function."""
    extract = getattr(extractor, "extract", None)
    if callable(extract):
        return extract  # type: ignore[no-any-return]
    if callable(extractor):
        return extractor
    raise TypeError(
        f"a timestamp extractor needs extract(record, partition_time) or must be callable, got {extractor!r}"
    )
