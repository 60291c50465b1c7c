"""RecordMetadata: where a record is (topic, partition, offset); what the processor context and the producer give."""

from __future__ import annotations

from typing import Protocol

__all__ = ["RecordMetadata"]


class RecordMetadata(Protocol):
    """Where a record is: its topic, partition and offset (Kafka Streams' `RecordMetadata`
    interface). What `ProcessorContext.record_metadata` gives of the record being processed, what
    a fetched record carries and what the producer answers for a delivered batch (its first record)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...
