"""The store providers behind `KafkaStreams.store()` (KIP-67) and the local lags (KIP-535).

- `StreamThreadStateStoreProvider`: one per stream thread; the local instances of a store in
  that thread's active tasks (and standby tasks for stale reads), one per task.
- `QueryableStoreProvider`: over every thread; hands out the read-only view of a store
  (`store_type.create(provider, name)`) through a `WrappingStoreProvider` that checks on every
  call whether the instance can be queried now, so a view never answers partially; and
  `query()`, the asynchronous path with a deadline (store_host.py) that the REST layer takes.

A standby copy is read only when its lag is known (its changelog position, and the changelog's
high watermark from the thread's last fetch) and within the query's `max_lag`: a copy the
rebalance just created, or one that has not fetched yet, could answer "absent" for a key that
exists. Active copies of a running task have lag 0, as in Kafka Streams.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import InvalidStateStoreError
from streams_core.query.internals.store_query_utils import QUERY_STORE_TYPE
from streams_core.runtime.queries.store_host import (
    ALL_ACTIVE,
    Deadline,
    HostRequest,
    ListedStores,
    NoCopyError,
    RemoteCopy,
    StoreHost,
    StoreQuery,
    StoreRead,
    StoreReads,
    merged,
)
from streams_core.serde import Serdes
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.queryable_store_types import QueryableStoreType

__all__ = [
    "ALL_ACTIVE",
    "LagInfo",
    "QueryableStoreProvider",
    "StoreQuery",
    "StreamThreadStateStoreProvider",
    "ThreadStoreProvider",
    "ThreadStores",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LagInfo:
    """How far a local store copy is behind its changelog (KIP-535)."""

    current_offset_position: int
    end_offset_position: int
    offset_lag: int


class ThreadStores(Protocol):
    """What a provider needs of a stream thread: its tasks' state managers and changelog ends."""

    def active_states(self) -> Sequence[tuple[TaskId, ProcessorStateManager]]: ...

    def standby_states(self) -> Sequence[tuple[TaskId, ProcessorStateManager]]: ...

    def readable_standby_states(self) -> Sequence[tuple[TaskId, ProcessorStateManager]]:
        """The standby copies whose changelogs once reached their ends (a stale read may use them)."""
        ...

    def changelog_highwater(self, partition: TopicPartition) -> int | None:
        """The changelog partition's high watermark as of the thread's last fetch; None before one."""
        ...

    def input_position(self, task_id: TaskId) -> Mapping[TopicPartition, int]:
        """Per source partition, the offset of the last record the active task processed."""
        ...

    async def changelog_end_offsets(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]: ...


