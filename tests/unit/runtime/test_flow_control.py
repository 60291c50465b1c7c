"""Flow control: a partition is paused when its buffer is full, resumed once drained, and paused
again after a rebalance (the consumer forgets pauses; the task buffers refill)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streams_core import Topology
from streams_core.common.topic_partition import TopicPartition
from streams_core.testing import FakeKafkaCluster

from .harness import APP, eventually, running, streams_config

LEFT, RIGHT = TopicPartition("left", 0), TopicPartition("right", 0)


def joined_topology() -> Topology:
    """Two sources into one processor: one task over left-0 and right-0, processed in timestamp order."""
    return (
        Topology()
        .add_source("L", "left")
        .add_source("R", "right")
        .add_processor("P", lambda: _Forward(), "L", "R")
        .add_sink("SINK", "out", "P")
    )


class _Forward:
    def init(self, context: Any) -> None:
        self.context = context

    def process(self, record: Any) -> None:
        self.context.forward(record)

    def close(self) -> None:
        return None


def setup() -> tuple[FakeKafkaCluster, dict[str, Any]]:
    cluster = FakeKafkaCluster()
    for topic in ("left", "right", "out"):
        cluster.create_topic(topic)
    extra = {"buffered.records.per.partition": 4, "max.task.idle.ms": 60_000}
    return cluster, extra


async def test_full_buffer_pauses_the_partition_and_draining_resumes_it(tmp_path: Path) -> None:
    cluster, extra = setup()
    async with running(cluster, joined_topology(), streams_config(tmp_path, extra)) as app:
        consumer = app.supplier.main_consumers[0]
        for i in range(10):
            cluster.produce("left", b"l", b"%d" % i, timestamp=i)
        await eventually(lambda: LEFT in consumer.paused(), what="left paused")
        assert cluster.records("out") == [], "the task waits for right (max.task.idle.ms)"
        assert [e["partitions"] for e in cluster.events_of("pause")] == [[LEFT]]
        assert app.metric("pause_count") == 1
        for i in range(3):
            cluster.produce("right", b"r", b"%d" % i, timestamp=100 + i)
        await eventually(lambda: LEFT not in consumer.paused(), what="left resumed")
        await eventually(lambda: len(cluster.records("out")) >= 10, what="left drained")
        assert [e["partitions"] for e in cluster.events_of("resume")] == [[LEFT]]
        assert app.metric("resume_count") == 1
    left_out = [r.value for r in cluster.records("out") if r.key == b"l"]
    assert left_out == [b"%d" % i for i in range(10)], "every paused record processed once, in order"


async def test_a_partition_below_the_limit_is_not_paused(tmp_path: Path) -> None:
    cluster, extra = setup()
    async with running(cluster, joined_topology(), streams_config(tmp_path, extra)) as app:
        for i in range(3):
            cluster.produce("left", b"l", b"%d" % i, timestamp=i)
        consumer = app.supplier.main_consumers[0]
        await eventually(lambda: app.streams.threads[0].metrics()["poll_count"] > 5, what="a few polls")
        assert consumer.paused() == frozenset()
        assert cluster.kinds("pause") == []


async def test_pauses_are_applied_again_after_a_rebalance(tmp_path: Path) -> None:
    cluster, extra = setup()
    async with running(cluster, joined_topology(), streams_config(tmp_path, extra)) as app:
        consumer = app.supplier.main_consumers[0]
        for i in range(10):
            cluster.produce("left", b"l", b"%d" % i, timestamp=i)
        await eventually(lambda: LEFT in consumer.paused(), what="left paused")
        rebalances = len(cluster.events_of("rebalance"))
        cluster.kick(APP, consumer.member_id)  # session expiry: the member rejoins, everything is revoked
        await eventually(
            lambda: len(cluster.events_of("rebalance")) > rebalances and cluster.group_stable(APP)
            and cluster.members(APP) == [consumer.member_id],
            what="rebalance",
        )
        await eventually(lambda: LEFT in consumer.paused(), what="left paused again")
        assert len(cluster.events_of("pause")) == 2
        for i in range(3):
            cluster.produce("right", b"r", b"%d" % i, timestamp=100 + i)
        await eventually(lambda: len(cluster.records("out")) == 10, what="the left records (right waits for more left)")
    left_out = [r.value for r in cluster.records("out") if r.key == b"l"]
    assert left_out == [b"%d" % i for i in range(10)], "nothing lost or doubled across the rebalance"
