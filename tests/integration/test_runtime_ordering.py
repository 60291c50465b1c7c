"""KafkaStreams against the real broker: stream time, flow control and max.task.idle.ms (issue 4).

Two co-partitioned input topics feed one recording processor (two source nodes into one
processor: one sub-topology, task p holds partition p of both). Timestamps are explicit.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from streams_core import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.kafka_streams import State
from streams_core.runtime.tasks.partition_group import PauseReason
from tests.integration.streams_testkit import (
    Recorder,
    RecordSender,
    StreamsApp,
    metric_total,
    partition_groups,
    recording_topology,
    wait_until,
)
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker


def base_time() -> int:
    """A timestamp a minute ago: inside the broker's accepted range and retention."""
    return int(time.time() * 1000) - 60_000


async def copartitioned_topics(bootstrap: str, partitions: int) -> tuple[str, str, str]:
    left, right, sink = unique_topic("left"), unique_topic("right"), unique_topic("joined")
    for topic in (left, right, sink):
        await create_topic(bootstrap, topic, partitions)
    return left, right, sink


async def test_copartitioned_topics_are_processed_in_timestamp_order(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """Records of both topics already in Kafka come out of each task in timestamp order."""
    left, right, sink = await copartitioned_topics(bootstrap_servers, 2)
    t0, per_partition = base_time(), 300
    expected: dict[TaskId, list[tuple[str, int]]] = {}
    for partition in range(2):
        # Interleaved: left gets the even timestamps from t0, right the odd ones.
        left_recs = [Rec(b"L%d-%d" % (partition, i), b"l", partition, t0 + 2 * i) for i in range(per_partition)]
        right_recs = [Rec(b"R%d-%d" % (partition, i), b"r", partition, t0 + 2 * i + 1) for i in range(per_partition)]
        await produce(bootstrap_servers, left, left_recs)
        await produce(bootstrap_servers, right, right_recs)
        expected[TaskId(0, partition)] = sorted(
            [(left, r.timestamp_ms) for r in left_recs] + [(right, r.timestamp_ms) for r in right_recs],
            key=lambda e: e[1],
        )

    recorder = Recorder()
    # The task waits (up to 1 s) for a partition whose records are not fetched yet, so a fetch
    # that brings one topic first cannot make it process out of order. (The last record, alone
    # in its task once the other topic is drained, waits that long too.)
    config = {"max.task.idle.ms": 1000}
    async with StreamsApp(
        bootstrap_servers, tmp_path, lambda: recording_topology([left, right], sink, recorder), config=config
    ) as app:
        streams = await app.start(0)
        await wait_until(lambda: len(recorder) == 4 * per_partition, 30, message=lambda: f"{len(recorder)} processed")
        assert metric_total(streams, "processed_records") == 4 * per_partition

    by_task = recorder.by_task()
    assert set(by_task) == {TaskId(0, 0), TaskId(0, 1)}
    for task, seen in by_task.items():
        timestamps = [s.timestamp for s in seen]
        assert timestamps == sorted(timestamps), f"task {task} out of timestamp order"
        assert [(s.topic, s.timestamp) for s in seen] == expected[task]
        assert {s.partition for s in seen} == {task.partition}
    # The sink got every record once.
    assert len(await read_all(bootstrap_servers, sink)) == 4 * per_partition


async def test_partition_far_ahead_in_time_is_paused_then_resumed(bootstrap_servers: str, tmp_path: Path) -> None:
    """max.partition.time.lag.ms: a partition far ahead of the task's stream time waits for the other.

    left's backlog is buffered first (right is empty, so the task idles); then right gets
    records 50 s ahead. A processing round takes at most 1000 records, so after the first one
    left still holds records with old timestamps: right is paused until left catches up.
    """
    left, right, sink = await copartitioned_topics(bootstrap_servers, 1)
    t0 = base_time()
    left_recs = [Rec(b"L%d" % i, b"l", 0, t0 + i) for i in range(1500)]
    right_recs = [Rec(b"R%d" % i, b"r", 0, t0 + 50_000 + i) for i in range(200)]
    await produce(bootstrap_servers, left, left_recs)
    total = len(left_recs) + len(right_recs)

    recorder = Recorder()
    config = {
        "max.partition.time.lag.ms": 1000,
        # Holds left's backlog until right has data; right's records, last, wait this long too.
        "max.task.idle.ms": 3000,
        "buffered.records.per.partition": 10_000,  # no pause for a full buffer here
    }
    async with (
        RecordSender(bootstrap_servers) as sender,
        StreamsApp(
            bootstrap_servers, tmp_path, lambda: recording_topology([left, right], sink, recorder), config=config
        ) as app,
    ):
        streams = await app.start(0)
        left_tp, right_tp = TopicPartition(left, 0), TopicPartition(right, 0)

        def left_buffered() -> int:
            groups = partition_groups(streams)
            return sum(g.num_buffered(left_tp) for g in groups.values()) if groups else 0

        await wait_until(lambda: left_buffered() == len(left_recs), 30, message=lambda: f"{left_buffered()} buffered")
        assert len(recorder) == 0
        await sender.send(right, right_recs)
        await wait_until(lambda: len(recorder) == total, 30, message=lambda: f"{len(recorder)}/{total} processed")
        (group,) = partition_groups(streams).values()
        assert group.pause_counts[PauseReason.TIME_LAG] >= 1
        assert group.resume_counts[PauseReason.TIME_LAG] == group.pause_counts[PauseReason.TIME_LAG]
        assert group.pause_counts[PauseReason.BUFFER_FULL] == 0
        assert group.paused_partitions == {}
        assert right_tp in group.partitions
        thread = streams.metrics()["threads"][0]
        assert thread["pause_count"] >= 1 and thread["resume_count"] == thread["pause_count"]

    keys = recorder.keys()
    assert len(keys) == total and set(keys.values()) == {1}
    assert [s.topic for s in recorder.seen] == [left] * len(left_recs) + [right] * len(right_recs)


async def test_full_partition_buffer_is_paused_then_resumed(bootstrap_servers: str, tmp_path: Path) -> None:
    """buffered.records.per.partition: a partition whose queue is full is paused until it drains.

    right stays empty, so the task holds left's records for max.task.idle.ms each time: the
    queue fills with the first fetch, the partition is paused (fetches stop), and it resumes
    once processing drained it.
    """
    left, right, sink = await copartitioned_topics(bootstrap_servers, 1)
    t0 = base_time()
    left_recs = [Rec(b"L%d" % i, b"l", 0, t0 + i) for i in range(2000)]
    await produce(bootstrap_servers, left, left_recs)
    left_tp = TopicPartition(left, 0)

    recorder = Recorder()
    config = {"buffered.records.per.partition": 10, "max.task.idle.ms": 1000}
    async with StreamsApp(
        bootstrap_servers, tmp_path, lambda: recording_topology([left, right], sink, recorder), config=config
    ) as app:
        streams = await app.start(0)

        def paused() -> bool:
            groups = list(partition_groups(streams).values())
            return bool(groups) and groups[0].paused_partitions == {left_tp: PauseReason.BUFFER_FULL}

        await wait_until(paused, 30, interval=0.005, message="left was never paused")
        (group,) = partition_groups(streams).values()
        buffered = group.num_buffered(left_tp)
        assert 10 <= buffered < len(left_recs) and len(recorder) == 0
        await asyncio.sleep(0.3)  # while paused (and idling), no more of left's records arrive
        assert group.num_buffered(left_tp) == buffered and len(recorder) == 0

        await wait_until(lambda: len(recorder) == len(left_recs), 30, message=lambda: f"{len(recorder)} processed")
        assert group.pause_counts[PauseReason.BUFFER_FULL] >= 1
        assert group.resume_counts[PauseReason.BUFFER_FULL] == group.pause_counts[PauseReason.BUFFER_FULL]
        assert group.pause_counts[PauseReason.TIME_LAG] == 0 and group.paused_partitions == {}
        thread = streams.metrics()["threads"][0]
        assert thread["pause_count"] >= 1 and thread["resume_count"] == thread["pause_count"]

    assert [s.key for s in recorder.seen] == [r.key for r in left_recs]


async def test_task_waits_max_task_idle_ms_for_an_empty_partition(bootstrap_servers: str, tmp_path: Path) -> None:
    """Data on one of two co-partitioned topics: nothing is processed for max.task.idle.ms, then all."""
    left, right, sink = await copartitioned_topics(bootstrap_servers, 1)
    t0 = base_time()
    left_recs = [Rec(b"L%d" % i, b"l", 0, t0 + i) for i in range(50)]
    await produce(bootstrap_servers, left, left_recs)

    recorder = Recorder()
    idle_ms = 2000
    async with StreamsApp(
        bootstrap_servers,
        tmp_path,
        lambda: recording_topology([left, right], sink, recorder),
        config={"max.task.idle.ms": idle_ms},
    ) as app:
        streams = await app.start(0)
        await streams.wait_for_state(State.RUNNING, timeout=30)

        def buffered() -> bool:
            groups = partition_groups(streams)
            return bool(groups) and sum(g.num_buffered() for g in groups.values()) + len(recorder) > 0

        await wait_until(buffered, 30, interval=0.01, message="left's records never buffered")
        buffered_at = time.monotonic()
        assert len(recorder) == 0
        await wait_until(lambda: len(recorder) == len(left_recs), 10, message=lambda: f"{len(recorder)} processed")
        (group,) = partition_groups(streams).values()
        assert group.enforced_processing_count >= 1

    waited = recorder.seen[0].processed_at - buffered_at
    # The test sees the records buffered up to a few polls late on a loaded machine (seen: 0.125 s
    # while two other suites ran), so the lower bound allows 0.25 s of observation lag.
    assert idle_ms / 1000 - 0.25 <= waited <= idle_ms / 1000 + 1.5, waited
    assert [s.key for s in recorder.seen] == [r.key for r in left_recs]
