"""KeyGetFastPath: the plain key get answered before FastAPI's routing and dependency layers.

`GET /state/keyvalue/{store}/{key}` with no query parameters is the query an application sends
most. Through FastAPI it costs about three times what the HTTP server itself does (routing,
parameter parsing and validation, dependency solving, three middlewares): CPU the stream thread
on the same event loop would have used. This layer answers two cases with the route's own parts
(`describe_store`, `route_key`, the store view, `key_value_body`, the `Forwarder`):
- the key's active copy is here and holds a value: the 200;
- the key's active copy is on another instance: that instance's answer relayed, or the same
  503 the route gives when it cannot be reached (the route would ask the same single host).
Every other request, and any such get that is not one of these here (a 404, a 503 of this
instance, a 400), goes to the app unchanged, which answers it as it always did. So the fast path
can only make an answer cheaper, never change it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from api.deps import StoreInfo, describe_store
from api.errors import ApiError, api_error_response
from api.forwarding import HOP_HEADER, SERVED_BY_HEADER, Forwarder, fill_path, instance_name, route_key
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


class _Relay(NamedTuple):
    """A get to relay: through which forwarder, to which host, at which path."""

    forwarder: Forwarder
    host: HostInfo
    path: str


class KeyGetFastPath:
    """ASGI middleware: answers plain key gets itself (here or relayed), passes everything else to `app`."""

    def __init__(
        self,
        app: ASGIApp,
        streams: StreamsInstance,
        metrics: StreamsMetrics,
        this_host: HostInfo | None,
        forwarder: Callable[[], Forwarder | None] = lambda: None,
        retry_after: int = 1,
    ) -> None:
        self.app = app
        self.streams = streams
        self.metrics = metrics
        self.this_host = this_host
        self.served_by = instance_name(this_host)
        self._forwarder = forwarder
        """The app's forwarder once its lifespan started (None before: the app forwards then)."""
        self._retry_after = retry_after
        self._stores: dict[str, StoreInfo] = {}
        """Key-value stores seen so far (a topology's stores do not change while it runs)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and not scope["query_string"]:
            started = time.perf_counter()
            decided = self._answer(scope)
            answer = await self._relay(decided) if isinstance(decided, _Relay) else decided
            if answer is not None:
                await answer(scope, receive, send)
                self.metrics.observe(ROUTE, answer.status_code, time.perf_counter() - started)
                return
        await self.app(scope, receive, send)

    def _answer(self, scope: Scope) -> JSONResponse | _Relay | None:
        """The 200 of a plain local key get, the host to relay it to, or None to let the app answer."""
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
                forwarder = self._forwarder()
                if len(route.hosts) != 1 or forwarder is None:
                    return None
                return _Relay(forwarder, route.hosts[0], fill_path(ROUTE, {"store": name, "key": key}))
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

    async def _relay(self, relay: _Relay) -> Response:
        """The owner's answer, as the route relays it (`Forwarder.relay`), or the route's error answer."""
        try:
            return await relay.forwarder.relay_path(relay.host, relay.path, ROUTE)
        except ApiError as exc:
            answer = api_error_response(exc, self._retry_after)
            answer.headers[SERVED_BY_HEADER] = self.served_by
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
