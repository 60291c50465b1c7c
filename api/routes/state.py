"""Interactive queries over the state stores of the whole application (KIP-67, KIP-535, IQv2 bounds).

Single keys, window and session fetches are answered by a copy of the key's partition: the
active one, or with `stale=true` / `maxLag` any copy (the active first, then the standbys),
here when this instance has one, else forwarded one hop; a copy that cannot answer (dead host,
not queryable, too far behind) passes the query to the next. `position` bounds a key query
from below (read-your-writes). `all` and `range` gather the active copies of every partition of
the store, each asked of its host (api/scans.py), merged in store (serialized key) order, in
pages with `limit` and `after`; one missing instance or partition makes the whole answer 503,
never a partial list. Global stores are answered from this instance's copy.

Every query has one deadline (`ApiSettings.query_deadline`, plus `timeoutMs` for a position
bound): its reads of this instance's stream threads go through the asynchronous store path
(`KafkaStreams.store_queries`), its forwards through the `Forwarder`, each awaited until the
deadline, which answers 503 with `Retry-After` when it passes. Nothing here blocks the loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from api.deps import (
    Forwarded,
    Forwarding,
    GlobalStore,
    HopHeader,
    KeyText,
    KeyValueStore,
    SessionStore,
    StoreInfo,
    Streams,
    WindowStore,
    forwarder_of,
    streams_of,
)
from api.errors import KeyNotFoundError, error_responses
from api.forwarding import Forwarder, KeyRoute, answer_key, route_key
from api.instance import StreamsInstance
from api.keys import render
from api.paging import NEXT_AFTER_HEADER
from api.positions import POSITION_HEADER, POSITION_PATTERN, format_position, parse_position
from api.reads import read_key
from api.scans import PARTITIONS_PATTERN, key_bytes, scan
from api.schemas import KeyValueBean, WindowedValue, key_value_body
from streams_core.query import KeyQuery, RangeQuery, WindowKeyQuery, WindowRangeQuery
from streams_core.query import Query as IQuery
from streams_core.runtime.queries.store_host import Deadline

__all__ = ["router"]

router = APIRouter(prefix="/state", tags=["state"])

MAX_MILLIS = 2**63 - 1


def _answers(header: str, description: str) -> dict[int | str, dict[str, Any]]:
    answers = error_responses(400, 404, 503, served_by=True)
    answers[200]["headers"] = {**answers[200]["headers"], header: {"description": description, "schema": {"type": "string"}}}
    return answers


_KEY_ANSWERS = _answers(POSITION_HEADER, "The answering copy's position: a token for `position` (active copies).")
_SCAN_ANSWERS = _answers(
    NEXT_AFTER_HEADER,
    "The `after` of the next page, percent-encoded (UTF-8) where it has `%`, spaces, control or non-ASCII characters; absent on the last page.",
)

Stale = Annotated[bool, Query(description="Allow the answer from any copy (a standby may lag), the active copy first.")]
MaxLag = Annotated[
    int | None,
    Query(alias="maxLag", ge=0, le=MAX_MILLIS, description="Allow copies at most this many records behind (implies stale)."),
]
PositionBound = Annotated[
    str | None,
    Query(
        description="Answer only once the copy has processed these input offsets: `topic:partition:offset,...`.",
        json_schema_extra={"pattern": POSITION_PATTERN},
    ),
]
TimeoutMs = Annotated[
    int, Query(alias="timeoutMs", ge=0, le=30_000, description="How long to wait for `position` before a 503.")
]
Scope = Annotated[
    Literal["all", "local"],
    Query(description="`all`: gather from every instance; `local`: this instance's active copies only."),
]
Limit = Annotated[int | None, Query(ge=1, le=100_000, description="At most this many entries (a page).")]
After = Annotated[str | None, Query(description="Start after this key (the `X-Next-After` of the previous page, percent-decoded).")]
Partitions = Annotated[
    str | None,
    Query(
        description="Only these partitions of the store (`0,3`), from their active copies; with `scope=local`, "
        "503 if one is not active here (a gathering instance asks each instance for its partitions so).",
        json_schema_extra={"pattern": PARTITIONS_PATTERN},
    ),
]
KeyFrom = Annotated[str, Path(alias="from", description="The first key of the range (inclusive).")]
KeyTo = Annotated[str, Path(alias="to", description="The last key of the range (inclusive).")]
TimeFrom = Annotated[int, Path(alias="from", ge=0, le=MAX_MILLIS, description="Earliest window start, epoch ms.")]
TimeTo = Annotated[int, Path(alias="to", ge=0, le=MAX_MILLIS, description="Latest window start, epoch ms (inclusive).")]

@dataclass(slots=True)
class KeyRead:
    """A key query's IQv2 query of its copy, then `render` of the answer."""

    query: IQuery[Any]
    render: Callable[[Any], Any]


