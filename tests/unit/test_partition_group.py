"""PartitionGroup: next record by partition time, stream time, max.task.idle.ms, flow control."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any, NamedTuple, cast

import pytest

from streams_core import Consumed, Serdes, StreamsBuilder, StreamsConfig
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.tasks.partition_group import PartitionGroup, PauseReason, RecordInfo
from streams_core.runtime.tasks.record_collector_impl import RecordCollectorImpl
from streams_core.runtime.tasks.record_queue import UNKNOWN, RecordQueue
from streams_core.runtime.tasks.stream_task import StreamTask
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.testing.fake_kafka_cluster import FakeRecord


class StampedRecord(NamedTuple):
    """A queued record for these tests: where it came from, its timestamp, key and value."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: object
    value: object

A = TopicPartition("a", 0)
B = TopicPartition("b", 0)
C = TopicPartition("c", 0)


def make_group(*partitions: TopicPartition, max_task_idle_ms: int = 0) -> PartitionGroup:
    def queue(tp: TopicPartition) -> RecordQueue:
        def deserialize(raw: tuple[int, int]) -> StampedRecord:
            return StampedRecord(tp.topic, tp.partition, raw[0], raw[1], None, None)

        return RecordQueue(tp, deserialize, source=f"source-{tp.topic}")

    return PartitionGroup({tp: queue(tp) for tp in partitions}, max_task_idle_ms=max_task_idle_ms)


_offsets = itertools.count()


def add(group: PartitionGroup, tp: TopicPartition, *timestamps: int) -> int:
    return group.add_raw_records(tp, [Raw(next(_offsets), ts) for ts in timestamps])


class Raw(NamedTuple):
    offset: int
    timestamp: int


def poll(group: PartitionGroup) -> tuple[StampedRecord, RecordQueue] | None:
    """The next record and its queue, or None (next_record fills a RecordInfo in)."""
    info: RecordInfo = RecordInfo()
    record = group.next_record(info)
    if record is None:
        return None
    assert info.queue is not None and info.offset == record.offset
    return record, info.queue


def next_record(group: PartitionGroup) -> tuple[StampedRecord, RecordQueue]:
    item = poll(group)
    assert item is not None
    return item


def drain(group: PartitionGroup) -> list[tuple[TopicPartition, int]]:
    out = []
    while (item := poll(group)) is not None:
        record, queue = item
        out.append((queue.partition, record.timestamp))
    return out


def test_interleaved_partitions_come_out_in_timestamp_order() -> None:
    group = make_group(A, B, C)
    add(group, A, 1, 4, 7)
    add(group, B, 2, 5, 8)
    add(group, C, 3, 6, 9)
    assert [ts for _, ts in drain(group)] == list(range(1, 10))


def test_next_record_returns_queue_with_its_source() -> None:
    group = make_group(A)
    add(group, A, 1)
    record, queue = next_record(group)
    assert (record.topic, record.timestamp, queue.source) == ("a", 1, "source-a")
    assert poll(group) is None


def test_ties_go_to_the_lower_partition() -> None:
    group = make_group(B, A)
    add(group, B, 5)
    add(group, A, 5)
    assert drain(group) == [(A, 5), (B, 5)]


def test_choice_is_by_partition_time_not_head_timestamp() -> None:
    group = make_group(A, B)
    add(group, A, 10, 1)  # partition time 1, head record 10
    add(group, B, 5)
    assert drain(group) == [(A, 10), (A, 1), (B, 5)]


def test_add_returns_queue_size_and_counts_buffered() -> None:
    group = make_group(A, B)
    assert add(group, A, 1, 2) == 2
    assert add(group, A, 3) == 3
    assert add(group, B, 1) == 1
    assert group.num_buffered() == 4 and group.num_buffered(A) == 3
    poll(group)
    assert group.num_buffered() == 3


def test_unknown_partition_is_rejected() -> None:
    with pytest.raises(KeyError, match="x-0"):
        make_group(A).add_raw_records(TopicPartition("x", 0), [(0, 1)])


