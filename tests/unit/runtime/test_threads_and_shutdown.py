"""Several stream threads, SHUTDOWN_APPLICATION through the group, retriable commit failures,
internal topic checks, and what each guarantee reads of transactional input."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams_core import InternalTopicError, KafkaStreams, clients
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.kafka_streams import StreamThreadExceptionResponse
from streams_core.runtime.threads.thread_state import ThreadState
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeProducer

from .harness import APP, CHANGELOG, Instance, counting_topology, eventually, long, passthrough_topology, running, streams_config
from .test_error_handlers import exploding_topology

IN0 = TopicPartition("in", 0)


def cluster_with(partitions: int = 1) -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out"):
        cluster.create_topic(topic, partitions)
    return cluster


async def test_two_threads_share_the_tasks_as_two_group_members(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    async with running(cluster, passthrough_topology(), streams_config(tmp_path, {"num.stream.threads": 2})) as app:
        threads = app.streams.threads
        assert len(threads) == 2 and len(cluster.members(APP)) == 2
        per_thread = [set(t.task_manager.tasks) for t in threads if t.task_manager is not None]
        assert [len(tasks) for tasks in per_thread] == [2, 2] and not per_thread[0] & per_thread[1]
        for i in range(20):
            cluster.produce("in", b"k%d" % i, b"v")
        await eventually(lambda: len(cluster.records("out")) == 20, what="output")
        assert all(t.metrics()["processed_records"] > 0 for t in threads)


async def test_shutdown_application_stops_every_instance(tmp_path: Path) -> None:
    cluster = cluster_with(2)
    failing = Instance(cluster, exploding_topology(), streams_config(tmp_path, instance=0))
    failing.streams.set_uncaught_exception_handler(lambda error: StreamThreadExceptionResponse.SHUTDOWN_APPLICATION)
    other = Instance(cluster, exploding_topology(), streams_config(tmp_path, instance=1))
    await failing.start(wait=False)
    await other.start(wait=False)
    await eventually(
        lambda: cluster.group_stable(APP) and len(failing.tasks()) == len(other.tasks()) == 1, what="a task each"
    )
    (task,) = failing.tasks()
    cluster.produce("in", "poison", long(13), partition=task.partition)
    await eventually(
        lambda: failing.streams.state is KafkaStreams.State.ERROR and other.streams.state is KafkaStreams.State.ERROR,
        what="both instances shut down",
    )
    assert any("shutdown" in type(e).__name__.lower() for e in other.streams.errors), other.streams.errors
    await failing.close()
    await other.close()


async def test_a_retriable_commit_failure_keeps_the_thread_running(tmp_path: Path) -> None:
    cluster = cluster_with()
    async with running(cluster, passthrough_topology(), streams_config(tmp_path)) as app:
        cluster.fail_next("commit", clients.RebalanceInProgressError("rebalancing"), times=2)
        cluster.produce("in", b"k", b"v")
        await eventually(lambda: cluster.committed(APP) == {TopicPartition("in", 0): 1}, what="a later commit")
        assert app.streams.state is KafkaStreams.State.RUNNING
        assert app.streams.errors == []


async def test_an_internal_topic_with_the_wrong_partition_count_fails_start(tmp_path: Path) -> None:
    cluster = cluster_with(2)
    cluster.create_topic(CHANGELOG, 3)
    instance = Instance(cluster, counting_topology(), streams_config(tmp_path))
    with pytest.raises(InternalTopicError):
        await instance.streams.start()
    await instance.close()


@pytest.mark.parametrize(("guarantee", "expected"), [
    ("at_least_once", [b"plain", b"aborted", b"committed"]),
    ("exactly_once_v2", [b"plain", b"committed"]),
])
async def test_aborted_input_is_read_only_under_at_least_once(tmp_path: Path, guarantee: str, expected: list[bytes]) -> None:
    cluster = cluster_with()
    cluster.produce("in", b"k", b"plain", partition=0)
    upstream = FakeProducer(cluster, client_id="upstream", transactional_id="upstream")
    await upstream.start()
    for value, commit in ((b"aborted", False), (b"committed", True)):
        await upstream.begin_transaction()
        batch = upstream.create_batch()
        batch.append(timestamp=1, key=b"k", value=value, headers=[])
        await upstream.send_batch(batch, "in", partition=0)
        await (upstream.commit_transaction() if commit else upstream.abort_transaction())
    async with running(cluster, passthrough_topology(), streams_config(tmp_path, {"processing.guarantee": guarantee})):
        await eventually(lambda: len(cluster.records("out")) == len(expected), what="output")
        await eventually(lambda: cluster.committed(APP) == {IN0: 5}, what="commit past the trailing commit marker")
    assert [r.value for r in cluster.records("out")] == expected


async def test_a_drained_partition_is_committed_at_the_end_past_a_trailing_marker(tmp_path: Path) -> None:
    cluster = cluster_with()
    upstream = FakeProducer(cluster, client_id="upstream", transactional_id="upstream")
    await upstream.start()
    await upstream.begin_transaction()
    batch = upstream.create_batch()
    batch.append(timestamp=1, key=b"k", value=b"v", headers=[])
    await upstream.send_batch(batch, "in", partition=0)
    await upstream.commit_transaction()
    async with running(cluster, passthrough_topology(), streams_config(tmp_path, {"processing.guarantee": "exactly_once_v2"})):
        await eventually(lambda: len(cluster.records("out")) == 1, what="output")
        await eventually(lambda: bool(cluster.committed(APP)), what="a commit")
    assert cluster.committed(APP) == cluster.end_offsets("in") == {IN0: 2}


async def test_a_rebalance_that_reaches_a_thread_during_its_shutdown_creates_no_tasks(tmp_path: Path) -> None:
    """The consumer rejoins the group until it stops: callbacks that arrive once the thread shuts
    down must neither reopen tasks on its closed clients nor move it out of PENDING_SHUTDOWN/DEAD
    (Kafka Streams skips them: the state transition is invalid). Seen under chaos: an autostop
    instance closing while a killed peer's restart rebalanced the group took every task and hung."""
    cluster = cluster_with(2)
    instance = await Instance(cluster, passthrough_topology(), streams_config(tmp_path)).start()
    (thread,) = instance.streams.threads
    assert thread.task_manager is not None and thread.task_manager.tasks
    await instance.close()
    assert thread.state is ThreadState.DEAD
    await thread.rebalance_listener.on_partitions_revoked(frozenset())  # also refreshes the changelog end offsets
    await thread.rebalance_listener.on_partitions_assigned(frozenset())
    assert thread.state is ThreadState.DEAD
    assert not thread.task_manager.tasks and not thread.task_manager.standby_tasks