@dataclass(slots=True)
class KeyQueries:
    """What a key query is asked with: the request, its staleness and position bounds, its deadline."""

    request: Request
    streams: StreamsInstance
    forwarder: Forwarder
    forwarded: bool
    stale: bool
    max_lag: int | None
    bound: dict[Any, int] | None
    timeout_s: float
    deadline: Deadline

    def answer(self, store: StoreInfo, key: Any, read: KeyRead) -> Awaitable[Response]:
        """The answer of the first copy of the key's partition that can give it (`read` of it), to await.

        Not a coroutine itself: the route is decided here (its errors raised at once) and the read
        or the candidates' loop returned, one frame less on the hottest path."""
        route = route_key(
            self.streams,
            store.name,
            key,
            store.keys.serde,
            this_host=self.forwarder.this_host,
            stale=self.stale or self.max_lag is not None,
            forwarded=self.forwarded,
        )

        if route.local and not route.hosts:  # this instance's copy only (the common get): no candidates to try
            return self._read_here(route, store, read)

        async def local() -> Response:
            return await self._read_here(route, store, read)

        wait_s = self.timeout_s if self.bound is not None else 0.0
        return answer_key(route, self.forwarder, self.request, local, wait_s, self.deadline)

    async def _read_here(self, route: KeyRoute, store: StoreInfo, read: KeyRead) -> Response:
        answer, position = await read_key(
            self.streams,
            store.name,
            store.is_global,
            read.query,
            route.partition,
            stale=route.stale,
            max_lag=self.max_lag,
            bound=self.bound,
            timeout_s=self.timeout_s,
            deadline=self.deadline,
        )
        body = read.render(answer)
        headers = {POSITION_HEADER: format_position(position.offsets)} if position is not None and position.offsets else None
        return JSONResponse(body, headers=headers)


def plain_key_queries(
    request: Request, streams: StreamsInstance, forwarder: Forwarder, forwarded: bool, deadline_s: float
) -> KeyQueries:
    """The queries of a request without parameters (active copy, no position bound), due in `deadline_s`."""
    return KeyQueries(request, streams, forwarder, forwarded, False, None, None, 1.0, Deadline.after(deadline_s))


async def _key_queries(
    request: Request,
    forwarded_by: HopHeader = None,
    stale: Stale = False,
    max_lag: MaxLag = None,
    position: PositionBound = None,
    timeout_ms: TimeoutMs = 1000,
) -> KeyQueries:
    """No nested dependencies: FastAPI resolves each per query, the hottest route's largest cost."""
    bound = None if position is None else parse_position(position)
    seconds = request.app.state.settings.query_deadline + (timeout_ms / 1000 if bound is not None else 0.0)
    return KeyQueries(
        request,
        streams_of(request),
        forwarder_of(request),
        forwarded_by is not None,
        stale,
        max_lag,
        bound,
        timeout_ms / 1000,
        Deadline.after(seconds),
    )


KeyQueryOf = Annotated[KeyQueries, Depends(_key_queries)]


def key_value(query: KeyQueries, store: StoreInfo, key: str) -> Awaitable[Response]:
    """The answer to `GET /state/keyvalue/{store}/{key}` (to await): the route's, and the key-get path's
    (api/key_gets.py). Errors found before any read (a key the serde rejects, no route) are raised at once."""
    typed = store.parse_key(key)

    def render_value(value: Any) -> dict[str, Any]:
        if value is None:
            raise KeyNotFoundError(store.name, key)
        return key_value_body(typed, value)

    return query.answer(store, typed, KeyRead(KeyQuery.with_key(typed), render_value))


@router.get("/keyvalue/{store}/{key}", response_model=KeyValueBean, responses=_KEY_ANSWERS)
async def get_key_value(query: KeyQueryOf, store: KeyValueStore, key: KeyText) -> Any:
    """The value of `key`, from a copy of its partition; 404 if it has none."""
    return await key_value(query, store, key)


