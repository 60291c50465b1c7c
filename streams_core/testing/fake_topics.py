"""The fake cluster's topics and their logs: create, produce, read at an isolation level, retention.

A read stops at the high watermark, or at the last stable offset for read_committed, and skips
markers and invisible records; reading below the log start (after retention) or past the end is
`OffsetOutOfRangeError`, as from a broker. Transactions live a layer up
(`fake_transaction_coordinator.py`); reads call its `_expire_transactions` hook first, since the
coordinator aborts a timed-out transaction before anyone can read past it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence

from streams_core import clients
from streams_core.common.partitioner import default_partition
from streams_core.common.topic_partition import TopicPartition
from streams_core.testing.fake_cluster_events import ClusterEvents
from streams_core.testing.fake_log import FakeRecord, FakeTransaction, Headers, LogEntry, PartitionLog

__all__ = ["FakeTopics"]


class FakeTopics(ClusterEvents):
    """Topics as lists of partition logs; the part of the cluster producers append to and consumers read."""

    def __init__(self, *, default_partitions: int = 1) -> None:
        super().__init__()
        self._topics: dict[str, list[PartitionLog]] = {}
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._round_robin = itertools.count()
        self.default_partitions = default_partitions

    # -- topics -----------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int | None = None, config: Mapping[str, str] | None = None) -> None:
        """Create a topic (an existing one with the same partition count is kept)."""
        count = partitions or self.default_partitions
        existing = self._topics.get(name)
        if existing is not None:
            if len(existing) != count:
                raise ValueError(f"topic {name!r} exists with {len(existing)} partitions, not {count}")
            return
        self._topics[name] = [PartitionLog() for _ in range(count)]
        self._topic_configs[name] = dict(config or {})
        self.log_event("topic_created", "cluster", topic=name, partitions=count)
        self.notify()

    def delete_topic(self, name: str) -> None:
        if self._topics.pop(name, None) is not None:
            self._topic_configs.pop(name, None)
            self.log_event("topic_deleted", "cluster", topic=name)
            self.notify()

    def topics(self) -> dict[str, int]:
        """Every topic with its partition count."""
        return {name: len(parts) for name, parts in self._topics.items()}

    def partition_count(self, topic: str) -> int | None:
        parts = self._topics.get(topic)
        return len(parts) if parts is not None else None

    def topic_config(self, topic: str) -> dict[str, str]:
        return dict(self._topic_configs[topic])

    def _partition(self, tp: TopicPartition) -> PartitionLog:
        parts = self._topics.get(tp.topic)
        if parts is None or not 0 <= tp.partition < len(parts):
            raise clients.KafkaTimeoutError(f"unknown topic or partition {tp}")
        return parts[tp.partition]

    def has_partition(self, tp: TopicPartition) -> bool:
        parts = self._topics.get(tp.topic)
        return parts is not None and 0 <= tp.partition < len(parts)

    def delete_records(self, tp: TopicPartition, before_offset: int) -> None:
        """Retention: records below `before_offset` are gone (the log start moves)."""
        part = self._partition(tp)
        part.log_start = max(part.log_start, min(before_offset, part.high_watermark))

    # -- producing and reading --------------------------------------------------------------

    def produce(
        self,
        topic: str,
        key: bytes | str | None,
        value: bytes | str | None,
        *,
        timestamp: int | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> FakeRecord:
        """Append one committed record (as a non-transactional producer would); str is UTF-8 encoded."""
        if topic not in self._topics:
            self.create_topic(topic)
        key_bytes = key.encode() if isinstance(key, str) else key
        value_bytes = value.encode() if isinstance(value, str) else value
        count = len(self._topics[topic])
        if partition is None:
            partition = (
                default_partition(key_bytes, count) if key_bytes is not None else next(self._round_robin) % count
            )
        ts = timestamp if timestamp is not None else time.time_ns() // 1_000_000
        (record,) = self._append(TopicPartition(topic, partition), [(ts, key_bytes, value_bytes, tuple(headers))], None, "test")
        return record

    def _append(
        self,
        tp: TopicPartition,
        rows: Sequence[tuple[int, bytes | None, bytes | None, Headers]],
        txn: FakeTransaction | None,
        client: str,
    ) -> list[FakeRecord]:
        part = self._partition(tp)
        out = []
        if txn is not None and txn not in part.open_txns:
            part.open_txns[txn] = part.high_watermark
            txn.first_offsets[tp] = part.high_watermark
        for ts, key, value, headers in rows:
            record = FakeRecord(tp.topic, tp.partition, part.high_watermark, ts, key, value, headers)
            part.entries.append(LogEntry(record, txn))
            out.append(record)
        self.log_event(
            "produce", client, topic=tp.topic, partition=tp.partition, offset=out[0].offset if out else None,
            count=len(out), transactional_id=txn.transactional_id if txn else None,
        )
        self.notify()
        return out

    def records(self, topic: str, *, committed_only: bool = True, partition: int | None = None) -> list[FakeRecord]:
        """The data records of a topic (partition by partition); `committed_only` as read_committed sees them."""
        self._expire_transactions()
        out = []
        for index, part in enumerate(self._topics.get(topic, [])):
            if partition is not None and index != partition:
                continue
            end = part.last_stable_offset if committed_only else part.high_watermark
            for entry in part.entries[part.log_start:end]:
                if entry.visible(committed_only) and entry.record is not None:
                    out.append(entry.record)
        return out

    def values(self, topic: str, *, committed_only: bool = True) -> list[bytes | None]:
        return [r.value for r in self.records(topic, committed_only=committed_only)]

    def end_offsets(self, topic: str, *, committed_only: bool = False) -> dict[TopicPartition, int]:
        """High watermarks per partition (last stable offsets with `committed_only`)."""
        self._expire_transactions()
        return {
            TopicPartition(topic, i): (p.last_stable_offset if committed_only else p.high_watermark)
            for i, p in enumerate(self._topics.get(topic, []))
        }

    def _end_offset(self, tp: TopicPartition, read_committed: bool) -> int:
        self._expire_transactions()
        part = self._partition(tp)
        return part.last_stable_offset if read_committed else part.high_watermark

    def _read(
        self, tp: TopicPartition, position: int, read_committed: bool, max_records: int
    ) -> tuple[list[FakeRecord], int]:
        """Records from `position` (past markers and invisible records) and the position after them."""
        self._expire_transactions()
        part = self._partition(tp)
        end = part.last_stable_offset if read_committed else part.high_watermark
        if position < part.log_start or position > part.high_watermark:
            raise clients.OffsetOutOfRangeError({tp: position})
        out: list[FakeRecord] = []
        while position < end and len(out) < max_records:
            entry = part.entries[position]
            if entry.visible(read_committed) and entry.record is not None:
                out.append(entry.record)
            position += 1
        return out, position

    def _log_start(self, tp: TopicPartition) -> int:
        return self._partition(tp).log_start

    def _expire_transactions(self) -> None:
        """Hook: the transaction coordinator aborts timed-out transactions here (none at this layer)."""
