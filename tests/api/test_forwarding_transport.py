"""The forwarding transport (`peer_transport()`, httpx's own) over real sockets on 127.0.0.1: kept
connections reused, one the peer closed while idle not used again, and failures as 503s."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from api.errors import NotAvailableError
from api.forwarding import Forwarder, peer_transport
from streams_core import HostInfo

pytestmark = pytest.mark.asyncio

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
ROUTE = "/state/keyvalue/{store}/{key}"
ANSWER = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 25\r\n\r\n{"key":"word","value":5}\n'


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[tuple[HostInfo, list[bytes]]]:
    """A TCP server on 127.0.0.1 running `handler` per connection; yields its host and the requests' heads,
    one entry per connection with the heads it carried joined."""
    heads: list[bytes] = []

    async def recorded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(b"")
        index = len(heads) - 1

        class Recording:
            async def readuntil(self, separator: bytes) -> bytes:
                head = await reader.readuntil(separator)
                heads[index] += head
                return head

        try:
            await handler(Recording(), writer)  # type: ignore[arg-type]
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(recorded, "127.0.0.1", 0)
    try:
        yield HostInfo("127.0.0.1", server.sockets[0].getsockname()[1]), heads
    finally:
        server.close()
        await server.wait_closed()


def forwarder(transport: httpx.AsyncBaseTransport, read_s: float = 2.0) -> Forwarder:
    return Forwarder(transport, httpx.Timeout(read_s, connect=1.0), HostInfo("127.0.0.1", 7001))


async def test_gets_share_one_kept_connection_and_carry_the_hop_header() -> None:
    async def keep_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(ANSWER)
            await writer.drain()

    async with raw_server(keep_alive) as (host, heads), peer_transport() as transport:
        answers = [await forwarder(transport).relay_path(host, "/state/keyvalue/counts/word", ROUTE) for _ in range(5)]
    assert [(a.status_code, a.body) for a in answers] == [(200, b'{"key":"word","value":5}\n')] * 5
    assert len(heads) == 1, "one connection served the five gets"
    assert heads[0].count(b"GET /state/keyvalue/counts/word HTTP/1.1") == 5
    assert heads[0].lower().count(b"x-streams-forwarded-by: 127.0.0.1:7001") == 5


async def test_a_connection_the_peer_closed_while_idle_is_not_used_again() -> None:
    async def one_answer_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(ANSWER)  # no "connection: close": the client keeps the connection
        await writer.drain()

    async with raw_server(one_answer_then_close) as (host, heads), peer_transport() as transport:
        statuses = []
        for _ in range(3):
            statuses.append((await forwarder(transport).relay_path(host, "/state/keyvalue/counts/word", ROUTE)).status_code)
            await asyncio.sleep(0.05)  # the peer's close reaches this side
    assert statuses == [200, 200, 200]
    assert len(heads) == 3


async def test_a_silent_or_absent_peer_is_a_503_within_the_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(10)

    async with peer_transport() as transport:
        async with raw_server(silent) as (host, _):
            began = time.monotonic()
            with pytest.raises(NotAvailableError) as silent_error:
                await forwarder(transport, read_s=0.2).relay_path(host, "/state/keyvalue/counts/word", ROUTE)
            assert time.monotonic() - began < 2
        with pytest.raises(NotAvailableError) as absent_error:
            await forwarder(transport).relay_path(host, "/state/keyvalue/counts/word", ROUTE)
    assert silent_error.value.status_code == absent_error.value.status_code == 503
    assert silent_error.value.details["reason"] == "ReadTimeout"
    assert absent_error.value.details["reason"] == "ConnectError"
