"""The store providers behind `KafkaStreams.store()` (KIP-67) and the local lags (KIP-535).

- `StreamThreadStateStoreProvider`: one per stream thread; the local instances of a store in
  that thread's active tasks (and standby tasks for stale reads), one per task.
- `QueryableStoreProvider`: over every thread; hands out the read-only view of a store
  (`store_type.create(provider, name)`) through a `WrappingStoreProvider` that checks on every
  call whether the instance can be queried now, so a view never answers partially.

A standby copy is read only when its lag is known (its changelog position, and the changelog's
high watermark from the thread's last fetch) and within the query's `max_lag`: a copy the
rebalance just created, or one that has not fetched yet, could answer "absent" for a key that
exists. Active copies of a running task have lag 0, as in Kafka Streams.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from streams_core.errors import InvalidStateStoreError
from streams_core.processor.task_id import TaskId
from streams_core.runtime.topic_partition import TopicPartition
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.queryable_store_types import QueryableStoreType

__all__ = ["LagInfo", "QueryableStoreProvider", "StoreQuery", "StreamThreadStateStoreProvider", "ThreadStoreProvider", "ThreadStores"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class StoreQuery:
    """Which local copies a query may read (Kafka's StoreQueryParameters without name and type):
    one partition's or all, standbys too when `stale`, and then only those at most `max_lag` behind."""

    partition: int | None = None
    stale: bool = False
    max_lag: int | None = None


ALL_ACTIVE = StoreQuery()


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
    """The instances of a store in one thread's tasks."""

    __slots__ = ("_thread",)

    def __init__(self, thread: ThreadStores) -> None:
        self._thread = thread

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


class ThreadStoreProvider(Protocol):
    """The local copies of stores in one stream thread (in this process or a worker process)."""

    def stores(self, store_name: str, store_type: QueryableStoreType[Any], query: StoreQuery = ...) -> Sequence[Any]: ...

    def position(self, store_name: str, partition: int) -> dict[TopicPartition, int] | None: ...

    async def lags(self) -> dict[str, dict[int, LagInfo]]: ...


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
