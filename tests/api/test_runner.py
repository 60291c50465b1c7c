"""api.serve_until_signal: an instance and its REST server in one call, until SIGTERM (on the fake
cluster; tests/integration/test_readme_run.py runs the README's `api.run` against the broker)."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import api
from streams_core import KafkaStreams, StreamsError
from streams_core.testing import FakeKafkaClientSupplier, FakeKafkaCluster
from tests.unit.runtime.harness import counting_topology, eventually, produce_words, streams_config


@pytest.fixture(autouse=True)
def _unfreeze() -> Iterator[None]:
    """serve_until_signal freezes what start-up made; the rest of the test session should not keep it."""
    yield
    gc.unfreeze()


def _instance(tmp_path: Path, port: int) -> tuple[FakeKafkaCluster, KafkaStreams]:
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", 2)
    cluster.create_topic("out", 2)
    config = streams_config(tmp_path, {"application.server": f"127.0.0.1:{port}"})
    return cluster, KafkaStreams(counting_topology(), config, client_supplier=FakeKafkaClientSupplier(cluster))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_serves_until_sigterm_then_closes_the_instance_and_the_server(tmp_path: Path) -> None:
    port = _free_port()
    cluster, streams = _instance(tmp_path, port)
    running = asyncio.create_task(api.serve_until_signal(streams, "127.0.0.1"))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:

        async def answers(path: str, body: object) -> bool:
            try:
                answer = await client.get(path)
            except httpx.TransportError:
                return False
            return answer.status_code == 200 and answer.json() == body

        await eventually(lambda: streams.state is KafkaStreams.State.RUNNING, timeout=10, what="RUNNING")
        produce_words(cluster, "a b a")
        for _ in range(200):
            if await answers("/state/keyvalue/counts/a", {"key": "a", "value": 2}):
                break
            await asyncio.sleep(0.02)
        else:
            pytest.fail("the count of 'a' never answered over REST")
        assert gc.get_freeze_count() > 0, "start-up is frozen while the instance runs"
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(running, 30)
        assert streams.state is KafkaStreams.State.NOT_RUNNING
        assert gc.get_freeze_count() == 0, "nothing stays frozen once it returned"
        with pytest.raises(httpx.ConnectError):
            await client.get("/health")


async def test_a_busy_port_fails_before_the_instance_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        _, streams = _instance(tmp_path, port)
        with pytest.raises(api.BindError):
            await api.serve_until_signal(streams, "127.0.0.1")
    assert streams.state is KafkaStreams.State.CREATED


async def test_a_start_that_fails_raises_after_stopping_the_server(tmp_path: Path) -> None:
    """start()'s error (here: a missing source topic) is raised, as Kafka's start() throws; the
    instance is closed and the port is free again."""
    port = _free_port()
    cluster = FakeKafkaCluster()  # no topics
    config = streams_config(tmp_path, {"application.server": f"127.0.0.1:{port}"})
    streams = KafkaStreams(counting_topology(), config, client_supplier=FakeKafkaClientSupplier(cluster))
    with pytest.raises(StreamsError) as raised:
        await api.serve_until_signal(streams, "127.0.0.1")
    assert getattr(raised.value, "topics", None) == ["in"]
    assert streams.state is KafkaStreams.State.NOT_RUNNING
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))
