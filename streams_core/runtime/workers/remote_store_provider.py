"""RemoteStoreProvider: the instance's store provider over one worker process (`stream.threads.mode=process`).

It stands where a `StreamThreadStateStoreProvider` stands for an in-process thread, so
`QueryableStoreProvider` and the composite read-only views (and the REST layer above them) are
the same in both modes. Which copies a worker holds comes from its last report; each read is one
request on the worker's query channel, answered by the worker from its own stores
(`WorkerStoreQueries`), which checks again, so a report that is out of date costs a retry
(InvalidStateStoreError, 503 over REST), never a wrong answer.

As a `StoreHost` it is asked asynchronously with a deadline (`ask`): the REST layer's path, which
never blocks the instance's loop. The read-only views of `KafkaStreams.store()` are synchronous
(Kafka Streams' API): their calls wait for the worker at most `SYNC_TIMEOUT_S`, and fail at once
while the worker has not answered for longer than that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import InvalidStateStoreError
from streams_core.query.internals.store_query_utils import QUERY_STORE_TYPE
from streams_core.runtime.queries.state_store_providers import LagInfo
from streams_core.runtime.queries.store_host import (
    ALL_ACTIVE,
    Deadline,
    HostRequest,
    RemoteCopy,
    StoreQuery,
    StoreQueryTimeoutError,
    StoreRead,
    StoreReads,
)
from streams_core.runtime.workers.worker_channel import ChannelClosedError, ChannelTimeoutError, QueryChannel
from streams_core.state.queryable_store_types import QueryableStoreType, QueryableStoreTypes

__all__ = ["IQV2_WIRE_TYPE", "SYNC_TIMEOUT_S", "RemoteStore", "RemoteStoreProvider", "WorkerQueries", "ask"]

IQV2_WIRE_TYPE = "iqv2"
"""IQv2's query store type on the wire (worker_store_queries.py reads it back)."""

SYNC_TIMEOUT_S = 1.0
"""Longest a synchronous read (a `KafkaStreams.store()` view, a worker's metrics) waits for its worker."""
LAGS_TIMEOUT_S = 10.0
"""Longest `lags()` waits (the worker asks the broker for changelog ends; callers bound it further)."""


class WorkerQueries(Protocol):
    """What the provider needs of a worker: its name, the copies it last reported, its query channel."""

    name: str

    def copies(self) -> Mapping[str, frozenset[tuple[int, bool]]]: ...

    def query_channel(self) -> QueryChannel | None: ...


def _channel(worker: WorkerQueries) -> QueryChannel:
    channel = worker.query_channel()
    if channel is None:
        raise InvalidStateStoreError(f"{worker.name} is not running (retry)")
    return channel


def _result(reply: tuple[bool, Any, bool]) -> Any:
    ok, result, rows = reply
    if not ok:
        raise result
    return iter(result) if rows else result


def ask(worker: WorkerQueries, request: tuple[Any, ...], timeout: float = SYNC_TIMEOUT_S) -> Any:
    """The worker's answer to `request`, waited for synchronously (at most `timeout`); the worker's
    exception raised here; InvalidStateStoreError (retriable) when the worker is gone, not started
    or does not answer in time (`StoreQueryTimeoutError`)."""
    channel = _channel(worker)
    try:
        return _result(channel.call(request, timeout))
    except ChannelClosedError as exc:
        raise InvalidStateStoreError(f"{worker.name} is gone (retry): {exc}") from None
    except ChannelTimeoutError as exc:
        raise StoreQueryTimeoutError(worker.name, exc.unanswered_for) from None


async def ask_async(worker: WorkerQueries, request: tuple[Any, ...], deadline: Deadline) -> Any:
    """`ask`, awaited until `deadline` on the instance's loop (which it never blocks)."""
    channel = _channel(worker)
    try:
        return _result(await channel.request(request, deadline.remaining()))
    except ChannelClosedError as exc:
        raise InvalidStateStoreError(f"{worker.name} is gone (retry): {exc}") from None
    except ChannelTimeoutError as exc:
        raise StoreQueryTimeoutError(worker.name, exc.unanswered_for) from None


def _wire_type(store_type: QueryableStoreType[Any] | None) -> Any:
    """A built-in store type by its name (one short string per request: IQv2's "iqv2"); a user's own type as itself."""
    if store_type is QUERY_STORE_TYPE:
        return IQV2_WIRE_TYPE
    kind = getattr(store_type, "kind", None)
    if isinstance(kind, str) and getattr(QueryableStoreTypes, kind, None) is not None:
        return kind
    return store_type


def _read_request(
    store: str, store_type: QueryableStoreType[Any] | None, query: StoreQuery, method: str, args: tuple[Any, ...]
) -> tuple[Any, ...]:
    """The wire form of a read (worker_store_queries.py); `store_type` None: the global store `store`."""
    return ("read", store, _wire_type(store_type), query.partition, query.stale, query.max_lag, method, args)


