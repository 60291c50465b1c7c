"""The REST layer's reads as IQv2 queries: one query path below every state route.

A key get is a `KeyQuery`, a window fetch a `WindowKeyQuery`, a session fetch a key's
`WindowRangeQuery`, `all` and `range` a `RangeQuery` of each active partition here; each is a
`StateQueryRequest` answered by IQv2's machinery (`runtime/queries/interactive_query.py`: one `StoreRead`
per partition through the instance's store path, with the query's deadline, on a stream thread
or a worker process). A plain read requires the active copy (`require_active()`); `stale=true`
lets a standby answer (the active first), `maxLag` bounds how far behind (the machinery's
`max_lag`, the REST layer's own: Kafka's IQv2 has none); `position` is the request's
`PositionBound`, asked again every few milliseconds while the copy is behind, until `timeoutMs`.
A global store is read through the machinery's `query_global` (Kafka's `query()` has no answer
for one).

A partition's failure reason becomes the route's answer (docs/rest-api.md, "Errors"; a 503 is
never a partial or wrong answer):

| reason | answer |
|---|---|
| NOT_ACTIVE, NOT_PRESENT, DOES_NOT_EXIST | 503 `state store not queryable` (a key query tries its next copy first) |
| NOT_UP_TO_BOUND | asked again until `timeoutMs`, then 503 `position not reached` |
| UNKNOWN_QUERY_TYPE | 404 `store does not answer this query` |
| STORE_EXCEPTION | 503 `state store not queryable` when the copy's host did not answer by the deadline or is gone; 500 when the store itself raised (a bug, logged) |
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from api.errors import NotAvailableError, StoreNotFoundError
from api.instance import StreamsInstance
from api.positions import format_position
from streams_core import State
from streams_core.common.store import KeyValue
from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import InvalidStateStoreError
from streams_core.query.position import Position, PositionBound
from streams_core.query.queries import KeyQuery, Query, RangeQuery
from streams_core.query.query_result import FailureReason, QueryResult
from streams_core.query.state_query_request import StateQueryRequest
from streams_core.runtime.queries.interactive_query import query_global, query_partition, query_partitions
from streams_core.runtime.queries.store_host import Deadline

__all__ = ["POLL_S", "failure_error", "read_key", "read_scan"]

POLL_S = 0.005
"""How long a query with a `position` bound waits before asking a copy that was behind again."""
_UNBOUNDED = PositionBound.unbounded()
_NOT_QUERYABLE = frozenset({FailureReason.NOT_ACTIVE, FailureReason.NOT_PRESENT, FailureReason.DOES_NOT_EXIST})
_ONE: dict[int, frozenset[int]] = {}
"""The one-partition sets of key queries, made once each."""


def failure_error(result: QueryResult[Any], store: str) -> Exception:
    """The exception whose answer is `result`'s failure (the table of the module doc)."""
    reason = result.get_failure_reason()
    message = result.get_failure_message()
    if reason in _NOT_QUERYABLE:
        return InvalidStateStoreError(message)
    if reason is FailureReason.UNKNOWN_QUERY_TYPE:
        return StoreNotFoundError("store does not answer this query", store=store, reason=message)
    if reason is FailureReason.NOT_UP_TO_BOUND:
        return NotAvailableError("position not reached", store=store, reason=message)
    cause = result._cause  # STORE_EXCEPTION
    if isinstance(cause, InvalidStateStoreError):  # a host that did not answer in time, or is gone: retry
        return InvalidStateStoreError(message)
    return cause if isinstance(cause, Exception) else RuntimeError(message)


def _partitions(partition: int) -> frozenset[int]:
    found = _ONE.get(partition)
    if found is None:
        found = _ONE[partition] = frozenset((partition,))
    return found


def _request(
    store: str, query: Query[Any], partitions: frozenset[int], stale: bool, bound: PositionBound
) -> StateQueryRequest[Any]:
    """The request, made in one step (the builder would make one value per call on the hottest path)."""
    return StateQueryRequest(store, query, partitions, bound, not stale)


