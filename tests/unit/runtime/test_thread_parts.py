"""The stream thread's parts on their own: the factory makes a thread whole before it starts, flow
control applies and counts every task's decisions, and the run mode chosen by `autostop.at`
owns the KIP-95 metadata topic."""

from __future__ import annotations

from pathlib import Path

from streams_core import StreamsConfig
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.autostop.autostop_metadata import metadata_topic_name
from streams_core.runtime.autostop.run_end import RunUntilClosed, StopAtEndOfLog, run_end
from streams_core.runtime.tasks.flow_control import FlowControl
from streams_core.runtime.threads.instance_thread import ThreadCallbacks
from streams_core.runtime.threads.stream_thread_factory import StreamThreadFactory
from streams_core.runtime.threads.thread_state import ThreadState
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.testing import FakeKafkaClientSupplier, FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeAdmin

from .harness import APP, counting_topology, streams_config

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def _factory(tmp_path: Path, supplier: FakeKafkaClientSupplier, extra: dict[str, object] | None = None) -> StreamThreadFactory:
    config = StreamsConfig(streams_config(tmp_path, extra))
    builder = counting_topology().internal_topology_builder
    builder.set_application_id(APP)
    builder.apply_config(config)
    return StreamThreadFactory(
        TopologyMetadata(builder, APP),
        config,
        process_id="p1",
        client_supplier=supplier,
        global_stores=dict,
        run_end=run_end(config, supplier, "p1"),
        callbacks=ThreadCallbacks(lambda *_: None, lambda _: None, lambda *_: None, lambda _: None),
    )


def test_the_factory_makes_a_whole_thread_whose_clients_start_only_with_it(tmp_path: Path) -> None:
    cluster = FakeKafkaCluster()
    supplier = FakeKafkaClientSupplier(cluster)
    thread = _factory(tmp_path, supplier).create(3, 1024)
    assert thread.name == f"{APP}-StreamThread-3" and thread.index == 3
    assert thread.state is ThreadState.CREATED and not thread.alive
    assert len(supplier.main_consumers) == 1 and len(supplier.restore_consumers) == 1 and len(supplier.producers) == 1
    assert cluster.kinds("join") == [], "no client talks to the cluster before start()"
    metrics = thread.metrics()
    assert (metrics["thread"], metrics["state"], metrics["tasks"], metrics["poll_count"]) == (thread.name, "CREATED", [], 0)
    assert metrics["autostop"] is None, "running until closed reports no batch progress"
    assert not thread.batch_finished


class _Consumer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[TopicPartition, ...]]] = []

    def pause(self, *partitions: TopicPartition) -> None:
        self.calls.append(("pause", partitions))

    def resume(self, *partitions: TopicPartition) -> None:
        self.calls.append(("resume", partitions))


class _Task:
    def __init__(self, pause: list[TopicPartition], resume: list[TopicPartition]) -> None:
        self.pause, self.resume = pause, resume
        self.asked: list[tuple[int, int]] = []

    def partitions_to_pause(self, buffered_limit: int, max_lag_ms: int) -> list[TopicPartition]:
        self.asked.append((buffered_limit, max_lag_ms))
        return self.pause

    def partitions_to_resume(self, buffered_limit: int, max_lag_ms: int) -> list[TopicPartition]:
        return self.resume


def test_flow_control_pauses_and_resumes_every_tasks_partitions_in_one_call_each_and_counts_them() -> None:
    consumer = _Consumer()
    flow = FlowControl(consumer, buffered_limit=7, max_lag_ms=99)
    first, second = _Task([A0], []), _Task([B0], [A1])
    flow.apply([first, second])
    flow.apply([_Task([], [])])
    assert consumer.calls == [("pause", (A0, B0)), ("resume", (A1,))], "nothing to do: no call"
    assert first.asked == second.asked == [(7, 99)]
    assert (flow.pause_count, flow.resume_count) == (2, 1)


async def test_the_run_end_owns_the_metadata_topic(tmp_path: Path) -> None:
    """`autostop.at=eol` asks for the metadata topic; a start without it deletes a leftover one
    (the batch-to-streaming switch), so a later batch run never reads stale stop offsets."""
    cluster = FakeKafkaCluster()
    supplier = FakeKafkaClientSupplier(cluster)
    admin = FakeAdmin(cluster)
    topic = metadata_topic_name(APP)
    batch = run_end(StreamsConfig(streams_config(tmp_path, {"autostop.at": "eol"})), supplier, "p1")
    assert isinstance(batch, StopAtEndOfLog)
    (spec,) = await batch.own_topics(admin)
    assert (spec.name, spec.partitions, spec.config["cleanup.policy"]) == (topic, 1, "compact")
    cluster.create_topic(topic, 1)
    streaming = run_end(StreamsConfig(streams_config(tmp_path)), supplier, "p1")
    assert isinstance(streaming, RunUntilClosed)
    assert await streaming.own_topics(admin) == []
    assert topic not in cluster.topics()
