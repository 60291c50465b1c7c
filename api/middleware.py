"""ASGI middleware of the REST layer: query latency by route, and `X-Served-By` on state answers."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.forwarding import SERVED_BY_HEADER
from api.metrics import QueryLatency

__all__ = ["QueryTimingMiddleware", "ServedByMiddleware"]


class QueryTimingMiddleware:
    """Times every request that matched a route, by the route's template (`/state/keyvalue/{store}/{key}`)."""

    def __init__(self, app: ASGIApp, latency: QueryLatency) -> None:
        self.app = app
        self.latency = latency

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            route = getattr(scope.get("route"), "path", None)
            if route is not None:
                self.latency.observe(route, time.perf_counter() - start)


class ServedByMiddleware:
    """Adds `X-Served-By: host:port` of this instance to `/state/` answers that do not name another one."""

    def __init__(self, app: ASGIApp, served_by: str) -> None:
        self.app = app
        self.header = (SERVED_BY_HEADER.lower().encode("latin-1"), served_by.encode("latin-1"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/state/"):
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == self.header[0] for name, _ in headers):
                    headers.append(self.header)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_header)
