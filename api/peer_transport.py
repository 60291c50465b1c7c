"""PeerTransport: the lean HTTP/1.1 transport that forwards queries to the other instances.

Forwarding sends short GETs to a handful of peers over keep-alive connections. httpx's network
transport (httpcore's pool, h11's parser, its stream and event layers) cost about 40% of a
proxied get's CPU on the forwarding instance, CPU the stream threads on the same cores lose.
This transport keeps the `httpx.AsyncBaseTransport` interface (tests still route `host:port` to
in-process apps by passing their own) and does only what forwarding needs: one request at a time
per connection, idle connections kept per peer, responses parsed by httptools (uvicorn's C
parser), the request's connect/read/write timeouts, and httpx's exceptions, so a caller cannot
tell the difference but in CPU. A request on a kept connection that the peer had already closed
(it closes idle keep-alive connections after a few seconds) is sent again once on a new one,
as httpcore does; only requests that nothing was read for are, and forwarding sends only GETs.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Mapping

import httptools
import httpx

__all__ = ["PeerTransport"]

_READ_SIZE = 65536
_CLOSED_WHILE_IDLE = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
"""What a request on a kept connection that the peer had closed fails with."""
_Address = tuple[str, str, int]
"""(scheme, host, port) of a peer."""


class _Response:
    """httptools' callbacks for one response: status, headers, body, whether it is complete and
    whether the peer keeps the connection open (known only inside the callbacks: the parser
    resets once they return)."""

    __slots__ = ("body", "complete", "headers", "headers_complete", "keep_alive", "parser", "status")

    def __init__(self) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.headers_complete = False
        self.complete = False
        self.keep_alive = False
        self.parser = httptools.HttpResponseParser(self)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.headers_complete = True
        self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()

    def delimited_by_close(self) -> bool:
        """A body that ends with the connection: neither a length nor chunks announced it."""
        names = {name.lower() for name, _ in self.headers}
        return self.headers_complete and b"content-length" not in names and b"transfer-encoding" not in names


class _Connection:
    """One keep-alive connection to a peer; `exchange` sends a request and reads its response."""

    __slots__ = ("reader", "used", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.used = False
        """Whether it answered a request before (a peer may have closed it since)."""

    async def exchange(self, head: bytes, body: bytes, timeouts: Mapping[str, float | None]) -> tuple[_Response, bool]:
        """The response to the request, and whether the connection may be used again."""
        self.used = True
        try:
            async with asyncio.timeout(timeouts.get("write")):
                self.writer.write(head + body if body else head)
                await self.writer.drain()
        except TimeoutError:
            raise httpx.WriteTimeout("writing the request timed out") from None
        except OSError as exc:
            raise httpx.WriteError(str(exc)) from exc
        response = _Response()
        try:
            async with asyncio.timeout(timeouts.get("read")):
                while not response.complete:
                    data = await self.reader.read(_READ_SIZE)
                    if not data:
                        if response.delimited_by_close():
                            return response, False
                        raise httpx.RemoteProtocolError("the peer closed the connection before its answer was complete")
                    response.parser.feed_data(data)
        except TimeoutError:
            raise httpx.ReadTimeout("reading the answer timed out") from None
        except httptools.HttpParserError as exc:
            raise httpx.RemoteProtocolError(f"malformed answer: {exc}") from None
        except OSError as exc:
            raise httpx.ReadError(str(exc)) from exc
        return response, response.keep_alive and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


class PeerTransport(httpx.AsyncBaseTransport):
    """Keep-alive HTTP/1.1 to the other instances: at most `max_connections` at once per peer
    (further requests wait for one, up to the pool timeout, as in httpx's pool) and
    `max_idle` idle ones kept."""

    def __init__(
        self, *, max_connections: int = 64, max_idle: int = 8, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self._idle: dict[_Address, list[_Connection]] = {}
        self._slots: dict[_Address, asyncio.Semaphore] = {}
        self._max_connections = max_connections
        self._max_idle = max_idle
        self._ssl_context = ssl_context
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise httpx.ConnectError("the transport is closed", request=request)
        url = request.url
        address = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        head = b"".join(
            [request.method.encode("ascii"), b" ", url.raw_path, b" HTTP/1.1\r\n"]
            + [name + b": " + value + b"\r\n" for name, value in request.headers.raw]
            + [b"\r\n"]
        )
        body = request.content
        timeouts: Mapping[str, float | None] = request.extensions.get("timeout", {})
        slots = self._slots.get(address)
        if slots is None:
            slots = self._slots[address] = asyncio.Semaphore(self._max_connections)
        try:
            if slots.locked():
                async with asyncio.timeout(timeouts.get("pool")):
                    await slots.acquire()
            else:
                await slots.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout(f"no free connection to {url.host}:{url.port} in time", request=request) from None
        try:
            return await self._exchange(address, head, body, timeouts, request)
        finally:
            slots.release()

    async def _exchange(
        self, address: _Address, head: bytes, body: bytes, timeouts: Mapping[str, float | None], request: httpx.Request
    ) -> httpx.Response:
        may_reuse = True
        while True:
            connection = self._idle_connection(address) if may_reuse else None
            reused = connection is not None
            if connection is None:
                connection = await self._connect(address, timeouts.get("connect"), request)
            try:
                response, keep = await connection.exchange(head, body, timeouts)
            except BaseException as exc:
                connection.close()
                if reused and isinstance(exc, _CLOSED_WHILE_IDLE):
                    may_reuse = False  # the peer had closed it while it was idle: once more on a new connection
                    continue
                if isinstance(exc, httpx.TransportError):
                    exc.request = request
                raise
            self._release(address, connection, keep)
            return httpx.Response(
                response.status,
                headers=response.headers,
                content=b"".join(response.body),
                request=request,
                extensions={"http_version": b"HTTP/1.1"},
            )

    def _idle_connection(self, address: _Address) -> _Connection | None:
        idle = self._idle.get(address)
        while idle:
            connection = idle.pop()
            if not connection.reader.at_eof() and not connection.writer.is_closing():
                return connection
            connection.close()
        return None

    async def _connect(self, address: _Address, timeout: float | None, request: httpx.Request) -> _Connection:
        scheme, host, port = address
        context = None
        if scheme == "https":
            context = self._ssl_context or ssl.create_default_context()
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port, ssl=context, limit=_READ_SIZE)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out", request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}", request=request) from exc
        return _Connection(reader, writer)

    def _release(self, address: _Address, connection: _Connection, keep: bool) -> None:
        idle = self._idle.setdefault(address, [])
        if keep and not self._closed and len(idle) < self._max_idle:
            idle.append(connection)
        else:
            connection.close()

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
                with contextlib.suppress(OSError):
                    await connection.writer.wait_closed()
        self._idle.clear()

