"""max.task.idle.ms as Kafka Streams' (KIP-695): whether a task goes on without an empty partition.

PartitionGroup rules (as Kafka's PartitionGroupTest), then a StreamTask whose lag comes from the
fake supplier's consumer, then a stream-table join over two full topics on the fake cluster.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, NamedTuple, cast

import pytest

from streams_core import Consumed, Serdes, StreamsBuilder, StreamsConfig
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.tasks.partition_group import PartitionGroup, RecordInfo
from streams_core.runtime.tasks.record_collector_impl import RecordCollectorImpl
from streams_core.runtime.tasks.record_queue import RecordQueue
from streams_core.runtime.tasks.stream_task import StreamTask
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeConsumer

from .harness import eventually, running, streams_config

A, B = TopicPartition("a", 0), TopicPartition("b", 0)


class Stamped(NamedTuple):
    """A raw record and, deserialized, the queued one: an offset and a timestamp."""

    offset: int
    timestamp: int


def group_of(lags: dict[TopicPartition, int], idle: int) -> PartitionGroup[Any]:
    """A group over A and B whose lags are read from `lags` at each check (absent: unknown)."""
    queues = {tp: RecordQueue(tp, lambda raw: raw) for tp in (A, B)}
    return PartitionGroup(queues, max_task_idle_ms=idle, lag=lags.get)


def add(group: PartitionGroup[Any], tp: TopicPartition, *timestamps: int) -> None:
    group.add_raw_records(tp, [Stamped(i, ts) for i, ts in enumerate(timestamps)])


@pytest.mark.parametrize("idle", [-1, 0, 100])
def test_every_partition_buffered_is_ready_whatever_the_lags(idle: int) -> None:
    group = group_of({}, idle)
    add(group, A, 1)
    add(group, B, 2)
    assert group.ready_to_process(0)
    assert group.enforced_processing_count == 0


def test_minus_one_never_waits_not_even_for_records_on_the_broker() -> None:
    group = group_of({B: 5}, -1)
    add(group, A, 1)
    assert group.ready_to_process(0)
    assert group_of({}, -1).ready_to_process(0) is False, "nothing buffered: nothing to process"
    assert group.enforced_processing_count == 0 and group.idle_start_ms is None


def test_zero_waits_for_a_partition_whose_lag_is_not_known_yet(caplog: pytest.LogCaptureFixture) -> None:
    lags: dict[TopicPartition, int] = {}
    group = group_of(lags, 0)
    add(group, A, 1)
    with caplog.at_level(logging.DEBUG, "streams_core.runtime.tasks.partition_group"):
        assert not group.ready_to_process(7)
    assert "waiting for empty b-0" in caplog.text and "lag is not known yet" in caplog.text
    assert group.idle_start_ms == 7
    lags[B] = 0  # a fetch response: caught up
    assert group.ready_to_process(8)
    assert group.enforced_processing_count == 1 and group.idle_start_ms is None


def test_zero_waits_while_an_empty_partition_has_records_not_fetched(caplog: pytest.LogCaptureFixture) -> None:
    lags = {A: 0, B: 1}
    group = group_of(lags, 0)
    add(group, A, 1)
    with caplog.at_level(logging.DEBUG, "streams_core.runtime.tasks.partition_group"):
        assert not group.ready_to_process(0)
        assert not group.ready_to_process(10_000), "no time limit: the records are there, fetching them is a matter of time"
        assert "1 records on the broker are not fetched yet" in caplog.text
        lags[B] = 0
        assert group.ready_to_process(10_001)
    assert "going on although [b-0] are empty on the broker too" in caplog.text
    assert group.enforced_processing_count == 1


def test_a_positive_idle_waits_that_long_for_a_caught_up_partition_then_enforces() -> None:
    """Kafka's shouldIdleAsSpecifiedWhenLagIsZero: deadline = first caught-up empty sighting + idle."""
    group = group_of({A: 0, B: 0}, 1)
    add(group, A, 1, 5)
    assert not group.ready_to_process(0)
    assert group.ready_to_process(1)
    assert group.ready_to_process(2)
    assert group.enforced_processing_count == 2


