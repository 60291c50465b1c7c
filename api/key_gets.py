"""KeyGetFastPath: the plain key get, dispatched to its route's function before FastAPI's layers.

`GET /state/keyvalue/{store}/{key}` with no query parameters is the query an application sends
most. Through FastAPI it costs about three times what the HTTP server itself does (routing,
parameter parsing and validation, dependency solving, three middlewares): CPU the stream thread
on the same event loop would have used. This layer matches the path itself and calls the route's
own function (`routes.state.key_value`, with `plain_key_queries`): the same read through the
asynchronous store path with the query's deadline, the same forwarding, the same answers and
errors (`errors.exception_response`). It is a dispatcher, not a second copy of the route: only
requests it cannot match (an unknown store or one of another kind, a target the guard refuses,
the app's lifespan not started) go on to FastAPI, which answers them as it always did.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from api.deps import StoreInfo, describe_store
from api.errors import exception_response
from api.forwarding import HOP_HEADER, SERVED_BY_HEADER, Forwarder, instance_name
from api.instance import StreamsInstance
from api.metrics import StreamsMetrics
from api.middleware import target_refusal
from api.routes.state import key_value, plain_key_queries
from streams_core import HostInfo

__all__ = ["ROUTE", "KeyGetFastPath"]

ROUTE = "/state/keyvalue/{store}/{key}"
"""The route template this path answers for (its metric label, and the path it forwards to)."""
_PREFIX = "/state/keyvalue/"
_HOP = HOP_HEADER.lower().encode("latin-1")
_SERVED_BY = SERVED_BY_HEADER.lower().encode("latin-1")


class _KeyRoute:
    """What forwarding reads of a matched route (`path` for the metric label, `path_format` to fill)."""

    path = path_format = ROUTE


_KEY_ROUTE = _KeyRoute()


class KeyGetFastPath:
    """ASGI middleware: plain key gets to `routes.state.key_value` directly; everything else to `app`."""

    def __init__(
        self,
        app: ASGIApp,
        streams: StreamsInstance,
        metrics: StreamsMetrics,
        this_host: HostInfo | None,
        forwarder: Callable[[], Forwarder | None] = lambda: None,
        retry_after: int = 1,
        query_deadline: float = 5.0,
    ) -> None:
        self.app = app
        self.streams = streams
        self.metrics = metrics
        self.served_by = instance_name(this_host)
        self._served_by_value = self.served_by.encode("latin-1")
        self._forwarder = forwarder
        """The app's forwarder once its lifespan started (None before: the app answers then)."""
        self._retry_after = retry_after
        self._deadline_s = query_deadline
        self._stores: dict[str, StoreInfo] = {}
        """Key-value stores seen so far (a topology's stores do not change while it runs)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and not scope["query_string"]:
            started = time.perf_counter()
            answer = await self._answer(scope, receive)
            if answer is not None:
                await answer(scope, receive, send)
                self.metrics.observe(ROUTE, answer.status_code, time.perf_counter() - started)
                return
        await self.app(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive) -> Response | None:
        """The route's answer to a plain key get, or None when this is not one (the app answers)."""
        path: str = scope["path"]
        if not path.startswith(_PREFIX) or scope.get("root_path"):
            return None
        name, _, key = path[len(_PREFIX) :].partition("/")
        if not name or not key or "/" in key or target_refusal(scope) is not None:
            return None
        store = self._store(name)
        forwarder = self._forwarder()
        if store is None or forwarder is None:
            return None
        scope["route"] = _KEY_ROUTE
        scope["path_params"] = {"store": name, "key": key}
        request = Request(scope, receive)
        forwarded = any(header == _HOP for header, _ in scope["headers"])
        try:
            answer = await key_value(plain_key_queries(request, self.streams, forwarder, forwarded, self._deadline_s), store, key)
        except Exception as exc:
            refused = exception_response(exc, self._retry_after, f"GET {path}")
            if refused is None:
                raise  # the app's handler of the unexpected answers it (500) and logs it
            answer = refused
        raw = answer.raw_headers
        if not any(name == _SERVED_BY for name, _ in raw):
            raw.append((_SERVED_BY, self._served_by_value))
        return answer

    def _store(self, name: str) -> StoreInfo | None:
        store = self._stores.get(name)
        if store is None:
            try:
                store = describe_store(self.streams, name)
            except Exception:  # an unknown store: the app answers its 404
                return None
            if store.kind != "key-value":
                return None
            self._stores[name] = store
        return store
