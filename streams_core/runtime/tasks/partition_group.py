"""PartitionGroup: the record queues of one task, which pick the next record by partition time.

Definitions (KIP-28 "Stream Time and Sync."; as Kafka's original `PartitionGroup`):

- the next record is the head of the non-empty queue with the lowest partition time (ties: the
  lower `TopicPartition`, so the choice is deterministic);
- stream time is the highest timestamp of the records taken so far, so it never decreases and
  never runs ahead of what was processed (as today's Kafka Streams; the original KIP-28 text took
  the lowest buffered partition time, which jumps to records not yet processed while a task
  waits for an empty partition, and fires stream-time punctuations early). Whether the task
  waits for a partition with nothing buffered is `max.task.idle.ms`'s (`ready_to_process`, KIP-695).
"""

from __future__ import annotations

import enum
import heapq
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic

from streams_core.common.topic_partition import TopicPartition
from streams_core.processor.internals.stream_time import StreamTime
from streams_core.runtime.tasks.record_queue import UNKNOWN, R, RecordQueue

__all__ = ["LagProvider", "PartitionGroup", "PauseReason", "RecordInfo", "caught_up"]

log = logging.getLogger(__name__)

LagProvider = Callable[[TopicPartition], "int | None"]
"""A partition's records on the broker not yet fetched into the task (the consumer's
`current_lag`): None while unknown (no fetch response yet)."""

MAX_TASK_IDLE_MS_DISABLED = -1


def caught_up(partition: TopicPartition) -> int:
    """The lag provider where every input is buffered as it arrives (the TopologyTestDriver's, as
    Kafka's driver, whose mock consumer has no end offsets): nothing is left to fetch."""
    return 0


class PauseReason(enum.Enum):
    """Why flow control paused a partition."""

    BUFFER_FULL = "buffer_full"
    TIME_LAG = "time_lag"


def _names(partitions: Iterable[TopicPartition]) -> str:
    """Partitions as Kafka logs them: "[topic-0, topic-1]"."""
    return "[" + ", ".join(map(str, sorted(partitions))) + "]"


class RecordInfo(Generic[R]):
    """Where `next_record` took its record from: the queue and the record's offset.

    Kafka's `PartitionGroup.RecordInfo`: the caller owns one and `next_record` fills it in, so
    taking a record allocates nothing.
    """

    __slots__ = ("drained", "offset", "queue")

    def __init__(self) -> None:
        self.queue: RecordQueue[R] | None = None
        self.offset = -1
        self.drained = False
        """Set when `next_record` took a queue's last record (the caller resets it)."""