def test_the_idle_deadline_runs_from_when_the_partition_was_first_seen_caught_up_and_empty() -> None:
    lags = {A: 0, B: 3}
    group = group_of(lags, 100)
    add(group, A, 1)
    assert not group.ready_to_process(0)  # B has lag: no deadline yet
    lags[B] = 0
    assert not group.ready_to_process(50)  # B caught up: its deadline is 150
    assert not group.ready_to_process(149)
    lags[B] = 2  # new records on B's log: waited for without a time limit, and the deadline is dropped
    assert not group.ready_to_process(200)
    lags[B] = 0
    assert not group.ready_to_process(210)  # a new deadline: 310
    assert group.ready_to_process(310)
    drain(group)  # nothing buffered: not ready, B's deadline stays (as Kafka's)
    assert not group.ready_to_process(400)
    add(group, A, 2)
    assert group.ready_to_process(400), "B's deadline passed long ago"
    add(group, B, 3)
    assert group.ready_to_process(401)  # every partition buffered: deadlines dropped
    drain(group)
    add(group, A, 4)
    assert not group.ready_to_process(402), "B empty again: a new deadline, 502"
    assert group.ready_to_process(502)


def drain(group: PartitionGroup[Any]) -> None:
    info: RecordInfo[Any] = RecordInfo()
    while group.next_record(info) is not None:
        pass


# -- a StreamTask whose lags come from the fake supplier's consumer --------------------------------


def make_task(tmp_path: Path, consumer: FakeConsumer, idle: int, sent: list[bytes]) -> StreamTask:
    """One task over in-0 and in-1 (one source), forwarding values to `sent`, lags from `consumer`."""
    s = Serdes.String()
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(s, s)).to("out")
    internal = builder.build().internal_topology_builder
    internal.set_application_id("idle")
    config = StreamsConfig({"application.id": "idle", "state.dir": str(tmp_path), "max.task.idle.ms": idle})

    class Collector:
        def send(self, topic: str, key: Any, value: Any, timestamp: int, headers: Any, partition: Any) -> None:
            sent.append(value)

    state = ProcessorStateManager(TaskId(0, 0), "idle", tmp_path / "0_0")
    task = StreamTask(TaskId(0, 0), [P0, P1], internal.build_subtopology(0, config), config, state,
                      cast(RecordCollectorImpl, Collector()), checkpoint_on_commit=False,
                      lag=consumer.current_lag)  # fmt: skip
    task.processor.init()
    return task


P0, P1 = TopicPartition("in", 0), TopicPartition("in", 1)


async def fetch(consumer: FakeConsumer, task: StreamTask, tp: TopicPartition, max_records: int) -> None:
    for polled, records in (await consumer.getmany(tp, max_records=max_records)).items():
        task.add_records(polled, records)


@pytest.mark.parametrize("idle", [0, 100])
async def test_a_task_waits_for_records_of_an_empty_partition_that_are_not_fetched_yet(tmp_path: Path, idle: int) -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", 2)
    for ts in (1, 2, 3):
        cluster.produce("in", b"k", b"p0-%d" % ts, timestamp=ts, partition=0)
        cluster.produce("in", b"k", b"p1-%d" % ts, timestamp=ts, partition=1)
    consumer = FakeConsumer(cluster, client_id="c", group_id=None)
    consumer.assign([P0, P1])
    sent: list[bytes] = []
    task = make_task(tmp_path, consumer, idle, sent)
    await fetch(consumer, task, P0, 3)
    assert consumer.current_lag(P1) is None
    assert task.process(10, 0) == 0, "in-1 not fetched yet: its lag is unknown"
    await fetch(consumer, task, P1, 1)
    assert consumer.current_lag(P1) == 2
    assert task.process(10, 0) == 2 and sent == [b"p0-1", b"p1-1"]
    assert task.process(10, 1_000_000) == 0, "in-1's other two records are on the broker"
    await fetch(consumer, task, P1, 2)
    if idle:  # in-0 runs empty after its last record: caught up, it is waited for that long
        assert task.process(10, 1_000_000) == 3
        assert task.process(10, 1_000_099) == 0
        assert task.process(10, 1_000_100) == 1
    else:
        assert task.process(10, 1_000_000) == 4
    assert sent == [b"p0-1", b"p1-1", b"p0-2", b"p1-2", b"p0-3", b"p1-3"]
    task.close()