class StreamThreadStateStoreProvider:
    """The instances of a store in one thread's tasks; as a `StoreHost`, answered at once (in process)."""

    __slots__ = ("_thread", "host_name")

    def __init__(self, thread: ThreadStores, name: str = "stream thread") -> None:
        self._thread = thread
        self.host_name = name

    # -- StoreHost: the thread's stores are on this loop, so an answer never waits ------------------

    def holds(self, store_name: str, query: StoreQuery) -> bool:
        return any(
            (query.partition is None or task_id.partition == query.partition) and state.get_store(store_name) is not None
            for task_id, state in (
                (*self._thread.active_states(), *self._thread.readable_standby_states()) if query.stale
                else self._thread.active_states()
            )
        )

    def copies(self, store_name: str) -> dict[int, bool]:
        found = {task_id.partition: False for task_id, state in self._thread.readable_standby_states() if state.get_store(store_name)}
        found.update((task_id.partition, True) for task_id, state in self._thread.active_states() if state.get_store(store_name))
        return found

    def key_serde(self, store_name: str) -> Any:
        """The key serde of the thread's copies (a bytes store's keys are their own bytes)."""
        for _, state in self._thread.active_states():
            store = state.get_store(store_name)
            if store is not None and getattr(store, "key_serde", None) is not None:
                return store.key_serde  # type: ignore[attr-defined]
        return Serdes.Bytes()

    async def ask(self, request: HostRequest, deadline: Deadline) -> Any:
        if isinstance(request, StoreReads):
            outcomes: list[tuple[bool, Any]] = []
            for read in request.reads:
                try:
                    outcomes.append((True, await self.ask(read, deadline)))
                except Exception as exc:
                    outcomes.append((False, exc))
            return outcomes
        if isinstance(request, StoreRead):
            stores = self.stores(request.store, request.store_type, request.query)
            if not stores and request.query.partition is not None:  # a standby too far behind, or just gone
                raise NoCopyError(
                    f"no queryable copy of store {request.store!r} for partition {request.query.partition} in {self.host_name} (retry)"
                )
            view = request.store_type.create(ListedStores(stores), request.store)
            result = getattr(view, request.method)(*request.args)
            if request.with_position:
                partition = request.query.partition
                return result, None if partition is None else self.position(request.store, partition)
            return result
        return await self.lags()

    def unanswered_for(self) -> float:
        return 0.0

    def probe(self) -> None:
        pass

    # -- the thread's copies ---------------------------------------------------------------------

    def stores(self, store_name: str, store_type: QueryableStoreType[Any], query: StoreQuery = ALL_ACTIVE) -> list[Any]:
        """Active copies (and, when `stale`, standby ones whose lag is known and within `max_lag`),
        of one partition's task when `partition` is set."""
        holders = list(self._thread.active_states())
        if query.stale:
            for task_id, state in self._thread.readable_standby_states():
                lag = self.standby_lag(state)
                if lag is not None and (query.max_lag is None or lag <= query.max_lag):
                    holders.append((task_id, state))
        found = []
        for task_id, state in holders:
            if query.partition is not None and task_id.partition != query.partition:
                continue
            store = state.get_store(store_name)
            if store is None:
                continue
            if not store_type.accepts(store):
                raise InvalidStateStoreError(f"state store {store_name!r} is not a {store_type!r}")
            found.append(store)
        return found

    def position(self, store_name: str, partition: int) -> dict[TopicPartition, int] | None:
        """The input offsets the active copy of `store_name` for `partition` has processed (IQv2's
        Position: the offset of the last record per source partition); None without such a copy."""
        for task_id, state in self._thread.active_states():
            if task_id.partition == partition and state.get_store(store_name) is not None:
                return dict(self._thread.input_position(task_id))
        return None

    def standby_lag(self, state: ProcessorStateManager) -> int | None:
        """Records the standby copy is behind the ends of its changelogs; None while unknown."""
        offsets = state.changelog_offsets
        lag = 0
        for tp in state.changelog_partitions.values():
            position = offsets.get(tp)
            end = self._thread.changelog_highwater(tp)
            if position is None or end is None:
                return None
            lag = max(lag, end - position)
        return lag

    async def lags(self) -> dict[str, dict[int, LagInfo]]:
        """Per store and partition of this thread's copies: position, changelog end and lag.

        A running active copy is at the end (lag 0); a standby copy is where its changelog reader is.
        """
        copies: list[tuple[str, TopicPartition, int | None]] = []
        for _, state in self._thread.active_states():
            copies += [(store, tp, None) for store, tp in state.changelog_partitions.items()]
        for _, state in self._thread.standby_states():
            offsets = state.changelog_offsets
            copies += [(store, tp, offsets.get(tp, 0)) for store, tp in state.changelog_partitions.items()]
        ends = await self._thread.changelog_end_offsets({tp for _, tp, _ in copies})
        lags: dict[str, dict[int, LagInfo]] = {}
        for store, tp, position in copies:
            end = ends.get(tp, 0 if position is None else position)
            current = end if position is None else position
            lags.setdefault(store, {})[tp.partition] = LagInfo(current, end, max(0, end - current))
        return lags


class ThreadStoreProvider(StoreHost, Protocol):
    """The local copies of stores in one stream thread (in this process or a worker process): the
    synchronous side for `KafkaStreams.store()`'s views, the asynchronous one as a `StoreHost`."""

    def stores(self, store_name: str, store_type: QueryableStoreType[Any], query: StoreQuery = ...) -> Sequence[Any]: ...

    def position(self, store_name: str, partition: int) -> dict[TopicPartition, int] | None: ...

    async def lags(self) -> dict[str, dict[int, LagInfo]]: ...


def _first_copy(read: StoreRead, hosts: Sequence[ThreadStoreProvider]) -> ThreadStoreProvider:
    """Of hosts holding a copy of the read's partition, the one with the active copy, else the first (a standby's)."""
    if read.query.stale and len(hosts) > 1:
        active = StoreQuery(read.query.partition)
        return next((host for host in hosts if host.holds(read.store, active)), hosts[0])
    return hosts[0]


class _WrappingStoreProvider:
    """KIP-67's WrappingStoreProvider: every thread's instances, after checking the instance may be queried."""

    __slots__ = ("_owner", "_query")

    def __init__(self, owner: QueryableStoreProvider, query: StoreQuery) -> None:
        self._owner = owner
        self._query = query

    def stores(self, store_name: str, store_type: QueryableStoreType[Any]) -> list[Any]:
        return self._owner.local_stores(store_name, store_type, self._query)