class PartitionGroup(Generic[R]):
    """The queues of one task: next record by partition time, stream time, idling, flow control.

    `max_task_idle_ms` (KIP-695): -1 never waits for an empty partition; 0 waits for one whose
    records on the broker are not fetched yet (or whose lag is not known yet); above 0 also waits
    that long for a caught-up empty partition to get data (`ready_to_process`). `lag` gives a
    partition's lag (the consumer's `current_lag`; default: `caught_up`). `stream_time` is the
    task's `StreamTime` cell, which this group advances (a new one when not given).
    """

    __slots__ = (
        "_clock",
        "_enforced",
        "_idle_deadlines",
        "_idle_start_ms",
        "_lag",
        "_non_empty",
        "_paused",
        "_queues",
        "_total_buffered",
        "enforced_processing_count",
        "max_task_idle_ms",
        "pause_counts",
        "resume_counts",
    )

    def __init__(
        self,
        queues: Mapping[TopicPartition, RecordQueue[R]],
        *,
        max_task_idle_ms: int = 0,
        stream_time: StreamTime | None = None,
        lag: LagProvider = caught_up,
    ) -> None:
        for partition, queue in queues.items():
            if queue.partition != partition:
                raise ValueError(f"queue of {queue.partition} registered under {partition}")
        self.max_task_idle_ms = max_task_idle_ms
        self.enforced_processing_count = 0
        self.pause_counts: dict[PauseReason, int] = dict.fromkeys(PauseReason, 0)
        self.resume_counts: dict[PauseReason, int] = dict.fromkeys(PauseReason, 0)
        self._queues: dict[TopicPartition, RecordQueue[R]] = dict(queues)
        self._non_empty: list[RecordQueue[R]] = []
        self._clock = stream_time if stream_time is not None else StreamTime()
        self._total_buffered = 0
        self._idle_start_ms: int | None = None
        self._idle_deadlines: dict[TopicPartition, int] = {}
        """Per caught-up empty partition: when the task stops waiting for it (Kafka's `idlePartitionDeadlines`)."""
        self._enforced = False
        """The last ready answer went on without some empty partitions (logged when it starts)."""
        self._lag = lag
        self._paused: dict[TopicPartition, PauseReason] = {}
        for queue in self._queues.values():
            self._total_buffered += len(queue)
            if len(queue):
                self._non_empty.append(queue)
        heapq.heapify(self._non_empty)

    def __repr__(self) -> str:
        return (
            f"PartitionGroup(partitions={len(self._queues)}, buffered={self._total_buffered}, "
            f"stream_time={self._clock.value})"
        )

    def add_raw_records(self, partition: TopicPartition, raw_records: Iterable[Any]) -> int:
        """Buffer raw records of one partition; returns that queue's new size."""
        queue = self._queues.get(partition)
        if queue is None:
            raise KeyError(f"{partition} does not belong to this partition group")
        before = len(queue)
        size = queue.add_raw_records(raw_records)
        self._total_buffered += size - before
        if before == 0 and size:
            heapq.heappush(self._non_empty, queue)
        return size

    def add_queue(self, queue: RecordQueue[R]) -> None:
        """Take a new, empty partition's queue (Kafka's `updatePartitions` for an added partition)."""
        if queue.partition in self._queues:
            raise ValueError(f"{queue.partition} already belongs to this partition group")
        if len(queue):
            raise ValueError(f"the queue of {queue.partition} is not empty")
        self._queues[queue.partition] = queue

    def next_record(self, info: RecordInfo[R]) -> R | None:
        """Poll the head of the queue with the lowest partition time into `info`; None when empty.

        O(log n) in the number of non-empty partitions. Only a queue that was empty can change
        partition time on add (a buffered minimum bounds it), so heap order stays exact.
        """
        heap = self._non_empty
        if not heap:
            return None
        queue = heap[0]
        before = queue.partition_time
        record: R = queue.poll()  # type: ignore[assignment]  # a queue in the heap is never empty
        info.offset = queue.polled_offset
        info.queue = queue
        self._total_buffered -= 1
        if queue.is_empty:
            heapq.heappop(heap)
            info.drained = True
        elif queue.partition_time != before:
            heapq.heapreplace(heap, queue)
        clock = self._clock  # StreamTime.advance, inlined (once per record)
        if record.timestamp > clock.value:
            clock.value = record.timestamp
        return record

    @property
    def stream_time(self) -> int:
        """The highest timestamp of the records taken so far (never decreasing; UNKNOWN before the first)."""
        return self._clock.value

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return frozenset(self._queues)

    def queue(self, partition: TopicPartition) -> RecordQueue[R]:
        return self._queues[partition]

    def partition_time(self, partition: TopicPartition) -> int:
        return self._queues[partition].partition_time

    def set_partition_time(self, partition: TopicPartition, partition_time: int) -> None:
        """A partition continues from a committed partition time; stream time rises to it (Kafka's
        `PartitionGroup.setPartitionTime`, when a task starts)."""
        self._queues[partition].set_partition_time(partition_time)
        self._clock.advance(partition_time)

    def num_buffered(self, partition: TopicPartition | None = None) -> int:
        """Records buffered in one partition, or in all of them."""
        return self._total_buffered if partition is None else len(self._queues[partition])

    def partition_metrics(self, partition: TopicPartition) -> dict[str, Any]:
        """One partition's figures for metrics: records buffered and skipped, and whether flow control paused it."""
        queue = self._queues[partition]
        return {"buffered": len(queue), "skipped": queue.skipped_records, "paused": partition in self._paused}

    def all_partitions_buffered(self) -> bool:
        """True when every partition of the task has at least one buffered record."""
        return bool(self._queues) and len(self._non_empty) == len(self._queues)

    @property
    def skipped_records(self) -> int:
        """Records the deserializer skipped, over all partitions."""
        return sum(queue.skipped_records for queue in self._queues.values())

    @property
    def idle_start_ms(self) -> int | None:
        """When the task started waiting for an empty partition (`max.task.idle.ms`); None while it does not."""
        return self._idle_start_ms

    def ready_to_process(self, now_ms: int) -> bool:
        """Whether the task should process now (Kafka's `PartitionGroup.readyToProcess`, KIP-695).

        1. Every partition has data: ready.
        2. `max.task.idle.ms` is -1: ready when any partition has data.
        3. Otherwise, an empty partition holds the task back while its lag is unknown (no fetch
           response yet) or above 0 (records on the broker not fetched yet); a caught-up one
           (lag 0) holds it until `now_ms` reaches its deadline, `max.task.idle.ms` after the
           call that first saw it empty and caught up (at 0: at once).
        4. No partition has data: not ready. Otherwise ready, with the partitions given up on;
           each such answer counts in `enforced_processing_count`.
        """
        queues = self._queues
        non_empty = len(self._non_empty)
        if non_empty == len(queues):
            self._idle_start_ms = None
            if self._idle_deadlines:
                self._idle_deadlines.clear()
            self._enforced = False
            return bool(non_empty)
        if self.max_task_idle_ms == MAX_TASK_IDLE_MS_DISABLED:
            self._idle_start_ms = None
            return bool(non_empty)
        deadlines = self._idle_deadlines
        lag = self._lag
        enforced: dict[TopicPartition, int] = {}
        for partition, queue in queues.items():
            if len(queue):
                deadlines.pop(partition, None)
                continue
            fetched_lag = lag(partition)
            if fetched_lag is None or fetched_lag > 0:
                deadlines.pop(partition, None)
                return self._wait(now_ms, non_empty, partition, fetched_lag)
            deadline = deadlines.get(partition)
            if deadline is None:
                deadline = deadlines[partition] = now_ms + self.max_task_idle_ms
            if now_ms < deadline:
                return self._wait(now_ms, non_empty, partition, 0)
            enforced[partition] = deadline
        if not non_empty:
            self._idle_start_ms = None
            return False
        self._idle_start_ms = None
        self.enforced_processing_count += 1
        if not self._enforced:
            self._enforced = True
            log.debug(
                "going on although %s are empty on the broker too (deadlines %s; max.task.idle.ms %d; now %d): "
                "records of %s may be processed out of timestamp order",
                _names(enforced), {str(tp): at for tp, at in enforced.items()}, self.max_task_idle_ms, now_ms,
                _names(q.partition for q in self._non_empty),
            )  # fmt: skip
        return True

    def _wait(self, now_ms: int, non_empty: int, partition: TopicPartition, fetched_lag: int | None) -> bool:
        """Not ready: `partition` is empty and may get records that go first; the wait's start is noted."""
        self._enforced = False
        if not non_empty:
            self._idle_start_ms = None
            return False
        if self._idle_start_ms is None:
            self._idle_start_ms = now_ms
            if log.isEnabledFor(logging.DEBUG):
                why = (
                    "its lag is not known yet" if fetched_lag is None
                    else f"{fetched_lag} records on the broker are not fetched yet" if fetched_lag
                    else f"it is caught up: waiting max.task.idle.ms ({self.max_task_idle_ms}) for records"
                )  # fmt: skip
                log.debug("waiting for empty %s: %s", partition, why)
        return False

    def _lag_exceeded(self, queue: RecordQueue[R], max_lag_ms: int) -> bool:
        """Buffered partition whose partition time runs ahead of stream time beyond the limit.

        Empty queues never count: pausing one could stall the task (its stream time would
        only move with data the pause withholds).
        """
        return (
            self._clock.value != UNKNOWN
            and len(queue) > 0
            and queue.partition_time - self._clock.value > max_lag_ms
        )

    def partitions_to_pause(self, buffered_limit: int, max_lag_ms: int) -> list[TopicPartition]:
        """Partitions to pause now (and mark paused): queue size >= buffered_limit, or ahead.

        `buffered_limit` is buffered.records.per.partition and `max_lag_ms` is
        max.partition.time.lag.ms. Already paused partitions are not returned again.
        """
        paused = self._paused
        out: list[TopicPartition] = []
        for partition, queue in self._queues.items():
            if partition in paused:
                continue
            if len(queue) >= buffered_limit:
                reason = PauseReason.BUFFER_FULL
            elif self._lag_exceeded(queue, max_lag_ms):
                reason = PauseReason.TIME_LAG
            else:
                continue
            paused[partition] = reason
            self.pause_counts[reason] += 1
            out.append(partition)
        return out

    def partitions_to_resume(self, buffered_limit: int, max_lag_ms: int) -> list[TopicPartition]:
        """Paused partitions to resume now (and mark resumed), with hysteresis.

        A partition paused for a full buffer resumes once it drained to buffered_limit // 2 or
        fewer records; one paused for time lag once it is no more than max_lag_ms ahead (or
        empty). Neither resumes while the other condition holds, so it is not paused again at
        once.
        """
        out: list[TopicPartition] = []
        for partition, reason in list(self._paused.items()):
            queue = self._queues[partition]
            size = len(queue)
            limit = buffered_limit // 2 if reason is PauseReason.BUFFER_FULL else buffered_limit - 1
            if size > limit or self._lag_exceeded(queue, max_lag_ms):
                continue
            del self._paused[partition]
            self.resume_counts[reason] += 1
            out.append(partition)
        return out

    @property
    def paused_partitions(self) -> dict[TopicPartition, PauseReason]:
        """Partitions flow control holds paused, with why (re-apply them after a rebalance)."""
        return dict(self._paused)

    def clear(self) -> None:
        """Empty every queue and forget partition, stream and idle times and pauses."""
        for queue in self._queues.values():
            queue.clear()
        self._non_empty.clear()
        self._total_buffered = 0
        self._clock.reset()
        self._idle_start_ms = None
        self._idle_deadlines.clear()
        self._enforced = False
        self._paused.clear()
