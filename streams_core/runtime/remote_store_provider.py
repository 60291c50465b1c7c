"""RemoteStoreProvider: the instance's store provider over one worker process (`stream.threads.mode=process`).

It stands where a `StreamThreadStateStoreProvider` stands for an in-process thread, so
`QueryableStoreProvider` and the composite read-only views (and the REST layer above them) are
the same in both modes. Which copies a worker holds comes from its last report; each call on a
`RemoteStore` is one request on the worker's query channel, answered by the worker from its
own stores (`WorkerStoreQueries`), which checks again, so a report that is out of date costs a
retry (InvalidStateStoreError, 503 over REST), never a wrong answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from streams_core.errors import InvalidStateStoreError
from streams_core.runtime.state_store_providers import ALL_ACTIVE, LagInfo, StoreQuery
from streams_core.runtime.topic_partition import TopicPartition
from streams_core.runtime.worker_channel import ChannelClosedError, QueryChannel
from streams_core.state.queryable_store_types import QueryableStoreType, QueryableStoreTypes

__all__ = ["RemoteStore", "RemoteStoreProvider", "WorkerQueries"]


class WorkerQueries(Protocol):
    """What the provider needs of a worker: its name, the copies it last reported, its query channel."""

    name: str

    def copies(self) -> Mapping[str, frozenset[tuple[int, bool]]]: ...

    def query_channel(self) -> QueryChannel | None: ...


def ask(worker: WorkerQueries, request: tuple[Any, ...]) -> Any:
    """The worker's answer to `request`; the worker's exception raised here; InvalidStateStoreError
    (retriable) when the worker is gone or not started."""
    channel = worker.query_channel()
    if channel is None:
        raise InvalidStateStoreError(f"{worker.name} is not running (retry)")
    try:
        ok, result, rows = channel.call(request)
    except ChannelClosedError as exc:
        raise InvalidStateStoreError(f"{worker.name} is gone (retry): {exc}") from None
    if not ok:
        raise result
    return iter(result) if rows else result


def _wire_type(store_type: QueryableStoreType[Any] | None) -> Any:
    """A built-in store type by its name (one short string per request); a user's own type as itself."""
    kind = getattr(store_type, "kind", None)
    if isinstance(kind, str) and getattr(QueryableStoreTypes, kind, None) is not None:
        return kind
    return store_type


class RemoteStore:
    """The copies of one store in one worker that a query may read, as one read-only store.

    Every public method of the read-only view (`get`, `range`, `fetch`, ...) is forwarded; an
    iterator comes back as a list. `key_serde` is the store's, for merging across workers.
    """

    def __init__(
        self,
        worker: WorkerQueries,
        name: str,
        store_type: QueryableStoreType[Any] | None,
        query: StoreQuery,
        key_serde: Any,
    ) -> None:
        """`store_type` None: `name` is a global store, read as the store itself."""
        self._worker = worker
        self._request = ("read", name, _wire_type(store_type), query.partition, query.stale, query.max_lag)
        self.name = name
        self.key_serde = key_serde

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):
            raise AttributeError(method)

        def call(*args: Any) -> Any:
            return ask(self._worker, (*self._request, method, args))

        return call

    def __repr__(self) -> str:
        return f"RemoteStore({self.name!r} in {self._worker.name})"


class RemoteStoreProvider:
    """The local copies of stores in one worker process, as the instance queries them."""

    __slots__ = ("_key_serde", "_worker")

    def __init__(self, worker: WorkerQueries, key_serde: Callable[[str], Any]) -> None:
        """`key_serde(store)`: the store's key serde (from the topology's description)."""
        self._worker = worker
        self._key_serde = key_serde

    def stores(self, store_name: str, store_type: QueryableStoreType[Any], query: StoreQuery = ALL_ACTIVE) -> list[Any]:
        """One `RemoteStore` when the worker holds a copy the query may read (active, or any when stale)."""
        copies = self._worker.copies().get(store_name, frozenset())
        if any((query.partition is None or p == query.partition) and (active or query.stale) for p, active in copies):
            return [RemoteStore(self._worker, store_name, store_type, query, self._key_serde(store_name))]
        return []

    def global_store(self, store_name: str) -> RemoteStore:
        """The worker's copy of a global store (every worker has all of it)."""
        return RemoteStore(self._worker, store_name, None, ALL_ACTIVE, self._key_serde(store_name))

    def position(self, store_name: str, partition: int) -> dict[TopicPartition, int] | None:
        if (partition, True) not in self._worker.copies().get(store_name, frozenset()):
            return None
        found: dict[TopicPartition, int] | None = ask(self._worker, ("position", store_name, partition))
        return found

    async def lags(self) -> dict[str, dict[int, LagInfo]]:
        """The worker's lags, asked off the event loop (the worker reads changelog ends from the broker)."""
        if self._worker.query_channel() is None:
            return {}
        found: dict[str, dict[int, LagInfo]] = await asyncio.to_thread(ask, self._worker, ("lags",))
        return found
