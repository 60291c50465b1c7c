"""StreamTask: an active task of the Kafka runtime (KIP-28 "Workflow Summary").

It owns the task's PartitionGroup (one RecordQueue per source partition) and the TaskProcessor
that runs records through the sub-topology, and tracks the consumed offsets it will commit and
its IQv2 position (saved with each checkpoint, continued when the task reopens from local state).
Records are deserialized and timestamped as they arrive (`add_records`), then processed in
partition-time order (`process`); stream time is the partition group's, never decreasing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.processor.internals.processor_metadata import ProcessorMetadata
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.processor.internals.record_deserializer import DeserializationHandler
from streams_core.processor.internals.stream_time import StreamTime
from streams_core.processor.internals.task_processor import TaskProcessor
from streams_core.processor.processor import Record
from streams_core.runtime.tasks.partition_group import LagProvider, PartitionGroup, RecordInfo, caught_up
from streams_core.runtime.tasks.record_collector_impl import RecordCollectorImpl
from streams_core.runtime.tasks.record_queue import RecordQueue
from streams_core.runtime.tasks.topic_partition_metadata import TopicPartitionMetadata, encode_serialized
from streams_core.state.internals.processor_state_manager import ProcessorStateManager

__all__ = ["StreamTask"]

log = logging.getLogger(__name__)


class StreamTask:
    """One sub-topology over one partition group, processed in timestamp order."""

    def __init__(
        self,
        task_id: TaskId,
        partitions: Iterable[TopicPartition],
        topology: ProcessorTopology,
        config: StreamsConfig,
        state_manager: ProcessorStateManager,
        record_collector: RecordCollectorImpl,
        *,
        deserialization_handler: DeserializationHandler | None = None,
        wall_clock: Callable[[], int] | None = None,
        checkpoint_on_commit: bool = True,
        lag: LagProvider = caught_up,
    ) -> None:
        """`lag`: the main consumer's `current_lag`, for `max.task.idle.ms` (the default, every
        partition caught up, suits a driver that buffers every input as it arrives)."""
        self.id = task_id
        self.partitions = frozenset(partitions)
        self.state_manager = state_manager
        self.record_collector = record_collector
        kwargs: dict[str, Any] = {"deserialization_handler": deserialization_handler}
        if wall_clock is not None:
            kwargs["wall_clock"] = wall_clock
        self.processor = TaskProcessor(task_id, topology, config, state_manager, record_collector, **kwargs)
        queues = {tp: self._new_queue(tp) for tp in sorted(self.partitions)}
        self._consumer_lag = lag
        self._finished: set[TopicPartition] = set()
        """Partitions at their KIP-95 stop offset: nothing more to wait for (`finish_partition`)."""
        self.partition_group: PartitionGroup[Record[Any, Any]] = PartitionGroup(
            queues, max_task_idle_ms=config["max.task.idle.ms"], stream_time=self.processor.clock, lag=self._lag
        )
        self._record_info: RecordInfo[Record[Any, Any]] = RecordInfo()
        self.consumed_offsets: dict[TopicPartition, int] = {}
        """Offset of the last record processed per partition since the task was created."""
        self._restored_position = state_manager.loaded_position
        """The position saved with the checkpoint the task's stores were loaded from (docs/iqv2.md)."""
        self._committed_position = dict(self._restored_position)
        self._prepared_position: dict[TopicPartition, int] = {}
        self._fetched_offsets: dict[TopicPartition, int] = {}
        """Offset of the last record fetched per partition, records the handlers skipped included."""
        self._committed_offsets: dict[TopicPartition, int] = {}
        self._prepared_offsets: dict[TopicPartition, int] = {}
        self.processed_records = 0
        self.restored_records = 0
        self._checkpoint_on_commit = checkpoint_on_commit

    def __repr__(self) -> str:
        return f"StreamTask({self.id}, partitions={sorted(self.partitions)})"

    def _new_queue(self, tp: TopicPartition) -> RecordQueue[Record[Any, Any]]:
        """A partition's queue with its pipeline (deserialize → timestamp → Record) and source node."""
        extracted_time = StreamTime()
        reader = self.processor.record_reader(tp.topic, extracted_time)
        return RecordQueue(tp, reader, self.processor.source_node(tp.topic), extracted_time)

    def _lag(self, tp: TopicPartition) -> int | None:
        """The consumer's lag of `tp`, but 0 once a batch run finished it: records written past its
        stop offset belong to the next run, and are never buffered here."""
        return 0 if tp in self._finished else self._consumer_lag(tp)

    def add_input_partition(self, tp: TopicPartition) -> None:
        """Read `tp` too (a topic that a pattern source matched after the task was created)."""
        self.partition_group.add_queue(self._new_queue(tp))
        self.partitions = self.partitions | {tp}

    @property
    def position(self) -> Mapping[TopicPartition, int]:
        """IQv2's Position of the task's stores: per source partition, the offset of the last record
        processed, or, before one since the task reopened from local state, the one its checkpoint saved."""
        restored = self._restored_position
        return {**restored, **self.consumed_offsets} if restored else self.consumed_offsets

    @property
    def dropped_records(self) -> int:
        """Records skipped by the deserialization handler or for an invalid timestamp."""
        return self.processor.dropped_records

    @property
    def stream_time(self) -> int:
        return self.processor.stream_time

    @property
    def commit_needed(self) -> bool:
        """Records were processed, or skipped records moved the offsets to commit."""
        return self.processor.commit_needed or self.committable_offsets() != self._committed_offsets

    @property
    def commit_requested(self) -> bool:
        return self.processor.commit_requested

    def add_records(self, tp: TopicPartition, raw_records: Iterable[Any]) -> int:
        """Buffer consumed records of one partition; returns that partition's queue size."""
        if not isinstance(raw_records, Sequence):
            raw_records = list(raw_records)
        last = self._fetched_offsets.get(tp)
        if last is not None and raw_records and raw_records[0].offset <= last:
            raw_records = self._drop_refetched(tp, raw_records, last)
        size = self.partition_group.add_raw_records(tp, raw_records)
        if raw_records:
            self._fetched_offsets[tp] = raw_records[-1].offset
        return size

    def resume_at(self, tp: TopicPartition, offset: int) -> None:
        """The consumer was sought to `offset` for `tp` after the task was created: records fetched
        before the seek, below `offset`, are dropped when they arrive (`add_records`)."""
        self._fetched_offsets[tp] = offset - 1

    def _drop_refetched(self, tp: TopicPartition, raw_records: Sequence[Any], last: int) -> Sequence[Any]:
        """Records at or below the last one buffered came from a fetch made before a seek: a batch
        the thread's poll returned while the rebalance listener created this task."""
        kept = [r for r in raw_records if r.offset > last]
        log.info(
            "task %s: dropped %d records of %s at or below offset %d (fetched before the task's seek)",
            self.id, len(raw_records) - len(kept), tp, last, extra={"task": str(self.id)},
        )
        return kept

    def process(self, max_records: int, now_ms: int) -> int:
        """Process up to `max_records` buffered records in partition-time order; returns how many.

        Stops early when nothing is processable or a processor asked for a commit. Nothing is
        buffered and no lag changes while this runs, so whether the task may go on is asked
        again only once a partition ran empty (Kafka asks before every record, with the same
        answers).
        """
        group = self.partition_group
        if not group.ready_to_process(now_ms):
            return 0
        processor = self.processor
        process = processor.process_record
        punctuate = processor.maybe_punctuate_stream_time
        punctuations = processor.stream_time_punctuations
        clock = processor.clock
        offsets = self.consumed_offsets
        info = self._record_info
        # a partition can only run empty here (nothing is added while processing): the group says when
        info.drained = False
        done = 0
        while done < max_records:
            record = group.next_record(info)
            if record is None:
                break
            queue = info.queue
            assert queue is not None
            tp = queue.partition
            process(queue.source, record, tp.topic, tp.partition, info.offset)
            offsets[tp] = info.offset
            done += 1
            if clock.value >= punctuations.due:
                punctuate()
            if processor.commit_requested:
                break
            if info.drained:
                info.drained = False
                if group.num_buffered() and not group.ready_to_process(now_ms):
                    break
        self.processed_records += done
        return done

    def punctuate_wall_clock(self, now_ms: int | None = None) -> bool:
        return self.processor.maybe_punctuate_wall_clock(now_ms)

    def committable_offsets(self) -> dict[TopicPartition, int]:
        """The next offset to read per partition: its queue's head, else past everything fetched.

        So a record skipped by the deserialization handler or the timestamp policy is committed
        past once nothing before it waits in the queue, even when no later record is processed
        (as Kafka Streams commits a drained partition at the consumer's position); otherwise
        every restart would read it, and send it to the dead-letter topic, again.
        """
        offsets = {tp: offset + 1 for tp, offset in self.consumed_offsets.items()}
        for tp, fetched in self._fetched_offsets.items():
            head = self.partition_group.queue(tp).head_record_offset
            offsets[tp] = fetched + 1 if head is None else head
        return offsets

    def committable_offset(self, tp: TopicPartition) -> int | None:
        """`committable_offsets()` of one partition; None before anything of it was fetched."""
        fetched = self._fetched_offsets.get(tp)
        if fetched is None:
            consumed = self.consumed_offsets.get(tp)
            return None if consumed is None else consumed + 1
        head = self.partition_group.queue(tp).head_record_offset
        return fetched + 1 if head is None else head

    def drained_partitions(self) -> list[TopicPartition]:
        """Partitions with nothing buffered (their committable offset may move to the consumer's position)."""
        group = self.partition_group
        return [tp for tp in self.partitions if not group.num_buffered(tp)]

    def note_position(self, tp: TopicPartition, position: int) -> None:
        """A drained partition's consumer position: commit there, past transaction markers (KAFKA-6607)."""
        if not self.partition_group.num_buffered(tp) and position > 0:
            self._fetched_offsets[tp] = max(self._fetched_offsets.get(tp, -1), position - 1)

    def finish_partition(self, tp: TopicPartition, stop_offset: int) -> None:
        """KIP-95: everything of `tp` before `stop_offset` was processed; commit exactly there.

        (The consumer may have moved past a transaction marker at the stop offset's left.)
        """
        self._fetched_offsets[tp] = max(self._fetched_offsets.get(tp, -1), stop_offset - 1)
        self._finished.add(tp)

    @property
    def committed_offsets(self) -> dict[TopicPartition, int]:
        """The offsets of the task's last commit (the next offset to read per partition)."""
        return dict(self._committed_offsets)

    def prepare_commit(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Flush the stores; returns the offsets to commit (next offset to read per partition), each
        with its partition's time and the task's processor metadata as metadata (Kafka's
        `committableOffsetsAndMetadata`)."""
        self.processor.prepare_commit()
        self._prepared_offsets = self.committable_offsets()
        self._prepared_position = dict(self.consumed_offsets)
        group = self.partition_group
        processor_metadata = self.processor.context.processor_metadata.serialize()
        return {
            tp: OffsetAndMetadata(offset, encode_serialized(group.queue(tp).polled_time, processor_metadata))
            for tp, offset in self._prepared_offsets.items()
        }

    def initialize_task_time_and_processor_metadata(self, committed: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Continue each partition's time, and stream time, from the metadata of its committed
        offset, and the processor metadata from all of them, the largest value of each key (Kafka's
        `initializeTaskTimeAndProcessorMetadata`): after restoration, before the processors start.
        A partition without a committed offset starts at UNKNOWN."""
        processor_metadata = ProcessorMetadata()
        for tp in sorted(self.partitions):
            found = committed.get(tp)
            if found is None:
                log.debug("task %s: no committed offset for %s, so no partition time", self.id, tp)
                continue
            decoded = TopicPartitionMetadata.decode(found.metadata)
            self.partition_group.set_partition_time(tp, decoded.partition_time)
            processor_metadata.update(decoded.processor_metadata)
            log.debug("task %s: partition time of %s set to the committed %d", self.id, tp, decoded.partition_time)
        self.processor.context.processor_metadata = processor_metadata
        if len(processor_metadata):
            log.debug("task %s: committed processor metadata %s", self.id, processor_metadata)

    def post_commit(self, produced_offsets: Mapping[TopicPartition, int]) -> None:
        """After a commit: the state manager notes the changelog offsets written, and checkpoints
        them when the guarantee says so (`produced_offsets`: last delivered offset per partition)."""
        state = self.state_manager
        state.update_changelog_offsets(
            {tp: produced_offsets[tp] + 1 for tp in state.changelog_partitions.values() if tp in produced_offsets}
        )
        # a source topic that is a store's changelog: the store holds it up to the committed offset
        state.update_changelog_offsets(self._prepared_offsets)
        self.processor.post_commit()
        self._committed_offsets = self._prepared_offsets
        self._committed_position.update(self._prepared_position)
        if self._checkpoint_on_commit:
            state.checkpoint(self._committed_position)

    def close(self, *, clean: bool = True) -> None:
        """Close processors and stores and release the task directory; a clean close checkpoints, with
        the position of the last commit (under exactly-once, what processed since is aborted)."""
        self.partition_group.clear()
        try:
            if clean:
                self.state_manager.flush()
                self.state_manager.checkpoint(self._committed_position)
        finally:
            self.processor.close()

    def partitions_to_pause(self, buffered_limit: int, max_lag_ms: int) -> list[TopicPartition]:
        """Flow control: partitions whose queue is full or runs ahead of stream time, marked paused."""
        return self.partition_group.partitions_to_pause(buffered_limit, max_lag_ms)

    def partitions_to_resume(self, buffered_limit: int, max_lag_ms: int) -> list[TopicPartition]:
        """Flow control: paused partitions that drained or fell back in time, marked resumed."""
        return self.partition_group.partitions_to_resume(buffered_limit, max_lag_ms)

    def num_buffered(self, tp: TopicPartition | None = None) -> int:
        """Records buffered in one partition's queue, or in all of them."""
        return self.partition_group.num_buffered(tp)

    def partition_metrics(self, tp: TopicPartition) -> dict[str, Any]:
        """One partition's buffered and skipped records, and whether flow control paused it."""
        return self.partition_group.partition_metrics(tp)
