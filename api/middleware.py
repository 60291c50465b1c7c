"""ASGI middleware of the REST layer: one trailing slash dropped, request targets the routes can
read, query latency and status by route, and `X-Served-By` on state answers."""

from __future__ import annotations

import time
from urllib.parse import unquote_to_bytes

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.forwarding import SERVED_BY_HEADER
from api.metrics import StreamsMetrics

__all__ = [
    "MAX_TARGET_BYTES",
    "TARGET_LENGTH",
    "QueryTimingMiddleware",
    "RequestTargetGuard",
    "ServedByMiddleware",
    "TrailingSlashMiddleware",
    "target_is_utf8",
    "target_refusal",
]

MAX_TARGET_BYTES = 16 * 1024
"""Longest request target (path and query as sent) answered: a forwarded query re-encodes it (at
most 3 bytes for 1) and must stay within the 64 KiB that httpx allows a URL."""
TARGET_LENGTH = "streams.target_length"
"""Scope extension: the length of a target the HTTP protocol did not keep whole (api/http_protocol.py)."""


def target_is_utf8(encoded: bytes) -> bool:
    """Whether a raw path or query is UTF-8 once percent-decoded."""
    if encoded.isascii() and b"%" not in encoded:
        return True
    try:
        unquote_to_bytes(encoded).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class TrailingSlashMiddleware:
    """Reads `/health/` as `/health`: every route answers the same with one trailing slash, as
    Jersey-based Kafka Streams REST services do, whose clients send it. It stands in front of
    everything (the key-get fast path included), so that all of them see one path.

    Only a slash sent as such is dropped: an encoded one (`%2F`) ends a key, not the path.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            raw: bytes | None = scope.get("raw_path")
            if len(path) > 1 and path.endswith("/") and (raw is None or raw.endswith(b"/")):
                scope = {**scope, "path": path[:-1]}
                if raw is not None:
                    scope["raw_path"] = raw[:-1]
        await self.app(scope, receive, send)


class RequestTargetGuard:
    """Answers, before routing, the requests whose target the routes cannot read as sent:
    414 over MAX_TARGET_BYTES, 400 when the path or query is not UTF-8 once percent-decoded
    (the server would read the bad bytes as U+FFFD and so ask for another key)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = target_refusal(scope) if scope["type"] == "http" else None
        if refusal is None:
            await self.app(scope, receive, send)
        else:
            await refusal(scope, receive, send)


def target_refusal(scope: Scope) -> JSONResponse | None:
    """`RequestTargetGuard`'s answer to a request whose target the routes cannot read; None when they can."""
    path = scope.get("raw_path") or scope["path"].encode("utf-8")
    query = scope.get("query_string", b"")
    length = scope.get("extensions", {}).get(TARGET_LENGTH) or len(path) + len(query)
    if length > MAX_TARGET_BYTES:
        return JSONResponse({"error": "request target too long", "length": length, "limit": MAX_TARGET_BYTES}, status_code=414)
    for where, encoded in (("path", path), ("query", query.replace(b"+", b" "))):
        if not target_is_utf8(encoded):
            problems = [{"in": where, "reason": "not UTF-8 once percent-decoded"}]
            return JSONResponse({"error": "invalid request", "problems": problems}, status_code=400)
    return None


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
