"""KIP-441 on the fake cluster: a new instance warms up before it takes stateful tasks over."""

from __future__ import annotations

from pathlib import Path

from streams_core.processor.task_id import TaskId
from streams_core.runtime.topic_partition import TopicPartition
from streams_core.testing import FakeKafkaCluster

from .harness import CHANGELOG, Instance, counting_topology, counts, eventually, streams_config

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
