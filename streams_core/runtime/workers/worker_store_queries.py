"""WorkerStoreQueries: a worker process's answers to the instance's store queries.

The instance's REST server and `KafkaStreams.store()` views run in the instance process; the
stores live in the worker that runs their task. A query reaches the worker as one small request
on its query channel and is answered here from the worker's own `QueryableStoreProvider` (its
stream thread's copies, through the record cache, and its global stores), so an answer is as
fresh as one read in the same process. Each request is one method call on a read-only view;
an iterator is materialized before it goes back.

Requests (tuples, see `remote_store_provider.py` for the instance's side):
- `("read", store, store_type, partition, stale, max_lag, method, args)`: `method(*args)` of the view
  (`store_type` a built-in type's name, "iqv2" for IQv2's query type, a user's own type, or None: the global
  store `store`, whose `run(query)` is an IQv2 query of it);
- `("read+position", ...)`: the same as `read`, answered `(result, rows, position)` (`rows`: the
  result is an iterator's entries, as a list; `position`: the active copy's of the partition, or None);
- `("reads", with_positions, reads)`: several reads at once (`read` or, where `with_positions` says,
  `read+position`, each without its op), answered with one reply each, as those requests would be;
- `("position", store, partition)`: the active copy's input position (IQv2 Position);
- `("lags",)`: the local copies' changelog lags (KIP-535);
- `("ping",)`: nothing (None): the instance's health check sees that the worker answers.

The reply is `(True, result, rows)` (`rows`: the result is an iterator's entries, as a list) or
`(False, exception, False)`; an exception pickle cannot carry is sent as a `StreamsError` with its text.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from streams_core.errors import InvalidStateStoreError, StreamsError
from streams_core.query.internals.store_query_utils import QUERY_STORE_TYPE
from streams_core.runtime.queries.state_store_providers import QueryableStoreProvider, StoreQuery
from streams_core.runtime.queries.store_host import ListedStores
from streams_core.runtime.threads.stream_thread import StreamThread
from streams_core.runtime.threads.thread_state import ThreadState
from streams_core.runtime.workers.remote_store_provider import IQV2_WIRE_TYPE
from streams_core.state.queryable_store_types import QueryableStoreTypes

__all__ = ["WorkerStoreQueries", "local_copies"]

log = logging.getLogger(__name__)

_STALE_READABLE = frozenset({ThreadState.RUNNING, ThreadState.PARTITIONS_REVOKED, ThreadState.PARTITIONS_ASSIGNED})


def local_copies(thread: StreamThread) -> dict[str, frozenset[tuple[int, bool]]]:
    """Per store, the `(partition, active)` copies the thread holds (standbys once readable): what
    the instance routes a query by. The worker re-checks on every query, so a stale list costs a
    retry (InvalidStateStoreError), never a wrong answer."""
    found: dict[str, set[tuple[int, bool]]] = {}
    tm = thread.task_manager
    for holders, active in ((tm.active_states(), True), (tm.readable_standby_states(), False)):
        for task_id, state in holders:
            for name in state.stores:
                found.setdefault(name, set()).add((task_id.partition, active))
    return {name: frozenset(copies) for name, copies in found.items()}


class WorkerStoreQueries:
    """Answers the query channel's requests from one worker's stream thread and global stores."""

    __slots__ = ("_global_stores", "_provider", "_thread", "_views")

    def __init__(self, thread: StreamThread, global_stores: Callable[[], Mapping[str, Any]]) -> None:
        self._thread = thread
        self._global_stores = global_stores
        self._views: dict[tuple[Any, ...], Any] = {}
        self._provider = QueryableStoreProvider(lambda: [thread.store_provider], self._check_queryable, global_stores)

    def _check_queryable(self, store_name: str, stale: bool) -> None:
        """The worker's own check (the instance checked its state before asking): its thread runs,
        or, for a stale read, at least is in a rebalance."""
        state = self._thread.state
        if state is ThreadState.RUNNING or (stale and state in _STALE_READABLE):
            return
        raise InvalidStateStoreError(
            f"state store {store_name!r} cannot be queried now: {self._thread.name} is {state.name} (retry)"
        )

    async def answer(self, request: tuple[Any, ...]) -> tuple[bool, Any, bool]:
        if request[0] == "reads":  # several reads, each answered as one would be
            _, with_position, wires = request
            reads = [("read+position" if position else "read", *wire) for position, wire in zip(with_position, wires, strict=True)]
            return True, [await self.answer(read) for read in reads], False
        try:
            result = await self._answer(request)
        except Exception as exc:
            return False, _portable(exc), False
        if isinstance(result, Iterator):
            return True, list(result), True
        return True, result, False

    async def _answer(self, request: tuple[Any, ...]) -> Any:
        op = request[0]
        if op == "read":
            method, args = request[6], request[7]
            if request[2] is None:  # a global store: itself, or an IQv2 query's view of it
                store = self._global_store(request[1])
                return QUERY_STORE_TYPE.create(ListedStores([store]), request[1]).run(*args) if method == "run" else getattr(store, method)(*args)
            return getattr(self._view(request[1:6]), method)(*args)
        if op == "read+position":
            found = getattr(self._view(request[1:6]), request[6])(*request[7])
            rows = isinstance(found, Iterator)
            partition = request[3]
            position = None if partition is None else self._provider.position(request[1], partition)
            return (list(found) if rows else found), rows, position
        if op == "position":
            return self._provider.position(request[1], request[2])
        if op == "lags":
            return await self._provider.lags()
        if op == "ping":
            return None
        raise StreamsError(f"unknown worker query {op!r}")

    def _view(self, key: tuple[Any, ...]) -> Any:
        """The read-only view of `(store, store_type, partition, stale, max_lag)`, made once: a view
        asks the provider for the copies on every call."""
        view = self._views.get(key)
        if view is None:
            name, store_type, partition, stale, max_lag = key
            if store_type == IQV2_WIRE_TYPE:
                store_type = QUERY_STORE_TYPE
            elif isinstance(store_type, str):
                store_type = getattr(QueryableStoreTypes, store_type)()
            view = self._views[key] = self._provider.get_store(name, store_type, StoreQuery(partition, stale, max_lag))
        return view

    def _global_store(self, name: str) -> Any:
        store = self._global_stores().get(name)
        if store is None:
            raise InvalidStateStoreError(f"global store {name!r} is not open in {self._thread.name} (retry)")
        return store


def _portable(exc: Exception) -> Exception:
    """The exception itself when pickle can carry it (and rebuild it), else a StreamsError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        log.debug("exception %r does not pickle; sent as text", exc)
        return StreamsError(f"{type(exc).__name__}: {exc}")
    return exc
