"""A dying global thread closes the client to ERROR (Kafka Streams: "Global thread has died"):
the uncaught-exception handler hears of it, REPLACE_THREAD cannot bring a global thread back,
global stores stop answering, and the REST probes say DOWN."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from api import create_app
from streams_core import InvalidStateStoreError, KafkaStreams, Materialized, QueryableStoreTypes, Serdes, StreamsBuilder, Topology
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.kafka_streams import StreamThreadExceptionResponse
from streams_core.testing import FakeKafkaCluster

from .harness import Instance, eventually, streams_config

S = Serdes.String()
REFERENCE = TopicPartition("reference", 0)
State = KafkaStreams.State


def global_table_topology() -> Topology:
    """A stream passed through, beside a global table of `reference` (store `reference-store`)."""
    builder = StreamsBuilder()
    builder.global_table("reference", Materialized.as_("reference-store"), key_serde=S, value_serde=S)
    builder.stream("in", key_serde=S, value_serde=S).to("out", key_serde=S, value_serde=S)
    return builder.build()


def cluster_with_reference() -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out", "reference"):
        cluster.create_topic(topic, 1)
    cluster.produce("reference", b"k", b"first")
    return cluster


async def running_instance(cluster: FakeKafkaCluster, tmp_path: Path) -> Instance:
    instance = Instance(cluster, global_table_topology(), streams_config(tmp_path))
    await instance.start()
    store = instance.streams.store("reference-store", QueryableStoreTypes.key_value_store())
    assert store.get("k") == "first"
    return instance


@pytest.mark.parametrize("response", list(StreamThreadExceptionResponse))
async def test_a_dead_global_thread_closes_the_client_to_error_whatever_the_handler_says(
    tmp_path: Path, response: StreamThreadExceptionResponse
) -> None:
    cluster = cluster_with_reference()
    instance = await running_instance(cluster, tmp_path)
    streams = instance.streams
    handled: list[BaseException] = []
    streams.set_uncaught_exception_handler(lambda error: handled.append(error) or response)
    failure = RuntimeError("global consumer broke")
    cluster.fail_fetch(REFERENCE, failure)
    cluster.produce("reference", b"k", b"second")  # wakes the global consumer's fetch
    await eventually(lambda: streams.state is State.ERROR, what="ERROR")
    assert handled == [failure]
    assert streams.errors[0] is failure  # (SHUTDOWN_APPLICATION: the stream thread then dies of the shutdown request)
    assert ("RUNNING", "PENDING_ERROR") in instance.states and instance.states[-1] == ("PENDING_ERROR", "ERROR")
    assert all(thread.alive is False for thread in streams.threads), "no thread was started in its place"
    with pytest.raises(InvalidStateStoreError):
        streams.store("reference-store", QueryableStoreTypes.key_value_store()).get("k")
    await instance.close()
    assert streams.state is State.ERROR


async def test_the_probes_say_down_once_the_global_thread_died(tmp_path: Path) -> None:
    cluster = cluster_with_reference()
    instance = await running_instance(cluster, tmp_path)
    app = create_app(instance.streams)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        assert [(await client.get(path)).status_code for path in ("/health", "/ready")] == [200, 200]
        cluster.fail_fetch(REFERENCE, RuntimeError("global consumer broke"))
        cluster.produce("reference", b"k", b"second")
        await eventually(lambda: instance.streams.state is State.ERROR, what="ERROR")
        for path in ("/health", "/ready"):
            answer = await client.get(path)
            assert (answer.status_code, answer.json()) == (503, {"status": "DOWN", "state": "ERROR", "degradedThreads": []})
    await instance.close()


async def test_a_global_thread_that_fails_to_bootstrap_fails_start_and_the_client_ends_in_error(tmp_path: Path) -> None:
    cluster = cluster_with_reference()
    failure = RuntimeError("cannot read the global topic")
    cluster.fail_fetch(REFERENCE, failure)
    instance = Instance(cluster, global_table_topology(), streams_config(tmp_path))
    handled: list[BaseException] = []
    instance.streams.set_uncaught_exception_handler(lambda error: handled.append(error) or StreamThreadExceptionResponse.REPLACE_THREAD)
    with pytest.raises(RuntimeError, match="cannot read the global topic"):
        await instance.streams.start()
    await eventually(lambda: instance.streams.state is State.ERROR, what="ERROR")
    assert instance.streams.errors == [failure]
    assert handled == [], "start() raised it: the handler is for failures after start, as in Kafka Streams"
    assert instance.streams.threads == [], "no stream thread starts without its global stores"
    await instance.close()
