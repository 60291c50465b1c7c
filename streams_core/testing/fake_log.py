"""The logs of the fake cluster: records, log entries, transactions' markers, partitions.

A partition is a list of offsets; a data record may belong to a transaction, whose marker takes
one offset of its own, so read_committed readers stop at the last stable offset (before any
open transaction) and skip aborted records, as a broker's do. Used by `fake_topics.py` (the
logs) and `fake_transaction_coordinator.py` (the markers).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import NamedTuple

from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.topic_partition import TopicPartition

__all__ = [
    "FakeRecord",
    "FakeRecordMetadata",
    "FakeTransaction",
    "Headers",
    "LogEntry",
    "PartitionLog",
    "as_committed",
    "offsets_of",
]


def as_committed(offsets: Mapping[TopicPartition, OffsetAndMetadata | int]) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets to commit as aiokafka's commit calls take them: an offset alone has empty metadata."""
    return {
        tp: OffsetAndMetadata(*committed) if isinstance(committed, tuple) else OffsetAndMetadata(committed)
        for tp, committed in offsets.items()
    }


def offsets_of(committed: Mapping[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
    """The offsets alone, without their metadata (as events and `committed()` report them)."""
    return {tp: c.offset for tp, c in committed.items()}


Headers = tuple[tuple[str, bytes], ...]
"""A record's headers as the fake logs keep them."""


class FakeRecord(NamedTuple):
    """A record in a partition's log, as a consumer returns it (the `RawRecord` port)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


class FakeRecordMetadata(NamedTuple):
    """Where a delivered batch went (the `RecordMetadata` port): its first record's offset."""

    topic: str
    partition: int
    offset: int


class FakeTransaction:
    """One transaction of a transactional id: its partitions, pending offsets, and fate."""

    __slots__ = ("deadline", "first_offsets", "offsets", "state", "transactional_id")

    def __init__(self, transactional_id: str, timeout_ms: int) -> None:
        self.transactional_id = transactional_id
        self.state = "open"
        self.first_offsets: dict[TopicPartition, int] = {}
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self.deadline = time.monotonic() + timeout_ms / 1000


class LogEntry:
    """One offset of a log: a data record (maybe in a transaction) or a transaction marker."""

    __slots__ = ("record", "txn")

    def __init__(self, record: FakeRecord | None, txn: FakeTransaction | None) -> None:
        self.record = record
        self.txn = txn

    def visible(self, read_committed: bool) -> bool:
        """A data record a reader at this isolation level may see (never a marker, never aborted)."""
        if self.record is None:
            return False
        return not read_committed or self.txn is None or self.txn.state == "committed"


class PartitionLog:
    """A partition's log; `log_start` moves when records are deleted (retention)."""

    __slots__ = ("entries", "log_start", "open_txns")

    def __init__(self) -> None:
        self.entries: list[LogEntry] = []
        self.log_start = 0
        self.open_txns: dict[FakeTransaction, int] = {}

    @property
    def high_watermark(self) -> int:
        return len(self.entries)

    @property
    def last_stable_offset(self) -> int:
        return min(self.open_txns.values(), default=len(self.entries))