def test_stream_time_is_the_highest_timestamp_taken_never_one_still_buffered() -> None:
    group = make_group(A, B)
    assert group.stream_time == UNKNOWN
    add(group, A, 10, 20)
    add(group, B, 3)
    assert group.stream_time == UNKNOWN, "buffering alone does not move stream time"
    assert next_record(group)[0].timestamp == 3 and group.stream_time == 3
    assert next_record(group)[0].timestamp == 10 and group.stream_time == 10
    add(group, B, 5)  # a late record: taken before A's 20 (lower partition time), stream time stays
    assert next_record(group)[0].timestamp == 5 and group.stream_time == 10
    assert next_record(group)[0].timestamp == 20 and group.stream_time == 20


def test_stream_time_never_decreases_and_matches_model() -> None:
    rng = random.Random(3)
    partitions = [TopicPartition("t", p) for p in range(4)]
    for _ in range(100):
        group = make_group(*partitions)
        last = UNKNOWN
        buffers: dict[TopicPartition, list[int]] = {tp: [] for tp in partitions}
        model_pt = dict.fromkeys(partitions, UNKNOWN)
        model_stream = UNKNOWN
        for _ in range(60):
            if rng.random() < 0.4:
                tp = rng.choice(partitions)
                batch = [rng.randrange(100) for _ in range(rng.randrange(1, 4))]
                add(group, tp, *batch)
                buffers[tp].extend(batch)
            else:
                item = poll(group)
                non_empty = [tp for tp in partitions if buffers[tp]]
                if not non_empty:
                    assert item is None
                else:
                    expected_tp = min(non_empty, key=lambda tp: (model_pt[tp], tp))
                    assert item is not None
                    record, queue = item
                    assert queue.partition == expected_tp
                    assert record.timestamp == buffers[expected_tp].pop(0)
                    model_stream = max(model_stream, record.timestamp)
            for tp in partitions:
                if buffers[tp]:
                    model_pt[tp] = max(model_pt[tp], min(buffers[tp]))
            assert group.stream_time == model_stream >= last
            last = group.stream_time


def test_all_partitions_buffered() -> None:
    group = make_group(A, B)
    assert not group.all_partitions_buffered()
    add(group, A, 1)
    assert not group.all_partitions_buffered()
    add(group, B, 1)
    assert group.all_partitions_buffered()
    assert not make_group().all_partitions_buffered()


def test_pause_when_buffer_full_and_resume_below_half() -> None:
    group = make_group(A, B)
    add(group, A, *range(10))
    add(group, B, *range(9))
    assert group.partitions_to_pause(buffered_limit=10, max_lag_ms=1000) == [A]
    assert group.partitions_to_pause(buffered_limit=10, max_lag_ms=1000) == []  # not twice
    assert group.paused_partitions == {A: PauseReason.BUFFER_FULL}
    for _ in range(10):  # 5 from A, 5 from B (interleaved by time)
        poll(group)
    assert group.num_buffered(A) == 5
    assert group.partitions_to_resume(buffered_limit=10, max_lag_ms=1000) == [A]
    assert group.paused_partitions == {}
    assert group.pause_counts[PauseReason.BUFFER_FULL] == 1
    assert group.resume_counts[PauseReason.BUFFER_FULL] == 1


def test_buffer_full_pause_holds_until_half_drained() -> None:
    group = make_group(A)
    add(group, A, *range(10))
    group.partitions_to_pause(10, 1000)
    for _ in range(4):
        poll(group)
    assert group.partitions_to_resume(10, 1000) == []  # 6 left > 10 // 2
    poll(group)
    assert group.partitions_to_resume(10, 1000) == [A]


def test_pause_partition_running_ahead_of_stream_time_and_resume_when_caught_up() -> None:
    group = make_group(A, B)
    add(group, A, 0, 10, 20)
    add(group, B, 500, 600)
    assert group.partitions_to_pause(buffered_limit=100, max_lag_ms=100) == [], "no stream time yet"
    poll(group)
    assert group.stream_time == 0
    assert group.partitions_to_pause(buffered_limit=100, max_lag_ms=100) == [B]
    assert group.paused_partitions == {B: PauseReason.TIME_LAG}
    assert group.partitions_to_resume(100, 100) == []
    poll(group)
    poll(group)
    assert group.stream_time == 20
    add(group, A, 450)
    poll(group)  # A's 450 taken: stream time 450, B is no longer 100 ahead
    assert group.stream_time == 450
    assert group.partitions_to_resume(100, 100) == [B]
    assert group.pause_counts[PauseReason.TIME_LAG] == 1
    assert group.resume_counts[PauseReason.TIME_LAG] == 1


