"""Error handling of a running instance: each deserialization handler, the production handler with
an injected delivery failure, and the uncaught exception handler's responses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streams_core import DeserializationError, KafkaStreams, Processor, ProcessorContext, Record, StreamsError, Topology
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.kafka_streams import State, StreamThreadExceptionResponse
from streams_core.runtime.tasks.record_collector_impl import ProductionError
from streams_core.testing import FakeKafkaCluster

from .harness import APP, LONG, STRING, Instance, eventually, long, running, streams_config

BAD = b"not-a-long"


def long_topology() -> Topology:
    """in (string keys, long values) -> out, same serdes: a value of the wrong size fails to deserialize."""
    return (
        Topology()
        .add_source("SRC", "in", key_serde=STRING, value_serde=LONG)
        .add_sink("SINK", "out", "SRC", key_serde=STRING, value_serde=LONG)
    )


def cluster_with(*topics: str) -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out", *topics):
        cluster.create_topic(topic)
    return cluster


def feed(cluster: FakeKafkaCluster, *values: bytes) -> None:
    for i, value in enumerate(values):
        cluster.produce("in", f"k{i}", value, timestamp=100 + i, headers=[("origin", b"test")])


async def wait_state(instance: Instance, *states: State) -> None:
    await eventually(lambda: instance.streams.state in states, what=f"state in {[s.name for s in states]}")


async def test_log_and_fail_stops_with_an_error_naming_the_record(tmp_path: Path) -> None:
    cluster = cluster_with()
    instance = Instance(cluster, long_topology(), streams_config(tmp_path))
    await instance.start()
    feed(cluster, long(1), BAD, long(3))
    await wait_state(instance, KafkaStreams.State.ERROR)
    (error,) = instance.streams.errors
    assert isinstance(error, DeserializationError)
    assert "in" in str(error) and "partition" in str(error) and "offset" in str(error) and "1" in str(error)
    assert long(3) not in [r.value for r in cluster.records("out")], "nothing past the bad record"
    assert cluster.committed(APP).get(TopicPartition("in", 0), 0) <= 1, "never committed past the bad record"
    assert ("PENDING_ERROR", "ERROR") in instance.states
    await instance.close()


async def test_log_and_continue_skips_counts_and_commits_past_the_record(tmp_path: Path) -> None:
    cluster = cluster_with()
    config = streams_config(tmp_path, {"default.deserialization.exception.handler": "log_and_continue"})
    async with running(cluster, long_topology(), config) as app:
        feed(cluster, long(1), BAD, long(3))
        await eventually(lambda: len(cluster.records("out")) == 2, what="the good records")
        assert app.metric("dropped_records") == 1
        await eventually(lambda: cluster.committed(APP) == {("in", 0): 3}, what="commit past the skipped record")
        assert app.streams.state is KafkaStreams.State.RUNNING
    assert [r.value for r in cluster.records("out")] == [long(1), long(3)]


async def test_log_and_continue_commits_past_a_bad_record_at_the_end(tmp_path: Path) -> None:
    cluster = cluster_with()
    config = streams_config(tmp_path, {"default.deserialization.exception.handler": "log_and_continue"})
    async with running(cluster, long_topology(), config) as app:
        feed(cluster, long(1), BAD)
        await eventually(lambda: app.metric("dropped_records") == 1, what="the skip")
        await eventually(lambda: cluster.committed(APP) == {("in", 0): 2}, what="commit past the skipped last record")


async def test_dead_letter_handler_writes_the_raw_record_with_error_headers(tmp_path: Path) -> None:
    cluster = cluster_with("dlq")
    config = streams_config(
        tmp_path,
        {"default.deserialization.exception.handler": "dead_letter", "errors.dead.letter.queue.topic.name": "dlq"},
    )
    async with running(cluster, long_topology(), config):
        feed(cluster, long(1), BAD, long(3))
        await eventually(lambda: len(cluster.records("dlq")) == 1 and len(cluster.records("out")) == 2, what="dlq")
    (dead,) = cluster.records("dlq")
    assert (dead.key, dead.value, dead.timestamp) == (b"k1", BAD, 101)
    headers = dict(dead.headers)
    assert headers["origin"] == b"test"
    assert headers["__streams.errors.topic"] == b"in"
    assert headers["__streams.errors.partition"] == b"0"
    assert headers["__streams.errors.offset"] == b"1"
    assert headers["__streams.errors.exception"] == b"DeserializationError"


async def test_production_handler_fail_stops_the_thread_and_commits_nothing_past_it(tmp_path: Path) -> None:
    cluster = cluster_with()
    instance = Instance(cluster, long_topology(), streams_config(tmp_path))
    await instance.start()
    cluster.fail_delivery("out")
    feed(cluster, long(1), long(2))
    await wait_state(instance, KafkaStreams.State.ERROR)
    (error,) = instance.streams.errors
    assert isinstance(error, ProductionError)
    assert cluster.committed(APP) == {}, "offsets of undelivered output are not committed"
    await instance.close()


async def test_production_handler_continue_drops_and_counts(tmp_path: Path) -> None:
    cluster = cluster_with()
    config = streams_config(tmp_path, {"default.production.exception.handler": "continue"})
    async with running(cluster, long_topology(), config) as app:
        cluster.fail_delivery("out")
        feed(cluster, long(1))
        await eventually(lambda: app.metric("production_dropped_records") == 1, what="the dropped record")
        feed(cluster, long(2), long(3))
        await eventually(lambda: len(cluster.records("out")) == 2, what="later records")
        assert app.streams.state is KafkaStreams.State.RUNNING
        await eventually(lambda: cluster.committed(APP) == {("in", 0): 3}, what="commit")


class Exploding(Processor[str, int, str, int]):
    """Raises on the value 13 (once, when `once`), forwards the rest."""

    exploded = 0

    def __init__(self, once: bool = False) -> None:
        self.once = once

    def init(self, context: ProcessorContext[str, int]) -> None:
        self.context = context

    def process(self, record: Record[str, int]) -> None:
        if record.value == 13 and not (self.once and Exploding.exploded):
            Exploding.exploded += 1
            raise RuntimeError("boom")
        self.context.forward(record)


def exploding_topology(once: bool = False) -> Topology:
    return (
        Topology()
        .add_source("SRC", "in", key_serde=STRING, value_serde=LONG)
        .add_processor("P", lambda: Exploding(once), "SRC")
        .add_sink("SINK", "out", "P", key_serde=STRING, value_serde=LONG)
    )


async def test_shutdown_client_on_a_processing_exception(tmp_path: Path) -> None:
    cluster = cluster_with()
    instance = Instance(cluster, exploding_topology(), streams_config(tmp_path))
    seen: list[BaseException] = []

    def handler(error: BaseException) -> StreamThreadExceptionResponse:
        seen.append(error)
        return StreamThreadExceptionResponse.SHUTDOWN_CLIENT

    instance.streams.set_uncaught_exception_handler(handler)
    await instance.start()
    feed(cluster, long(1), long(13), long(2))
    await wait_state(instance, KafkaStreams.State.ERROR)
    assert len(seen) == 1 and isinstance(seen[0], (RuntimeError, StreamsError)) and "boom" in repr(seen[0])
    assert instance.states[-2:] == [("RUNNING", "PENDING_ERROR"), ("PENDING_ERROR", "ERROR")]
    assert not any(thread.alive for thread in instance.streams.threads)
    assert cluster.members(APP) == []
    await instance.close()


async def test_replace_thread_keeps_the_client_running(tmp_path: Path) -> None:
    cluster = cluster_with()
    Exploding.exploded = 0
    instance = Instance(cluster, exploding_topology(once=True), streams_config(tmp_path))
    instance.streams.set_uncaught_exception_handler(lambda error: StreamThreadExceptionResponse.REPLACE_THREAD)
    await instance.start()
    feed(cluster, long(1), long(13), long(2))
    await eventually(lambda: [r.value for r in cluster.records("out")][-1:] == [long(2)], timeout=5, what="processing after the replacement")
    assert Exploding.exploded == 1
    assert instance.streams.state is not KafkaStreams.State.ERROR
    values: list[Any] = [r.value for r in cluster.records("out")]
    assert long(13) in values and long(2) in values, "the replacement thread processed the record again"
    await instance.close()
    assert instance.streams.state is KafkaStreams.State.NOT_RUNNING
