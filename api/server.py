"""serve: run the REST app with uvicorn inside the running event loop, next to the stream threads.

Stores live on the event loop, so the server must share it (no thread, no process). The
socket is bound here, before uvicorn starts, so that a busy port is an `OSError` for the
caller (uvicorn itself would `sys.exit`). Signals stay with the application (`api.run` handles
them for an instance and its server): stop the server with `await handle.stop()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable, Iterator

import uvicorn
from starlette.types import ASGIApp

from api.app import create_app
from api.http_protocol import StreamsHttpProtocol
from api.instance import StreamsInstance
from api.settings import ApiSettings
from streams_core import HostInfo

__all__ = ["BindError", "ServerHandle", "bind", "serve", "serve_asgi"]

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"


class BindError(OSError):
    """The REST server's address cannot be bound (in use, not local, not permitted)."""


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the application that embeds it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ServerHandle:
    """A running REST server: where it listens, and `stop()`."""

    def __init__(
        self,
        server: uvicorn.Server,
        task: asyncio.Task[None],
        sock: socket.socket,
        reload_tls: Callable[[], None] | None = None,
    ) -> None:
        self._server = server
        self._task = task
        self._socket = sock
        self._reload_tls = reload_tls
        self.host, self.port = sock.getsockname()[:2]

    @property
    def url(self) -> str:
        scheme = "https" if self._server.config.ssl is not None else "http"
        return f"{scheme}://{HostInfo(self.host, self.port)}"

    @property
    def tls(self) -> bool:
        return self._reload_tls is not None

    def reload_tls(self) -> bool:
        """Read the certificate and key files again (the rotation of docs/deploy.md, on SIGHUP): new
        connections, forwarded queries' included, use them. False, logged, when the new files cannot
        be loaded (the served certificate stays); False without TLS."""
        if self._reload_tls is None:
            return False
        try:
            self._reload_tls()
        except (OSError, ValueError) as exc:
            log.error("REST certificate not reloaded, the old one stays: %s", exc)
            return False
        return True

    @property
    def running(self) -> bool:
        return not self._task.done()

    async def stop(self, timeout: float = 5.0) -> None:
        """Finish the requests in flight (up to `timeout` seconds), then close the socket."""
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except TimeoutError:
            self._server.force_exit = True
            await self._task
        finally:
            self._socket.close()
        log.info("REST server on %s:%s stopped", self.host, self.port)


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready socket on exactly `host` (an IPv6 address may come bracketed, as in application.server)."""
    host = host.removeprefix("[").removesuffix("]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it; without it every keep-alive answer waits ~40 ms (Nagle
    # against delayed ACK): p50 of a local get measured 45.7 ms with it off, 3.4 ms on new conns.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise BindError(exc.errno, exc.strerror) from exc
    sock.setblocking(False)
    return sock


async def serve(
    streams: StreamsInstance,
    host: str = DEFAULT_HOST,
    port: int | None = None,
    *,
    settings: ApiSettings | None = None,
) -> ServerHandle:
    """Start serving `create_app(streams)` on host:port in this event loop; return once it listens.

    `port` defaults to the port of `application.server`; 0 picks a free port (see `handle.port`).
    BindError (an OSError) if the address cannot be bound.
    """
    if port is None:
        server_address = streams.config["application.server"]
        if not server_address:
            raise ValueError("serve() needs a port, or application.server in the streams config")
        port = HostInfo.parse(server_address).port
    tls = settings.tls if settings is not None else None
    server_context = tls.server_context() if tls is not None else None
    app = create_app(streams, settings=settings)
    sock = bind(host, port)
    reload_tls = None
    if tls is not None and server_context is not None:
        contexts = [server_context, *([app.state.peer_ssl_context] if app.state.peer_ssl_context else [])]

        def reload_tls() -> None:
            tls.reload(*contexts)

    return await serve_asgi(app, sock, server_context, reload_tls)


async def serve_asgi(
    app: ASGIApp,
    sock: socket.socket,
    ssl_context: ssl.SSLContext | None = None,
    reload_tls: Callable[[], None] | None = None,
) -> ServerHandle:
    """Serve any ASGI app on a bound socket as `serve` does (bench/query_cost.py's floor uses it),
    over TLS with `ssl_context`."""
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_config=None,
        access_log=False,
        http=StreamsHttpProtocol,
        # ours, not uvicorn's own: reload_tls loads new certificates into the very context served
        ssl_context_factory=None if ssl_context is None else lambda config, default: ssl_context,
    )
    host, port = sock.getsockname()[:2]
    server = _EmbeddedServer(config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]), name=f"rest-server-{port}")
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if task.done():
        sock.close()
        task.result()
        raise RuntimeError(f"the REST server on {host}:{port} stopped while starting")
    handle = ServerHandle(server, task, sock, reload_tls)
    log.info("REST server listening on %s", handle.url)
    return handle
