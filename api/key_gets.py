"""KeyGetFastPath: the plain local key get answered before FastAPI's routing and dependency layers.

`GET /state/keyvalue/{store}/{key}` with no query parameters, for a key whose active copy is
here and holds a value, is the query an application sends most. Through FastAPI it costs about
three times what the HTTP server itself does (routing, parameter parsing and validation,
dependency solving, three middlewares): CPU the stream thread on the same event loop would have
used. This layer answers exactly that case with the route's own parts (`describe_store`,
`route_key`, the store view, `key_value_body`) and hands every other request, and any such get
that is not a plain 200 here (a forward, a 404, a 503, a 400), to the app unchanged, which then
answers it as it always did. So the fast path can only make a 200 cheaper, never change an answer.
"""

from __future__ import annotations

import time

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from api.deps import StoreInfo, describe_store
from api.forwarding import HOP_HEADER, SERVED_BY_HEADER, instance_name, route_key
from api.instance import StreamsInstance
from api.metrics import StreamsMetrics
from api.middleware import target_refusal
from api.positions import POSITION_HEADER, format_position
from api.schemas import key_value_body
from streams_core import HostInfo
from streams_core.state import QueryableStoreTypes

__all__ = ["ROUTE", "KeyGetFastPath"]

ROUTE = "/state/keyvalue/{store}/{key}"
"""The route template this path answers for (its metric label)."""
_PREFIX = "/state/keyvalue/"
_HOP = HOP_HEADER.lower().encode("latin-1")
_KEY_VALUE = QueryableStoreTypes.key_value_store()


class KeyGetFastPath:
    """ASGI middleware: answers plain local key gets itself, passes everything else to `app`."""

    def __init__(self, app: ASGIApp, streams: StreamsInstance, metrics: StreamsMetrics, this_host: HostInfo | None) -> None:
        self.app = app
        self.streams = streams
        self.metrics = metrics
        self.this_host = this_host
        self.served_by = instance_name(this_host)
        self._stores: dict[str, StoreInfo] = {}
        """Key-value stores seen so far (a topology's stores do not change while it runs)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and not scope["query_string"]:
            started = time.perf_counter()
            response = self._answer(scope)
            if response is not None:
                await response(scope, receive, send)
                self.metrics.observe(ROUTE, 200, time.perf_counter() - started)
                return
        await self.app(scope, receive, send)

    def _answer(self, scope: Scope) -> JSONResponse | None:
        """The 200 of a plain local key get, or None to let the app answer."""
        path: str = scope["path"]
        if not path.startswith(_PREFIX) or scope.get("root_path"):
            return None
        name, _, key = path[len(_PREFIX) :].partition("/")
        if not name or not key or "/" in key or target_refusal(scope) is not None:
            return None
        store = self._store(name)
        if store is None:
            return None
        try:
            typed = store.keys.parse(key)
            forwarded = any(header == _HOP for header, _ in scope["headers"])
            route = route_key(
                self.streams, name, typed, store.keys.serde, this_host=self.this_host, stale=False, forwarded=forwarded
            )
            if not route.local:
                return None
            value = self.streams.store(name, _KEY_VALUE, partition=route.partition).get(typed)
            if value is None:
                return None
            position = None if route.partition is None else self.streams.store_position(name, route.partition)
        except Exception:  # whatever it is, the app answers it (and says what it is)
            return None
        headers = {SERVED_BY_HEADER: self.served_by}
        if position:
            headers[POSITION_HEADER] = format_position(position)
        return JSONResponse(key_value_body(typed, value), headers=headers)

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
