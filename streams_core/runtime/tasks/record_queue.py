"""RecordQueue: the FIFO buffer of one partition and its partition time (KIP-28 "Stream Time").

Partition time is the lowest timestamp among the buffered records, and it never decreases: a
record that arrives with a lower timestamp than the current partition time leaves it unchanged,
and when the queue drains it keeps its last value. Records are polled strictly in offset order
(FIFO); only the choice between partitions is by time (see `PartitionGroup`).

A timestamp extractor receives Kafka Streams' partition time instead (its `RecordQueue`): the
highest timestamp extracted from this partition before the record, kept in `extracted_time`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from streams_core.common.topic_partition import TopicPartition
from streams_core.processor.internals.stream_time import StreamTime

__all__ = ["UNKNOWN", "RecordDeserializer", "RecordQueue", "Stamped"]

UNKNOWN = -1
"""Partition or stream time before any record was seen (Kafka's RecordQueue.UNKNOWN)."""

class Stamped(Protocol):
    """What the record queues need of a record: its extracted timestamp (the processor's `Record` has one)."""

    @property
    def timestamp(self) -> int: ...


R = TypeVar("R", bound=Stamped)

RecordDeserializer = Callable[[Any], R | None]
"""Turns a raw consumer record (anything with an `offset`) into the record to process (the
processor's `Record`), or None when an error policy skipped it."""


class RecordQueue(Generic[R]):
    """The buffered records of one partition of a task, with the partition's time.

    Records are of any type with a `timestamp` (`Stamped`); their offsets are the raw records'
    and are kept beside them, so the record itself need not carry one (the task processes the
    processor's `Record` as it was queued: one object per consumed record).

    The lowest buffered timestamp is tracked with a monotonic deque of the records themselves
    (strictly increasing timestamps, in offset order), so add and poll are amortised O(1) and
    allocate nothing beyond the deque slots. `record_deserializer` must return a new object per
    call. `source` is free for the owner (e.g. the task's source node for this topic). Queues
    order by (partition time, partition), so a partition group can keep them in a heap.

    `extracted_time` is the cell the record deserializer reads (what its timestamp extractor
    receives) and advances: Kafka Streams' partition time, the highest timestamp extracted from
    this partition so far (UNKNOWN before the first), kept for the extractors that read it. The
    queue only resets it (`clear`) and sets it (`set_partition_time`).

    `polled_time` is Kafka Streams' partition time as of the records polled (the highest
    timestamp polled so far): what a commit stores with the offset of the queue's head.
    """

    __slots__ = (
        "_deserialize",
        "_fifo",
        "_minima",
        "_offsets",
        "extracted_time",
        "partition",
        "partition_time",
        "polled_offset",
        "polled_time",
        "skipped_records",
        "source",
    )

    def __init__(
        self,
        partition: TopicPartition,
        record_deserializer: RecordDeserializer[R],
        source: Any = None,
        extracted_time: StreamTime | None = None,
    ) -> None:
        self.partition = partition
        self.extracted_time = extracted_time if extracted_time is not None else StreamTime()
        self.source = source
        self.skipped_records = 0
        self._deserialize = record_deserializer
        self._fifo: deque[R] = deque()
        self._offsets: deque[int] = deque()
        self._minima: deque[R] = deque()
        self.partition_time = UNKNOWN
        """Lowest buffered timestamp, never decreasing; UNKNOWN before the first record (read-only
        for owners: a plain attribute, as the partition group reads it per record)."""
        self.polled_time = UNKNOWN
        self.polled_offset = UNKNOWN
        """The offset of the record the last `poll` returned."""

    def __repr__(self) -> str:
        return f"RecordQueue({self.partition}, size={len(self._fifo)}, partition_time={self.partition_time})"

    def __len__(self) -> int:
        return len(self._fifo)

    def __lt__(self, other: RecordQueue[R]) -> bool:
        """Heap order of a partition group: lower partition time first, ties by partition."""
        if self.partition_time != other.partition_time:
            return self.partition_time < other.partition_time
        return self.partition < other.partition

    def add_raw_records(self, raw_records: Iterable[Any]) -> int:
        """Deserialize and buffer raw records in order; returns the new queue size.

        Records the deserializer skips (returns None for) are counted in `skipped_records`.
        """
        deserialize = self._deserialize
        append = self._fifo.append
        append_offset = self._offsets.append
        minima = self._minima
        skipped = 0
        for raw in raw_records:
            record = deserialize(raw)
            if record is None:
                skipped += 1
                continue
            timestamp = record.timestamp
            while minima and minima[-1].timestamp >= timestamp:
                minima.pop()
            minima.append(record)
            append(record)
            append_offset(raw.offset)
        if skipped:
            self.skipped_records += skipped
        if minima:
            lowest = minima[0].timestamp
            if lowest > self.partition_time:
                self.partition_time = lowest
        return len(self._fifo)

    def poll(self) -> R | None:
        """Remove and return the head (lowest offset) record, or None when empty."""
        fifo = self._fifo
        if not fifo:
            return None
        record = fifo.popleft()
        self.polled_offset = self._offsets.popleft()
        timestamp = record.timestamp
        if timestamp > self.polled_time:
            self.polled_time = timestamp
        minima = self._minima
        if minima[0] is record:
            minima.popleft()
            if minima:
                lowest = minima[0].timestamp
                if lowest > self.partition_time:
                    self.partition_time = lowest
        return record

    @property
    def peek_head_timestamp(self) -> int:
        """Timestamp of the head record (the next `poll`), or UNKNOWN when empty."""
        return self._fifo[0].timestamp if self._fifo else UNKNOWN

    @property
    def head_record_offset(self) -> int | None:
        """Offset of the head record, or None when empty."""
        return self._offsets[0] if self._offsets else None

    @property
    def size(self) -> int:
        return len(self._fifo)

    @property
    def is_empty(self) -> bool:
        return not self._fifo

    def clear(self) -> None:
        """Drop every buffered record and forget the partition time (task closed or reset)."""
        self._fifo.clear()
        self._offsets.clear()
        self._minima.clear()
        self.partition_time = UNKNOWN
        self.polled_time = UNKNOWN
        self.extracted_time.reset()

    def set_partition_time(self, partition_time: int) -> None:
        """Continue from a partition time committed earlier (Kafka's `RecordQueue.setPartitionTime`):
        the next record's extractor receives it, and a commit stores it until a later record is polled."""
        self.polled_time = partition_time
        self.extracted_time.value = partition_time