def _outcome(read: StoreRead, reply: tuple[bool, Any, bool]) -> tuple[bool, Any]:
    """One read's `(True, answer)` or `(False, exception)` from its reply in a "reads" answer."""
    ok, result, rows = reply
    if not ok:
        return False, result
    if read.with_position:
        value, value_rows, position = result
        return True, ((iter(value) if value_rows else value), position)
    return True, iter(result) if rows else result


class RemoteStore(RemoteCopy):
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
        self._store_type = store_type
        self._query = query
        self.name = name
        self.key_serde = key_serde

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):
            raise AttributeError(method)

        def call(*args: Any) -> Any:
            return ask(self._worker, _read_request(self.name, self._store_type, self._query, method, args))

        return call

    async def ask(self, method: str, args: tuple[Any, ...], deadline: Deadline) -> Any:
        """`method(*args)` of this store, asked of the worker until `deadline` (the asynchronous path)."""
        return await ask_async(self._worker, _read_request(self.name, self._store_type, self._query, method, args), deadline)

    def __repr__(self) -> str:
        return f"RemoteStore({self.name!r} in {self._worker.name})"


class RemoteStoreProvider:
    """The local copies of stores in one worker process, as the instance queries them."""

    __slots__ = ("_key_serde", "_worker")

    def __init__(self, worker: WorkerQueries, key_serde: Callable[[str], Any]) -> None:
        """`key_serde(store)`: the store's key serde (from the topology's description)."""
        self._worker = worker
        self._key_serde = key_serde

    @property
    def host_name(self) -> str:
        return self._worker.name

    def holds(self, store_name: str, query: StoreQuery) -> bool:
        """Whether the worker's last report has a copy the query may read (active, or any when stale)."""
        copies = self._worker.copies().get(store_name, frozenset())
        return any((query.partition is None or p == query.partition) and (active or query.stale) for p, active in copies)

    def copies(self, store_name: str) -> dict[int, bool]:
        return dict(self._worker.copies().get(store_name, frozenset()))

    def key_serde(self, store_name: str) -> Any:
        return self._key_serde(store_name)

    def stores(self, store_name: str, store_type: QueryableStoreType[Any], query: StoreQuery = ALL_ACTIVE) -> list[Any]:
        """One `RemoteStore` when the worker holds a copy the query may read (active, or any when stale)."""
        if self.holds(store_name, query):
            return [RemoteStore(self._worker, store_name, store_type, query, self._key_serde(store_name))]
        return []

    def global_store(self, store_name: str) -> RemoteStore:
        """The worker's copy of a global store (every worker has all of it)."""
        return RemoteStore(self._worker, store_name, None, ALL_ACTIVE, self._key_serde(store_name))

    async def ask(self, request: HostRequest, deadline: Deadline) -> Any:
        """The worker's answer to `request`, awaited until `deadline` (see `StoreHost`)."""
        if isinstance(request, StoreReads):  # one request for them all (worker_store_queries.py: "reads")
            wires = [_read_request(r.store, r.store_type, r.query, r.method, r.args)[1:] for r in request.reads]
            replies = await ask_async(self._worker, ("reads", [r.with_position for r in request.reads], wires), deadline)
            return [_outcome(read, reply) for read, reply in zip(request.reads, replies, strict=True)]
        if isinstance(request, StoreRead):
            wire = _read_request(request.store, request.store_type, request.query, request.method, request.args)
            if request.with_position:  # one request for both (worker_store_queries.py: "read+position")
                value, rows, position = await ask_async(self._worker, ("read+position", *wire[1:]), deadline)
                return (iter(value) if rows else value), position
        else:
            wire = ("lags",)
        return await ask_async(self._worker, wire, deadline)

    def unanswered_for(self) -> float:
        channel = self._worker.query_channel()
        return 0.0 if channel is None else channel.unanswered_for()

    def probe(self) -> None:
        channel = self._worker.query_channel()
        if channel is not None:
            channel.probe()

    def position(self, store_name: str, partition: int) -> dict[TopicPartition, int] | None:
        if (partition, True) not in self._worker.copies().get(store_name, frozenset()):
            return None
        found: dict[TopicPartition, int] | None = ask(self._worker, ("position", store_name, partition))
        return found

    async def lags(self) -> dict[str, dict[int, LagInfo]]:
        """The worker's lags (the worker reads changelog ends from the broker), asked without blocking the loop."""
        if self._worker.query_channel() is None:
            return {}
        found: dict[str, dict[int, LagInfo]] = await ask_async(self._worker, ("lags",), Deadline.after(LAGS_TIMEOUT_S))
        return found