async def test_a_caught_up_empty_partition_is_waited_for_only_with_a_positive_idle(tmp_path: Path) -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", 2)
    cluster.produce("in", b"k", b"p0", timestamp=5, partition=0)
    consumer = FakeConsumer(cluster, client_id="c", group_id=None)
    consumer.assign([P0, P1])
    sent: list[bytes] = []
    at_zero = make_task(tmp_path / "zero", consumer, 0, sent)
    waiting = make_task(tmp_path / "hundred", consumer, 100, sent)
    await fetch(consumer, at_zero, P0, 10)
    consumer.seek(P0, 0)
    await fetch(consumer, waiting, P0, 10)
    assert (await consumer.getmany(P1)) == {} and consumer.current_lag(P1) == 0
    assert at_zero.process(10, 0) == 1 and at_zero.partition_group.enforced_processing_count == 1
    assert waiting.process(10, 0) == 0 and waiting.partition_group.idle_start_ms == 0
    assert waiting.process(10, 99) == 0
    assert waiting.process(10, 100) == 1 and waiting.partition_group.enforced_processing_count == 1
    assert sent == [b"p0", b"p0"]
    at_zero.close()
    waiting.close()


async def test_a_partition_finished_by_a_batch_run_is_not_waited_for(tmp_path: Path) -> None:
    """KIP-95: records written past a finished partition's stop offset belong to the next run."""
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", 2)
    cluster.produce("in", b"k", b"p0", timestamp=5, partition=0)
    consumer = FakeConsumer(cluster, client_id="c", group_id=None)
    consumer.assign([P0, P1])
    sent: list[bytes] = []
    task = make_task(tmp_path, consumer, 0, sent)
    await fetch(consumer, task, P0, 10)
    cluster.produce("in", b"k", b"late", timestamp=1, partition=1)
    cluster.produce("in", b"k", b"later", timestamp=2, partition=1)
    await consumer.getmany(P1, max_records=1)  # past the run's stop offset 0: the run drops it
    assert consumer.current_lag(P1) == 1
    assert task.process(10, 0) == 0
    task.finish_partition(P1, 0)
    assert task.process(10, 0) == 1 and sent == [b"p0"]
    task.close()


# -- the runtime: a stream-table join over two full topics at the default settings -----------------


async def test_every_order_of_a_backlog_finds_its_customer_at_the_default_idle(tmp_path: Path) -> None:
    """Small polls make the customers' queue run dry between fetches many times over: each time
    the task waits for the customers still on the broker instead of joining orders without them."""
    cluster = FakeKafkaCluster()
    for topic in ("customers", "orders"):
        cluster.create_topic(topic, 1)
    customers, orders = 600, 2000
    for i in range(customers):
        cluster.produce("customers", b"c%d" % i, b"tier-%d" % (i % 3), timestamp=i)
    for i in range(orders):
        cluster.produce("orders", b"c%d" % (i * 7 % customers), b"o%d" % i, timestamp=customers + i)
    s = Serdes.String()
    builder = StreamsBuilder()
    table = builder.table("customers", key_serde=s, value_serde=s)
    joined: list[str] = []
    builder.stream("orders", key_serde=s, value_serde=s).join(table, lambda o, tier: tier).peek(
        lambda key, tier: joined.append(tier)
    )
    config = streams_config(tmp_path, {"max.poll.records": 25})
    async with running(cluster, builder.build(), config) as app:
        await eventually(lambda: app.metric("processed_records") == customers + orders, timeout=20, what="everything processed")
    assert len(joined) == orders