@router.get("/global/{store}/{key}", response_model=KeyValueBean, responses=error_responses(400, 404, 503, served_by=True))
async def get_global_value(request: Request, streams: Streams, store: GlobalStore, key: KeyText) -> KeyValueBean:
    """The value of `key` in a global store, from this instance's copy (every instance has all of it)."""
    typed = store.parse_key(key)
    value, _ = await read_key(
        streams, store.name, True, KeyQuery.with_key(typed), None, stale=False, max_lag=None, bound=None, timeout_s=0.0,
        deadline=_deadline(request),
    )
    if value is None:
        raise KeyNotFoundError(store.name, key)
    return KeyValueBean(key=render(typed), value=render(value))


def _deadline(request: Request) -> Deadline:
    return Deadline.after(request.app.state.settings.query_deadline)


@router.get("/keyvalues/{store}/all", response_model=list[KeyValueBean], responses=_SCAN_ANSWERS)
async def all_key_values(
    request: Request,
    streams: Streams,
    forwarder: Forwarding,
    forwarded: Forwarded,
    store: KeyValueStore,
    scope: Scope = "all",
    limit: Limit = None,
    after: After = None,
    partitions: Partitions = None,
) -> Response:
    """The entries of `store` in key order, from all instances (or this one with `scope=local`), a page at a time."""

    def entries(cursor: Any) -> RangeQuery:
        return RangeQuery.with_no_bounds() if cursor is None else RangeQuery.with_lower_bound(cursor)

    gather = scope == "all" and not forwarded
    return await scan(
        request, streams, forwarder, store, entries, _deadline(request), gather=gather, limit=limit, after=after, partitions=partitions
    )


@router.get("/keyvalues/{store}/range/{from}/{to}", response_model=list[KeyValueBean], responses=_SCAN_ANSWERS)
async def range_key_values(
    request: Request,
    streams: Streams,
    forwarder: Forwarding,
    forwarded: Forwarded,
    store: KeyValueStore,
    key_from: KeyFrom,
    key_to: KeyTo,
    scope: Scope = "all",
    limit: Limit = None,
    after: After = None,
    partitions: Partitions = None,
) -> Response:
    """The entries of `store` with keys from `from` to `to` (inclusive, in serialized key order), a page at a time."""
    lower, upper = store.parse_key(key_from), store.parse_key(key_to)
    to_bytes = key_bytes(store)

    def entries(cursor: Any) -> RangeQuery:
        start = lower if cursor is None or to_bytes(cursor) < to_bytes(lower) else cursor
        return RangeQuery.with_range(start, upper)

    gather = scope == "all" and not forwarded
    return await scan(
        request, streams, forwarder, store, entries, _deadline(request), gather=gather, limit=limit, after=after, partitions=partitions
    )


def _windows(key: Any, entries: Any, size: int | None = None) -> list[dict[str, Any]]:
    """Window fetches as `(start, value)` pairs (window stores) or windowed entries (session stores)."""
    found = []
    for entry in entries:
        if size is not None:
            start, value = entry
            end = start + size
        else:
            window = entry.key.window
            start, end, value = window.start, window.end, entry.value
        body = WindowedValue(key=render(key), window_start=start, window_end=end, value=render(value))
        found.append(body.model_dump(by_alias=True))
    return found


@router.get("/windowed/{store}/{key}/{from}/{to}", response_model=list[WindowedValue], responses=_KEY_ANSWERS)
async def windowed_values(query: KeyQueryOf, store: WindowStore, key: KeyText, time_from: TimeFrom, time_to: TimeTo) -> Any:
    """The windows of `key` that start from `from` to `to`, oldest first, from a copy of its partition."""
    typed = store.parse_key(key)
    size = store.window_size or 0
    window_query = WindowKeyQuery.with_key_and_window_start_range(typed, time_from, time_to)
    read = KeyRead(window_query, lambda found: _windows(typed, found, size))
    return await query.answer(store, typed, read)


@router.get("/session/{store}/{key}", response_model=list[WindowedValue], responses=_KEY_ANSWERS)
async def session_values(query: KeyQueryOf, store: SessionStore, key: KeyText) -> Any:
    """The sessions of `key`, oldest first (each `[windowStart, windowEnd]` inclusive), from a copy of its partition."""
    typed = store.parse_key(key)
    read = KeyRead(WindowRangeQuery.with_key(typed), lambda found: _windows(typed, found))
    return await query.answer(store, typed, read)
