"""The store providers behind `KafkaStreams.store()` (KIP-67).

- `StreamThreadStateStoreProvider`: one per stream thread; the local instances of a store in
  that thread's active tasks (and standby tasks for stale reads), one per task.
- `QueryableStoreProvider`: over every thread; hands out the read-only view of a store
  (`store_type.create(provider, name)`) through a `WrappingStoreProvider` that checks on every
  call whether the instance can be queried now, so a view never answers partially.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from streams_core.errors import InvalidStateStoreError
from streams_core.processor.task_id import TaskId
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.queryable_store_types import QueryableStoreType

__all__ = ["QueryableStoreProvider", "StreamThreadStateStoreProvider", "TaskStates"]

T = TypeVar("T")


class TaskStates(Protocol):
    """What a provider needs of a stream thread: the state managers of its tasks."""

    def active_states(self) -> Sequence[tuple[TaskId, ProcessorStateManager]]: ...

    def standby_states(self) -> Sequence[tuple[TaskId, ProcessorStateManager]]: ...


class StreamThreadStateStoreProvider:
    """The instances of a store in one thread's tasks."""

    __slots__ = ("_thread",)

    def __init__(self, thread: TaskStates) -> None:
        self._thread = thread

    def stores(
        self, store_name: str, store_type: QueryableStoreType[Any], *, partition: int | None = None, stale: bool = False
    ) -> list[Any]:
        """Active copies (and standby ones when `stale`), of one partition's task when `partition` is set.

        A standby copy whose position is unknown (nothing restored or checkpointed yet, e.g. one the
        rebalance just created) is never read: it could answer "absent" for a key that exists.
        """
        holders = list(self._thread.active_states())
        if stale:
            holders += [(task_id, state) for task_id, state in self._thread.standby_states() if _position_known(state)]
        found = []
        for task_id, state in holders:
            if partition is not None and task_id.partition != partition:
                continue
            store = state.get_store(store_name)
            if store is None:
                continue
            if not store_type.accepts(store):
                raise InvalidStateStoreError(f"state store {store_name!r} is not a {store_type!r}")
            found.append(store)
        return found


def _position_known(state: ProcessorStateManager) -> bool:
    offsets = state.changelog_offsets
    return all(tp in offsets for tp in state.changelog_partitions.values())


class _WrappingStoreProvider:
    """KIP-67's WrappingStoreProvider: every thread's instances, after checking the instance may be queried."""

    __slots__ = ("_owner", "_partition", "_stale")

    def __init__(self, owner: QueryableStoreProvider, partition: int | None, stale: bool) -> None:
        self._owner = owner
        self._partition = partition
        self._stale = stale

    def stores(self, store_name: str, store_type: QueryableStoreType[Any]) -> list[Any]:
        return self._owner.local_stores(store_name, store_type, partition=self._partition, stale=self._stale)


class QueryableStoreProvider:
    """Read-only views over the local instances of a store, across all stream threads."""

    def __init__(
        self,
        providers: Callable[[], Sequence[StreamThreadStateStoreProvider]],
        check_queryable: Callable[[str, bool], None],
        global_stores: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        """`check_queryable(store_name, stale)` raises InvalidStateStoreError when the instance cannot answer now;
        `global_stores` are the instance's global stores (every instance holds all of each)."""
        self._providers = providers
        self._check = check_queryable
        self._global_stores = global_stores or dict

    def get_store(
        self, store_name: str, store_type: QueryableStoreType[T], *, partition: int | None = None, stale: bool = False
    ) -> T:
        return store_type.create(_WrappingStoreProvider(self, partition, stale), store_name)

    def local_stores(
        self, store_name: str, store_type: QueryableStoreType[Any], *, partition: int | None = None, stale: bool = False
    ) -> list[Any]:
        self._check(store_name, stale)
        global_store = self._global_stores().get(store_name)
        if global_store is not None:
            if not store_type.accepts(global_store):
                raise InvalidStateStoreError(f"global store {store_name!r} is not a {store_type!r}")
            return [global_store]
        found: list[Any] = []
        for provider in self._providers():
            found += provider.stores(store_name, store_type, partition=partition, stale=stale)
        if partition is not None and not found:
            raise InvalidStateStoreError(
                f"no queryable copy of store {store_name!r} for partition {partition} here now (migrating or restoring; retry)"
            )
        return found
