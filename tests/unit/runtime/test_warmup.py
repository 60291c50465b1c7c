"""KIP-441 in the runtime: a new instance warms up before it takes stateful tasks over (fake cluster),
the probing-rebalance timer, and the end offsets the leader keeps for task lags."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from pathlib import Path

from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment import AssignmentInfo
from streams_core.runtime.assignment.streams_partition_assignor import StreamsPartitionAssignor, TaskStates
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.testing import FakeKafkaCluster

from .harness import APP, CHANGELOG, Instance, counting_topology, counts, eventually, streams_config

HA = {
    "acceptable.recovery.lag": 5,
    "probing.rebalance.interval.ms": 300,
    "statestore.cache.max.bytes": 0,  # every update reaches the changelog, so lags are in records
}
WORDS = [f"w{i}" for i in range(12)]


async def test_new_instance_warms_up_then_takes_over_after_the_probing_rebalance(tmp_path: Path) -> None:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out"):
        cluster.create_topic(topic, 4)
    first = Instance(cluster, counting_topology(), streams_config(tmp_path, HA, instance=0))
    second = Instance(cluster, counting_topology(), streams_config(tmp_path, HA, instance=1))
    try:
        await first.start()
        for r in range(10):
            for word in WORDS:
                cluster.produce("in", word, word, timestamp=1000 + r)
        await eventually(lambda: counts(cluster).get("w0") == 10, what="the first instance counted everything")
        leader = first.streams.threads[0].assignor

        await second.start(wait=False)
        await eventually(lambda: second.standby_tasks(), what="warm-up replicas on the new instance")
        assert second.tasks() == set(), "a new instance must not get stateful actives before it caught up"
        assert len(first.tasks()) == 4
        assert len(second.standby_tasks()) == 2, "max.warmup.replicas defaults to 2"
        ends = leader.changelog_end_offsets
        assert sum(ends.values()) == 120, "the leader fetched the changelog end offsets before joining"
        assert leader.task_end_offset_sums()[TaskId(0, 1)] == ends[TopicPartition(CHANGELOG, 1)] > 5

        await eventually(lambda: len(second.tasks()) == 2 and len(first.tasks()) == 2, timeout=5, what="the takeover")
        await second.wait_running()
        assert not second.standby_tasks()
        cluster.produce("in", "w0", "w0", timestamp=2000)
        await eventually(lambda: counts(cluster).get("w0") == 11, what="counting goes on from the warmed-up state")
    finally:
        await second.close()
        await first.close()


def assignor(calls: list[int]) -> StreamsPartitionAssignor:
    metadata = TopologyMetadata(counting_topology().internal_topology_builder, APP)
    return StreamsPartitionAssignor(
        metadata, process_id="p", application_server="", num_standby_replicas=0, task_states=TaskStates,
        request_rebalance=lambda: calls.append(1),
    )


async def test_a_scheduled_probing_rebalance_fires_once_and_a_new_assignment_replaces_it() -> None:
    calls: list[int] = []
    member = assignor(calls)
    now = time.time_ns() // 1_000_000
    member.on_assignment(AssignmentInfo(next_scheduled_rebalance_ms=now + 60).encode())
    await asyncio.sleep(0.02)
    assert calls == []
    await eventually(lambda: calls == [1], what="the probing rebalance")
    member.on_assignment(AssignmentInfo(next_scheduled_rebalance_ms=now + 100).encode())
    member.on_assignment(AssignmentInfo().encode())  # the next rebalance came first: nothing pending
    await asyncio.sleep(0.2)
    assert calls == [1]


async def test_end_offsets_refresh_keeps_the_last_known_on_failure() -> None:
    member = assignor([])

    async def partitions_for(topic: str) -> set[int]:
        return {0, 1}

    async def end_offsets(partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: 10 * (tp.partition + 1) for tp in partitions}

    async def broken(partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        raise ConnectionError("broker gone")

    await member.refresh_end_offsets(partitions_for, end_offsets)
    assert member.task_end_offset_sums() == {TaskId(0, 0): 10, TaskId(0, 1): 20}
    await member.refresh_end_offsets(partitions_for, broken)
    assert member.task_end_offset_sums() == {TaskId(0, 0): 10, TaskId(0, 1): 20}
