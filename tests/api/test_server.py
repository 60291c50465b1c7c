"""api.serve: uvicorn in the running event loop, on 127.0.0.1, stopped through its handle."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from api import serve
from streams_core import HostInfo
from streams_core.runtime.assignment import StreamsMetadataState
from tests.api.fakes import COUNTS, FakeKafkaStreams


@pytest.fixture
def streams() -> Iterator[FakeKafkaStreams]:
    streams = FakeKafkaStreams(HostInfo("127.0.0.1", 7001), {0, 1}, StreamsMetadataState({}, None))
    streams.active_driver.get_key_value_store(COUNTS).put("served", 1)
    try:
        yield streams
    finally:
        streams.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_serve_answers_over_http_in_this_loop_and_stops(streams: FakeKafkaStreams) -> None:
    handle = await serve(streams, "127.0.0.1", 0)
    try:
        assert handle.host == "127.0.0.1" and handle.port > 0
        async with httpx.AsyncClient(base_url=handle.url, timeout=5) as client:
            assert (await client.get("/health")).json() == {"status": "UP", "state": "RUNNING", "degradedThreads": []}
            assert (await client.get("/health/")).json() == {"status": "UP", "state": "RUNNING", "degradedThreads": []}
            answer = await client.get(f"/state/keyvalues/{COUNTS}/all", params={"scope": "local"})
            assert answer.json() == [{"key": "served", "value": 1}]
            slashed = await client.get(f"/state/keyvalues/{COUNTS}/all/", params={"scope": "local"})
            assert slashed.json() == [{"key": "served", "value": 1}]
    finally:
        await handle.stop()
    assert not handle.running
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient(base_url=handle.url, timeout=1) as client:
            await client.get("/health")


async def test_serve_defaults_to_the_application_server_port(streams: FakeKafkaStreams) -> None:
    port = _free_port()
    streams.config = streams.config.with_overrides({"application.server": f"127.0.0.1:{port}"})
    handle = await serve(streams)
    try:
        assert handle.port == port
    finally:
        await handle.stop()


async def test_a_busy_port_is_an_os_error(streams: FakeKafkaStreams) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(OSError):
            await serve(streams, "127.0.0.1", busy.getsockname()[1])
