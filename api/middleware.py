"""ASGI middleware of the REST layer: query latency and status by route, and `X-Served-By` on state answers."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.forwarding import SERVED_BY_HEADER
from api.metrics import StreamsMetrics

__all__ = ["QueryTimingMiddleware", "ServedByMiddleware"]


class QueryTimingMiddleware:
    """Times and counts (by status) every request that matched a route, by the route's template
    (`/state/keyvalue/{store}/{key}`), so the metric labels stay bounded."""

    def __init__(self, app: ASGIApp, metrics: StreamsMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_noting_status)
        finally:
            route = getattr(scope.get("route"), "path", None)
            if route is not None:
                self.metrics.observe(route, status, time.perf_counter() - start)


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