async def test_a_task_producer_that_cannot_start_at_once_is_retried_under_exactly_once(tmp_path: Path) -> None:
    """Right after a broker stall the broker answers metadata without brokers for a moment, and a
    new transactional producer fails to start (aiokafka: no node to ask for the coordinator).
    Task creation retries with a fresh producer instead of failing the thread (found by the chaos
    stall scenario: two of three instances died with 'Did we not perform bootstrap?')."""
    cluster = cluster_with(1)
    cluster.fail_next("producer_start", clients.KafkaConnectionError("no broker known"), client=f"{APP}-0_0", times=2)
    instance = await Instance(cluster, passthrough_topology(), streams_config(tmp_path, {"processing.guarantee": "exactly_once_v2"})).start()
    try:
        cluster.produce("in", b"k", b"v")
        await eventually(lambda: len(cluster.records("out")) == 1, what="output")
        assert instance.streams.errors == []
    finally:
        await instance.close()


async def test_a_final_commit_that_fails_closes_the_tasks_dirty(tmp_path: Path) -> None:
    """A task whose last transaction did not commit must not leave a checkpoint: its stores hold
    writes the changelog lacks, and the next start would trust them."""
    cluster = cluster_with(1)
    config = streams_config(tmp_path, {"processing.guarantee": "exactly_once_v2", "commit.interval.ms": 9_000})
    instance = await Instance(cluster, counting_topology(), config).start()
    checkpoint = instance.state_dir / "0_0" / ".checkpoint"
    cluster.produce("in", "a", "a")
    await eventually(lambda: instance.tasks() and instance.streams.threads[0].task_manager.processed_records == 1,
                     what="the record processed")  # fmt: skip
    cluster.fail_next("commit_transaction", clients.KafkaConnectionError("broker gone"), client=f"{APP}-0_0")
    await instance.close()
    assert not checkpoint.exists(), "a checkpoint over writes no transaction committed"
    assert cluster.committed(APP) == {}
