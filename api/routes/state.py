"""Interactive queries over the state stores of the whole application (KIP-67).

Single keys and window fetches are answered by the key's owner: here when this instance owns
the key (or holds a standby copy and `stale=true`), else forwarded one hop to the owner. `all`
and `range` gather the active copies of every instance hosting the store, each asked with
`scope=local`, and merge them in store (serialized key) order; one missing instance makes the
whole answer 503, never a partial list.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, Response

from api.deps import Forwarded, Forwarding, KeyText, KeyValueStore, StoreInfo, Streams, WindowStore
from api.errors import KeyNotFoundError, NotAvailableError, error_responses
from api.forwarding import SERVED_BY_HEADER, Forwarder, KeyRoute, route_key
from api.instance import StreamsInstance
from api.keys import render
from api.schemas import KeyValueBean, WindowedValue
from streams_core import State
from streams_core.state import QueryableStoreTypes

__all__ = ["router"]

router = APIRouter(prefix="/state", tags=["state"])

MAX_MILLIS = 2**63 - 1
_ANSWERS = error_responses(400, 404, 503, served_by=True)

Stale = Annotated[
    bool, Query(description="Allow the answer from a standby copy, which may lag (503 while the group rebalances).")
]
Scope = Annotated[
    Literal["all", "local"],
    Query(description="`all`: gather from every instance; `local`: this instance's active copies only."),
]
KeyFrom = Annotated[str, Path(alias="from", description="The first key of the range (inclusive).")]
KeyTo = Annotated[str, Path(alias="to", description="The last key of the range (inclusive).")]
TimeFrom = Annotated[int, Path(alias="from", ge=0, le=MAX_MILLIS, description="Earliest window start, epoch ms.")]
TimeTo = Annotated[int, Path(alias="to", ge=0, le=MAX_MILLIS, description="Latest window start, epoch ms (inclusive).")]

Entries = list[dict[str, Any]]


def _route(
    streams: StreamsInstance, forwarder: Forwarder, store: StoreInfo, key: Any, stale: bool, hop: bool
) -> KeyRoute:
    serde = store.keys.serde
    return route_key(streams, store.name, key, serde, this_host=forwarder.this_host, stale=stale, forwarded=hop)


@router.get("/keyvalue/{store}/{key}", response_model=KeyValueBean, responses=_ANSWERS)
async def get_key_value(
    request: Request,
    streams: Streams,
    forwarder: Forwarding,
    forwarded: Forwarded,
    store: KeyValueStore,
    key: KeyText,
    stale: Stale = False,
) -> Any:
    """The value of `key`, from the instance that owns it; 404 if it has none."""
    typed = store.parse_key(key)
    route = _route(streams, forwarder, store, typed, stale, forwarded)
    if route.host is not None:
        return await forwarder.relay(route.host, request)
    kind = QueryableStoreTypes.key_value_store()
    value = streams.store(store.name, kind, partition=route.partition, stale=route.stale).get(typed)
    if value is None:
        raise KeyNotFoundError(store.name, key)
    return KeyValueBean(key=render(typed), value=render(value))


def _entries(entries: Iterable[Any]) -> Entries:
    return [{"key": render(key), "value": render(value)} for key, value in entries]


async def _gather(
    request: Request,
    response: Response,
    streams: StreamsInstance,
    forwarder: Forwarder,
    store: StoreInfo,
    local: Callable[[], Entries],
) -> Entries:
    """The entries of every instance hosting `store`, merged in serialized-key order."""
    if forwarder.this_host is None:
        return local()
    if streams.state is not State.RUNNING:
        raise NotAvailableError("not queryable", store=store.name, state=streams.state.name)
    hosts = sorted(m.host_info for m in streams.all_metadata_for_store(store.name) if store.name in m.state_store_names)
    remote = [host for host in hosts if host != forwarder.this_host]
    lists = await forwarder.gather_json(remote, request, {**request.query_params, "scope": "local"})
    if len(remote) < len(hosts):
        lists.append(local())
    response.headers[SERVED_BY_HEADER] = ", ".join(str(host) for host in hosts) or forwarder.served_by
    return list(heapq.merge(*lists, key=lambda entry: store.keys.sort_key(entry["key"])))


@router.get("/keyvalues/{store}/all", response_model=list[KeyValueBean], responses=_ANSWERS)
async def all_key_values(
    request: Request,
    response: Response,
    streams: Streams,
    forwarder: Forwarding,
    forwarded: Forwarded,
    store: KeyValueStore,
    scope: Scope = "all",
) -> Entries:
    """Every entry of `store` in key order, from all instances (or this one with `scope=local`)."""

    def local() -> Entries:
        return _entries(streams.store(store.name, QueryableStoreTypes.key_value_store()).all())

    if scope == "local" or forwarded:
        return local()
    return await _gather(request, response, streams, forwarder, store, local)


@router.get("/keyvalues/{store}/range/{from}/{to}", response_model=list[KeyValueBean], responses=_ANSWERS)
async def range_key_values(
    request: Request,
    response: Response,
    streams: Streams,
    forwarder: Forwarding,
    forwarded: Forwarded,
    store: KeyValueStore,
    key_from: KeyFrom,
    key_to: KeyTo,
    scope: Scope = "all",
) -> Entries:
    """The entries of `store` with keys from `from` to `to` (inclusive, in serialized key order)."""
    lower, upper = store.parse_key(key_from), store.parse_key(key_to)

    def local() -> Entries:
        return _entries(streams.store(store.name, QueryableStoreTypes.key_value_store()).range(lower, upper))

    if scope == "local" or forwarded:
        return local()
    return await _gather(request, response, streams, forwarder, store, local)


@router.get("/windowed/{store}/{key}/{from}/{to}", response_model=list[WindowedValue], responses=_ANSWERS)
async def windowed_values(
    request: Request,
    streams: Streams,
    forwarder: Forwarding,
    forwarded: Forwarded,
    store: WindowStore,
    key: KeyText,
    time_from: TimeFrom,
    time_to: TimeTo,
    stale: Stale = False,
) -> Any:
    """The windows of `key` that start from `from` to `to`, oldest first, from the key's owner."""
    typed = store.parse_key(key)
    route = _route(streams, forwarder, store, typed, stale, forwarded)
    if route.host is not None:
        return await forwarder.relay(route.host, request)
    view = streams.store(store.name, QueryableStoreTypes.window_store(), partition=route.partition, stale=route.stale)
    size = store.window_size or 0
    return [
        WindowedValue(key=render(typed), window_start=start, window_end=start + size, value=render(value))
        for start, value in view.fetch(typed, time_from, time_to)
    ]
