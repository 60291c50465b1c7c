"""PeerTransport: the forwarding transport answers as httpx's would, over real sockets on 127.0.0.1,
and fails with httpx's exceptions (the Forwarder turns them into 503s)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from api import serve
from api.peer_transport import PeerTransport
from streams_core import HostInfo
from streams_core.runtime.assignment import StreamsMetadataState
from tests.api.fakes import COUNTS, FakeKafkaStreams

pytestmark = pytest.mark.asyncio

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
TIMEOUT = httpx.Timeout(2.0, connect=1.0)


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[tuple[int, list[int]]]:
    """A TCP server on 127.0.0.1 running `handler` per connection; yields its port and a count of connections."""
    connections = [0]

    async def counted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections[0] += 1
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(counted, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], connections
    finally:
        server.close()
        await server.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None


async def _get(transport: PeerTransport, port: int, path: str = "/x") -> httpx.Response:
    request = httpx.Request("GET", f"http://127.0.0.1:{port}{path}", extensions={"timeout": TIMEOUT.as_dict()})
    return await transport.handle_async_request(request)


async def test_answers_from_a_real_server_on_one_kept_connection() -> None:
    streams = FakeKafkaStreams(HostInfo("127.0.0.1", 7001), {0, 1}, StreamsMetadataState({}, None))
    streams.active_driver.get_key_value_store(COUNTS).put("caf\u00e9", 3)
    handle = await serve(streams, "127.0.0.1", 0)
    try:
        async with PeerTransport() as transport:
            answers = [await _get(transport, handle.port, f"/state/keyvalues/{COUNTS}/all?scope=local") for _ in range(20)]
            missing = await _get(transport, handle.port, "/state/keyvalue/nope/x")
            assert len(transport._idle[("http", "127.0.0.1", handle.port)]) == 1, "one connection served them all"
    finally:
        await handle.stop()
        streams.close()
    for answer in answers:
        assert answer.status_code == 200 and answer.json() == [{"key": "caf\u00e9", "value": 3}]
        assert answer.headers["content-type"] == "application/json"
    assert missing.status_code == 404 and missing.json()["error"] == "unknown state store"


async def test_sends_the_path_query_and_headers_as_given() -> None:
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await _read_request(reader)
        assert request is not None
        seen.append(request)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()

    async with raw_server(handler) as (port, _), PeerTransport() as transport:
        request = httpx.Request(
            "GET", httpx.URL(f"http://127.0.0.1:{port}", raw_path=b"/state/keyvalue/s/a%2Fb"),
            params={"stale": "true"}, headers={"X-Hop": "h:1"}, extensions={"timeout": TIMEOUT.as_dict()},
        )
        answer = await transport.handle_async_request(request)
    assert answer.status_code == 200 and answer.content == b"ok"
    lines = seen[0].decode().split("\r\n")
    assert lines[0] == "GET /state/keyvalue/s/a%2Fb?stale=true HTTP/1.1"
    assert f"Host: 127.0.0.1:{port}" in lines and "X-Hop: h:1" in lines


async def test_chunked_and_close_delimited_bodies_are_read_whole() -> None:
    answers = iter([
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\n\r\nuntil the end",
    ])

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await _read_request(reader) is not None:
            answer = next(answers)
            writer.write(answer)
            await writer.drain()
            if b"until the end" in answer:
                return

    async with raw_server(handler) as (port, connections), PeerTransport() as transport:
        chunked = await _get(transport, port)
        closed = await _get(transport, port)
        assert transport._idle[("http", "127.0.0.1", port)] == [], "a connection that ended its answer is not kept"
    assert chunked.status_code == 200 and chunked.content == b"abcde"
    assert closed.status_code == 503 and closed.content == b"until the end" and closed.headers["retry-after"] == "1"
    assert connections == [1]


async def test_a_kept_connection_the_peer_closed_is_replaced_once() -> None:
    """uvicorn closes idle keep-alive connections after a few seconds, possibly just as a request
    is sent on one: that request is sent again on a new connection, not failed."""

    async def one_answer_per_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await _read_request(reader) is not None:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n1")  # says keep-alive
            await writer.drain()
        await _read_request(reader)  # the next request on this connection: closed unanswered

    async with raw_server(one_answer_per_connection) as (port, connections), PeerTransport() as transport:
        answers = [await _get(transport, port) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert connections == [3]


async def test_failures_are_httpx_errors() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await asyncio.sleep(10)

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
        await writer.drain()

    async with PeerTransport() as transport:
        async with raw_server(silent) as (port, _):
            request = httpx.Request("GET", f"http://127.0.0.1:{port}/", extensions={"timeout": {"read": 0.2}})
            began = time.monotonic()
            with pytest.raises(httpx.ReadTimeout):
                await transport.handle_async_request(request)
            assert time.monotonic() - began < 2
        async with raw_server(garbage) as (port, _):
            with pytest.raises(httpx.RemoteProtocolError):
                await _get(transport, port)
        async with raw_server(cut) as (port, _):
            with pytest.raises(httpx.RemoteProtocolError):
                await _get(transport, port)
        closed_port = port
        with pytest.raises(httpx.ConnectError):
            await _get(transport, closed_port)


async def test_a_closed_transport_keeps_no_connection() -> None:
    async def keep_answering(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await _read_request(reader) is not None:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()

    async with raw_server(keep_answering) as (port, _):
        transport = PeerTransport()
        await _get(transport, port)
        await transport.aclose()
        assert transport._idle == {}
        with pytest.raises(httpx.ConnectError):
            await _get(transport, port)


async def test_requests_beyond_the_connection_limit_wait_for_a_free_one() -> None:
    release = asyncio.Event()

    async def slow_then_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await _read_request(reader) is not None:
            await release.wait()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()

    async with raw_server(slow_then_answer) as (port, connections), PeerTransport(max_connections=1) as transport:
        first = asyncio.create_task(_get(transport, port))
        await asyncio.sleep(0.05)
        impatient = httpx.Request("GET", f"http://127.0.0.1:{port}/", extensions={"timeout": {"pool": 0.1, "read": 2}})
        with pytest.raises(httpx.PoolTimeout):
            await transport.handle_async_request(impatient)
        patient = asyncio.create_task(_get(transport, port))
        await asyncio.sleep(0.05)
        release.set()
        answers = await asyncio.gather(first, patient)
    assert [a.status_code for a in answers] == [200, 200]
    assert connections == [1], "the waiting request took the connection the first one freed"


async def test_after_one_failed_kept_connection_the_request_goes_to_a_new_one() -> None:
    """A peer that restarted closed every kept connection: one failed try, then a new connection."""
    requests = [0]

    async def one_answer_per_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await _read_request(reader) is not None:
            requests[0] += 1
            await asyncio.sleep(0.05)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n1")
            await writer.drain()
        if await _read_request(reader) is not None:
            requests[0] += 1  # closed unanswered

    async with raw_server(one_answer_per_connection) as (port, connections), PeerTransport() as transport:
        await asyncio.gather(_get(transport, port), _get(transport, port))  # two connections kept
        assert len(transport._idle[("http", "127.0.0.1", port)]) == 2
        answer = await _get(transport, port)
        await asyncio.sleep(0.05)
    assert answer.status_code == 200
    assert connections == [3] and requests == [4], "one try on a kept connection, then a new one"