async def read_key(
    streams: StreamsInstance,
    store: str,
    is_global: bool,
    query: Query[Any],
    partition: int | None,
    *,
    stale: bool,
    max_lag: int | None,
    bound: Mapping[TopicPartition, int] | None,
    timeout_s: float,
    deadline: Deadline,
) -> tuple[Any, Position | None]:
    """A key query's answer here and its copy's position: of the key's `partition`, or (no discovery,
    `partition` None) of every local copy's, combined. A bounded query is asked again while its copy is
    behind, for `timeout_s`; a failure is raised as `failure_error` makes it."""
    queries = streams.store_queries
    if is_global:
        if bound is not None:  # a global copy has no position: it never reaches a bound
            raise _not_reached(store, {}, bound, "no active copy here")
        result = await query_global(queries, store, query, deadline)
        if result.is_failure():
            raise failure_error(result, store)
        return result.get_result(), None
    if partition is not None and bound is None:  # the common get: its partition's result, no wrappers around it
        result = await query_partition(queries, _request(store, query, _partitions(partition), stale, _UNBOUNDED), partition, None, None, deadline, max_lag)
        if result.is_failure():
            raise failure_error(result, store)
        return result.get_result(), result.get_position()
    position_bound = _UNBOUNDED if bound is None else PositionBound.at(Position(bound))
    if partition is not None:
        request = _request(store, query, _partitions(partition), stale, position_bound)
    else:
        _require_queryable(streams, store, stale)  # asked of every copy here, which may be none: say why not
        copies = queries.copies(store)
        named = {tp.partition for tp in bound or ()}
        request = _request(store, query, frozenset(p for p, active in copies.items() if active or stale) | named, stale, position_bound)
    give_up = time.monotonic() + timeout_s
    while True:
        results = (await query_partitions(queries, request, deadline, None, max_lag=max_lag)).get_partition_results()
        behind = without_position = False
        for result in results.values():
            if result.is_success():
                continue
            if result.get_failure_reason() is FailureReason.NOT_UP_TO_BOUND:
                behind = True
                without_position |= result.get_position() is None  # a standby: no position to reach the bound with
            elif bound is not None and result.get_failure_reason() is FailureReason.NOT_PRESENT:
                raise _not_reached(store, results, bound, "no active copy here")
            else:
                raise failure_error(result, store)
        if not behind:
            break
        if without_position:
            raise _not_reached(store, results, bound, "no active copy here")
        if time.monotonic() >= give_up or deadline.passed:
            raise _not_reached(store, results, bound, "timed out")
        await asyncio.sleep(POLL_S)
    if partition is not None:
        only = results[partition]
        return only.get_result(), only.get_position()
    return _combined(query, results), None if bound is None else _merged_position(results)


def _combined(query: Query[Any], results: Mapping[int, QueryResult[Any]]) -> Any:
    """Every local partition's answer to a key query as one (the key is in one partition only): the
    value found, or the entries found, in partition order."""
    answers = [results[p].get_result() for p in sorted(results)]
    if isinstance(query, KeyQuery):
        return next((answer for answer in answers if answer is not None), None)
    return itertools.chain.from_iterable(answers)


def _merged_position(results: Mapping[int, QueryResult[Any]]) -> Position:
    position = Position()
    for result in results.values():
        position = position.merge(result.get_position())
    return position


def _not_reached(
    store: str, results: Mapping[int, QueryResult[Any]], bound: Mapping[TopicPartition, int] | None, reason: str
) -> NotAvailableError:
    """503 with the position the copies reached and the part of the bound they were asked to reach."""
    asked = set(results) or {tp.partition for tp in bound or ()}
    reached = _merged_position(results)
    return NotAvailableError(
        "position not reached",
        store=store,
        position=format_position(reached.offsets),
        bound=format_position({tp: o for tp, o in (bound or {}).items() if tp.partition in asked}),
        reason=reason,
    )


async def read_scan(
    streams: StreamsInstance,
    store: str,
    is_global: bool,
    query: RangeQuery,
    key_bytes: Callable[[Any], bytes],
    deadline: Deadline,
    partitions: frozenset[int] | None = None,
) -> Iterator[KeyValue[Any, Any]]:
    """`query` (a range, ascending) answered by every active copy here, or by the active copies of exactly
    `partitions` (one not active here fails: NOT_PRESENT, NOT_ACTIVE), merged in serialized key order;
    the first failure raised (a scan is whole or not at all), InvalidStateStoreError (503) unless RUNNING."""
    queries = streams.store_queries
    if is_global:
        result = await query_global(queries, store, query, deadline)
        if result.is_failure():
            raise failure_error(result, store)
        found: Iterator[KeyValue[Any, Any]] = result.get_result()
        return found
    _require_queryable(streams, store, False)
    if partitions is not None:
        active = partitions
    else:
        active = frozenset(p for p, is_active in queries.copies(store).items() if is_active)
    if not active:
        return iter(())
    request = _request(store, query, active, False, _UNBOUNDED)
    results = (await query_partitions(queries, request, deadline, None)).get_partition_results()
    for result in results.values():
        if result.is_failure():
            raise failure_error(result, store)
    entries = [results[p].get_result() for p in sorted(results)]
    if len(entries) == 1:
        only: Iterator[KeyValue[Any, Any]] = entries[0]
        return only
    return heapq.merge(*entries, key=lambda kv: key_bytes(kv.key))


def _require_queryable(streams: StreamsInstance, store: str, stale: bool) -> None:
    """InvalidStateStoreError (503) unless the instance is RUNNING (or REBALANCING, for a stale read): a
    query of every copy here answers nothing rather than "absent" when there may be none to ask."""
    state = streams.state
    if not (state is State.RUNNING or (stale and state is State.REBALANCING)):
        raise InvalidStateStoreError(f"state store {store!r} cannot be queried now: the instance is {state.name} (retry)")
