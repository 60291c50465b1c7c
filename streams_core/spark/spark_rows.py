"""Kafka rows as Spark carries them: the source's `InputRow`, the sink's `OutputRow`, and the runner's headers.

Spark's Kafka source and sink lose what a read-back topic needs (the record timestamp, the record's
origin for replay detection), so the runner writes both as headers and the reading side strips
them. Encoding and decoding live here together, apart from the executor that runs the records.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from streams_core.common.headers import Headers

__all__ = [
    "ORIGIN_HEADER",
    "TIMESTAMP_HEADER",
    "InputRow",
    "Origin",
    "OutputRow",
    "event_time",
    "iter_rows",
    "kafka_order",
    "origin_header",
    "runner_headers",
    "timestamp_header",
]

#: Spark's Kafka sink cannot set a record's timestamp, so records written to topics the topology
#: reads back (repartition and `through` topics) carry it in this header (8 bytes, big-endian);
#: the reading side takes the timestamp from it and drops the header.
TIMESTAMP_HEADER = "streams-core.spark.timestamp"
_TS = struct.Struct(">q")

#: Spark's Kafka sink is at-least-once: a query killed between writing a micro-batch and
#: committing it writes that batch again when rerun. Records a stage reading only external topics
#: writes to a read-back topic carry their origin (source partition, offset, output index, topic)
#: in this header; a keyed stage remembers, per key and origin partition, the last origin it
#: applied and skips replays (`SubtopologyExecutor.process(..., applied)`).
ORIGIN_HEADER = "streams-core.spark.origin"
_ORIGIN = struct.Struct(">iqi")
_RUNNER_HEADERS = (TIMESTAMP_HEADER, ORIGIN_HEADER)

Origin = tuple[str, int, int, int]
"""(topic, partition, offset, output index) of a record's origin."""


class InputRow(NamedTuple):
    """One Kafka record as the Spark source gives it (timestamp in ms)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers


class OutputRow(NamedTuple):
    """One record for Spark's Kafka sink; `partition` None (all but custom partitioners' records)
    lets the producer's murmur2 default partitioner pick it, as on our runtime."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    partition: int | None = None


def timestamp_header(timestamp: int) -> tuple[str, bytes]:
    """The `TIMESTAMP_HEADER` carrying `timestamp` to the reading side."""
    return TIMESTAMP_HEADER, _TS.pack(timestamp)


def origin_header(topic: str, partition: int, offset: int, index: int) -> tuple[str, bytes]:
    """The `ORIGIN_HEADER` of the `index`-th record written while processing `topic`/`partition`@`offset`."""
    return ORIGIN_HEADER, _ORIGIN.pack(partition, offset, index) + topic.encode()


def kafka_order(rows: Iterable[InputRow]) -> list[InputRow]:
    """Rows in the order a Kafka Streams task takes them: offset order per partition, and across
    partitions the head with the lowest timestamp first (PartitionGroup's choice)."""
    by_partition: dict[tuple[str, int], list[InputRow]] = {}
    for row in rows:
        by_partition.setdefault((row.topic, row.partition), []).append(row)
    if len(by_partition) == 1:
        (only,) = by_partition.values()
        return sorted(only, key=lambda r: r.offset)
    queues = [sorted(part, key=lambda r: r.offset) for part in by_partition.values()]
    return list(heapq.merge(*queues, key=event_time))


def event_time(row: InputRow) -> int:
    """The record's timestamp as its processors see it: the runner's header on a read-back topic
    (Spark's sink stamps the produce time), else the Kafka record's."""
    for name, value in row.headers:
        if name == TIMESTAMP_HEADER:
            timestamp: int = _TS.unpack(value)[0]
            return timestamp
    return row.timestamp


def runner_headers(row: InputRow) -> tuple[int, Headers, Origin | None]:
    """The record's timestamp, its headers without the runner's, and its origin if stamped."""
    headers = row.headers
    if not any(name in _RUNNER_HEADERS for name, _ in headers):
        return row.timestamp, headers, None
    timestamp, origin = row.timestamp, None
    for name, value in headers:
        if name == TIMESTAMP_HEADER:
            timestamp = _TS.unpack(value)[0]
        elif name == ORIGIN_HEADER:
            partition, offset, index = _ORIGIN.unpack_from(value)
            origin = (value[_ORIGIN.size :].decode(), partition, offset, index)
    return timestamp, tuple(h for h in headers if h[0] not in _RUNNER_HEADERS), origin


def iter_rows(rows: Iterable[Any]) -> Iterator[InputRow]:
    """InputRows from mappings or Spark Rows with the source's column names."""
    for r in rows:
        get = r.__getitem__
        headers = get("headers") or ()
        yield InputRow(
            get("topic"), get("partition"), get("offset"), get("timestamp"), get("key"), get("value"),
            tuple((h["key"], h["value"]) for h in headers),
        )  # fmt: skip