def test_empty_partition_is_never_paused_for_time_lag() -> None:
    group = make_group(A, B)
    add(group, B, 1000)
    poll(group)  # B empty, partition time 1000
    add(group, A, 0)
    assert group.partitions_to_pause(100, 10) == []


def test_time_lag_pause_lifts_when_the_partition_drains() -> None:
    group = make_group(A, B)
    add(group, A, 0)
    add(group, B, 500)
    poll(group)  # A's 0: stream time 0
    assert group.partitions_to_pause(100, 10) == [B]
    drain(group)
    assert group.partitions_to_resume(100, 10) == [B]


def test_clear_resets_everything() -> None:
    group = make_group(A, B, max_task_idle_ms=10)
    add(group, A, *range(5))
    group.partitions_to_pause(5, 100)
    group.clear()
    assert group.num_buffered() == 0 and poll(group) is None
    assert group.stream_time == UNKNOWN and group.partition_time(A) == UNKNOWN
    assert group.paused_partitions == {}


def test_queues_must_be_registered_under_their_partition() -> None:
    queue: RecordQueue[StampedRecord] = RecordQueue(A, lambda raw: None)
    with pytest.raises(ValueError):
        PartitionGroup({B: queue})


def test_skipped_records_summed_over_partitions() -> None:
    queues: dict[TopicPartition, RecordQueue[StampedRecord]] = {tp: RecordQueue(tp, lambda raw: None) for tp in (A, B)}
    group = PartitionGroup(queues)
    group.add_raw_records(A, [1, 2])
    group.add_raw_records(B, [3])
    assert group.skipped_records == 3 and group.num_buffered() == 0


def test_an_added_queue_takes_part_in_the_choice_and_in_idling() -> None:
    """A partition added later (a topic a pattern source matched) is one of the group's like the others."""
    group = make_group(A, max_task_idle_ms=100)
    add(group, A, 5)
    assert group.ready_to_process(0)
    group.add_queue(make_group(B).queue(B))
    assert group.partitions == {A, B}
    assert not group.ready_to_process(0), "B is empty now: the task idles"
    add(group, B, 3)
    assert group.ready_to_process(0)
    record, queue = poll(group)  # type: ignore[misc]
    assert (queue.partition, record.timestamp) == (B, 3)
    with pytest.raises(ValueError, match="already belongs"):
        group.add_queue(make_group(A).queue(A))
    filled = make_group(C)
    add(filled, C, 1)
    with pytest.raises(ValueError, match="is not empty"):
        group.add_queue(filled.queue(C))


def test_a_task_stops_when_a_partition_runs_empty_and_waits_max_task_idle_ms(tmp_path: Path) -> None:
    """StreamTask.process: once a partition is drained mid-call, the rest waits for the idle time."""
    s = Serdes.String()
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(s, s)).to("out")
    internal = builder.build().internal_topology_builder
    internal.set_application_id("idle")
    config = StreamsConfig({"application.id": "idle", "state.dir": str(tmp_path), "max.task.idle.ms": 1000})
    p0, p1 = TopicPartition("in", 0), TopicPartition("in", 1)
    sent: list[bytes] = []

    class Collector:
        def send(self, topic: str, key: Any, value: Any, timestamp: int, headers: Any, partition: Any) -> None:
            sent.append(value)

    state = ProcessorStateManager(TaskId(0, 0), "idle", tmp_path / "0_0")
    task = StreamTask(TaskId(0, 0), [p0, p1], internal.build_subtopology(0, config), config, state,
                      cast(RecordCollectorImpl, Collector()), checkpoint_on_commit=False)  # fmt: skip
    task.processor.init()
    task.add_records(p0, [FakeRecord("in", 0, 0, 1, b"k", b"a"), FakeRecord("in", 0, 1, 5, b"k", b"c")])
    task.add_records(p1, [FakeRecord("in", 1, 0, 2, b"k", b"b")])
    assert task.process(10, 0) == 2 and sent == [b"a", b"b"]
    assert task.process(10, 500) == 0
    assert task.process(10, 1000) == 1 and sent == [b"a", b"b", b"c"]
    task.close()