class QueryableStoreProvider:
    """Read-only views over the local instances of a store, across all stream threads."""

    def __init__(
        self,
        providers: Callable[[], Sequence[ThreadStoreProvider]],
        check_queryable: Callable[[str, bool], None],
        global_stores: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        """`check_queryable(store_name, stale)` raises InvalidStateStoreError when the instance cannot answer now;
        `global_stores` are the instance's global stores (every instance holds all of each)."""
        self._providers = providers
        self._check = check_queryable
        self._global_stores = global_stores or dict

    def get_store(self, store_name: str, store_type: QueryableStoreType[T], query: StoreQuery = ALL_ACTIVE) -> T:
        return store_type.create(_WrappingStoreProvider(self, query), store_name)

    def position(self, store_name: str, partition: int) -> dict[TopicPartition, int] | None:
        """The first thread's `position()` with an active copy of the partition."""
        for provider in self._providers():
            found = provider.position(store_name, partition)
            if found is not None:
                return found
        return None

    async def lags(self) -> dict[str, dict[int, LagInfo]]:
        """Every thread's `lags()`, merged by store."""
        merged: dict[str, dict[int, LagInfo]] = {}
        for provider in self._providers():
            for store, partitions in (await provider.lags()).items():
                merged.setdefault(store, {}).update(partitions)
        return merged

    async def query(self, read: StoreRead, deadline: Deadline) -> Any:
        """`read` answered by every host holding a copy it may read, asked at once, answers merged
        as the composite views merge copies. `StoreQueryTimeoutError` when a host does not answer by
        `deadline`; InvalidStateStoreError when the instance cannot be queried now, or no copy of the
        read's partition is here."""
        self._check(read.store, read.query.stale)
        global_store = self._global_stores().get(read.store)
        if global_store is not None:
            if not read.store_type.accepts(global_store):
                raise InvalidStateStoreError(f"global store {read.store!r} is not a {read.store_type!r}")
            if isinstance(global_store, RemoteCopy):  # a worker's copy
                result = await global_store.ask(read.method, read.args, deadline)
            else:  # through the type's view, as a thread's copies are read (an IQv2 query's view runs it)
                result = getattr(read.store_type.create(ListedStores([global_store]), read.store), read.method)(*read.args)
            return (result, None) if read.with_position else result
        hosts = [host for host in self._providers() if host.holds(read.store, read.query)]
        if read.query.partition is not None and not hosts:
            raise NoCopyError(
                f"no queryable copy of store {read.store!r} for partition {read.query.partition} here now (migrating or restoring; retry)"
            )
        if len(hosts) == 1:
            return await hosts[0].ask(read, deadline)
        if read.store_type is QUERY_STORE_TYPE:  # an IQv2 query reads one partition's one copy: the active one first
            return await _first_copy(read, hosts).ask(read, deadline)
        answers = await asyncio.gather(*(host.ask(read, deadline) for host in hosts))
        return merged(read, [(answer, host.key_serde(read.store)) for answer, host in zip(answers, hosts, strict=True)])

    async def query_each(self, reads: Sequence[StoreRead], deadline: Deadline) -> list[tuple[bool, Any]]:
        """Each read (of one partition's copies, not of a global store) answered `(True, answer)` or
        `(False, exception)`, in order: the reads of one host asked in one request (`StoreReads`), the
        hosts at once; a host that does not answer by `deadline` fails only its own reads."""
        outcomes: list[tuple[bool, Any]] = [(False, None)] * len(reads)
        by_host: dict[int, tuple[ThreadStoreProvider, list[int]]] = {}
        providers = self._providers()
        for index, read in enumerate(reads):
            try:
                self._check(read.store, read.query.stale)
            except InvalidStateStoreError as exc:
                outcomes[index] = (False, exc)
                continue
            holding = [h for h in providers if h.holds(read.store, read.query)]
            host = _first_copy(read, holding) if holding else None
            if host is None:
                where = f"store {read.store!r} for partition {read.query.partition}"
                outcomes[index] = (False, NoCopyError(f"no queryable copy of {where} here now (migrating or restoring; retry)"))
            else:
                by_host.setdefault(id(host), (host, []))[1].append(index)

        async def ask(host: ThreadStoreProvider, indexes: list[int]) -> None:
            try:
                if len(indexes) == 1:
                    outcomes[indexes[0]] = (True, await host.ask(reads[indexes[0]], deadline))
                    return
                answers = await host.ask(StoreReads(tuple(reads[i] for i in indexes)), deadline)
            except Exception as exc:
                for index in indexes:
                    outcomes[index] = (False, exc)
                return
            for index, outcome in zip(indexes, answers, strict=True):
                outcomes[index] = outcome

        await asyncio.gather(*(ask(host, indexes) for host, indexes in by_host.values()))
        return outcomes

    def copies(self, store_name: str) -> dict[int, bool]:
        """Partition -> whether active, of every host's copies of the store (an active copy wins)."""
        found: dict[int, bool] = {}
        for host in self._providers():
            for partition, active in host.copies(store_name).items():
                found[partition] = found.get(partition, False) or active
        return found

    def hosts(self) -> list[ThreadStoreProvider]:
        """The store hosts of the instance (its stream threads), for health reports."""
        return list(self._providers())

    def local_stores(
        self, store_name: str, store_type: QueryableStoreType[Any], query: StoreQuery = ALL_ACTIVE
    ) -> list[Any]:
        self._check(store_name, query.stale)
        global_store = self._global_stores().get(store_name)
        if global_store is not None:
            if not store_type.accepts(global_store):
                raise InvalidStateStoreError(f"global store {store_name!r} is not a {store_type!r}")
            return [global_store]
        found: list[Any] = []
        for provider in self._providers():
            found += provider.stores(store_name, store_type, query)
        if query.partition is not None and not found:
            raise InvalidStateStoreError(
                f"no queryable copy of store {store_name!r} for partition {query.partition} here now (migrating or restoring; retry)"
            )
        return found
