"""QueryableStoreTypes: what `KafkaStreams.store()` can hand out, and the read-only facades (KIP-67).

A `QueryableStoreType[T]` says which stores it accepts and wraps all local instances of a store
(one per task) in one read-only view of type T, created over a `StateStoreProvider` (KIP-67's
interfaces: `create(storeProvider, storeName)`, `getStores(storeName, queryableStoreType)`). The
built-in types cover key-value, window and session stores; a user's own type implements `accepts`
and `create` the same way, so a custom store becomes queryable. The facades ask their provider
for the stores on every call, so a store that is closed or migrating raises
`InvalidStateStoreError` instead of answering partially.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

from streams_core.common.store import KeyValue, ReadOnlyKeyValueStore
from streams_core.state.session_store import ReadOnlySessionStore
from streams_core.state.window_store import ReadOnlyWindowStore

__all__ = [
    "CompositeReadOnlyKeyValueStore",
    "CompositeReadOnlySessionStore",
    "CompositeReadOnlyWindowStore",
    "QueryableStoreType",
    "QueryableStoreTypes",
    "StateStoreProvider",
]

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")


class QueryableStoreType(Protocol[T_co]):
    """A kind of store that can be queried: which stores it accepts, and the view over them."""

    def accepts(self, store: Any) -> bool: ...

    def create(self, provider: StateStoreProvider, store_name: str) -> T_co: ...


class StateStoreProvider(Protocol):
    """The local instances of a store that a query type accepts (KIP-67's `StateStoreProvider`).

    Raises `InvalidStateStoreError` when the store cannot be queried now (not RUNNING, migrating,
    or of another type) and `UnknownStateStoreError` for a name the topology does not have.
    """

    def stores(self, store_name: str, store_type: QueryableStoreType[Any]) -> list[Any]: ...


class _Facade:
    """What the composite views share: the provider, the store's name and the query type."""

    def __init__(self, provider: StateStoreProvider, store_name: str, store_type: QueryableStoreType[Any]) -> None:
        self._store_provider = provider
        self._store_type = store_type
        self.name = store_name

    def _provider(self) -> list[Any]:
        return self._store_provider.stores(self.name, self._store_type)


def _key_bytes(store: Any) -> Callable[[Any], bytes]:
    serde = store.key_serde
    return lambda key: serde.serialize(None, key) or b""


class CompositeReadOnlyKeyValueStore(_Facade):
    """One read-only key-value view over every local instance of a store; ranges in key-byte order."""

    def get(self, key: Any) -> Any:
        for store in self._provider():
            value = store.get(key)
            if value is not None:
                return value
        return None

    def _merge(self, call: Callable[[Any], Iterator[KeyValue[Any, Any]]], reverse: bool = False) -> Iterator[KeyValue[Any, Any]]:
        """The copies' iterators merged lazily, so a reader can stop (or pause) part way at little cost.

        Each copy's iterator tolerates writes while it is open (snapshots or keyset pages), as
        Kafka Streams' store iterators do.
        """
        stores = self._provider()
        if not stores:
            return iter(())
        if len(stores) == 1:
            return call(stores[0])
        to_bytes = _key_bytes(stores[0])
        return heapq.merge(*(call(s) for s in stores), key=lambda kv: to_bytes(kv.key), reverse=reverse)

    def range(self, from_key: Any, to_key: Any) -> Iterator[KeyValue[Any, Any]]:
        return self._merge(lambda s: s.range(from_key, to_key))

    def reverse_range(self, from_key: Any, to_key: Any) -> Iterator[KeyValue[Any, Any]]:
        return self._merge(lambda s: s.reverse_range(from_key, to_key), reverse=True)

    def all(self) -> Iterator[KeyValue[Any, Any]]:
        return self._merge(lambda s: s.all())

    def reverse_all(self) -> Iterator[KeyValue[Any, Any]]:
        return self._merge(lambda s: s.reverse_all(), reverse=True)

    def prefix_scan(self, prefix: Any, prefix_serde: Any = None) -> Iterator[KeyValue[Any, Any]]:
        return self._merge(lambda s: s.prefix_scan(prefix, prefix_serde))

    def approximate_num_entries(self) -> int:
        return sum(s.approximate_num_entries() for s in self._provider())


class CompositeReadOnlyWindowStore(_Facade):
    """One read-only window view over every local instance of a window store."""

    def fetch(self, *args: Any) -> Any:
        """`fetch(key, time)`: the value; `fetch(key, from, to)`: (start, value) pairs; with a key range: windowed entries."""
        stores = self._provider()
        if len(args) == 2:
            for store in stores:
                value = store.fetch(*args)
                if value is not None:
                    return value
            return None
        if len(args) == 3:
            for store in stores:
                found = list(store.fetch(*args))
                if found:
                    return iter(found)
            return iter(())
        return self._sorted(stores, lambda s: s.fetch(*args))

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[KeyValue[Any, Any]]:
        return self._sorted(self._provider(), lambda s: s.fetch_all(time_from, time_to))

    def all(self) -> Iterator[KeyValue[Any, Any]]:
        return self._sorted(self._provider(), lambda s: s.all())

    @staticmethod
    def _sorted(stores: list[Any], call: Callable[[Any], Iterator[KeyValue[Any, Any]]]) -> Iterator[KeyValue[Any, Any]]:
        if not stores:
            return iter(())
        to_bytes = _key_bytes(stores[0])
        entries = [kv for s in stores for kv in call(s)]
        entries.sort(key=lambda kv: (to_bytes(kv.key.key), kv.key.window.start))
        return iter(entries)


class CompositeReadOnlySessionStore(_Facade):
    """One read-only session view over every local instance of a session store."""

    def fetch(self, *args: Any) -> Iterator[KeyValue[Any, Any]]:
        for store in self._provider():
            found = list(store.fetch(*args))
            if found:
                return iter(found)
        return iter(())

    def fetch_session(self, key: Any, session_start: int, session_end: int) -> Any:
        for store in self._provider():
            value = store.fetch_session(key, session_start, session_end)
            if value is not None:
                return value
        return None


class _StoreType(Generic[T]):
    def __init__(
        self, kind: str, facade: Callable[[StateStoreProvider, str, QueryableStoreType[Any]], Any], required: tuple[str, ...]
    ) -> None:
        self.kind = kind
        self._facade = facade
        self._required = required

    def accepts(self, store: Any) -> bool:
        return all(hasattr(store, name) for name in self._required)

    def create(self, provider: StateStoreProvider, store_name: str) -> T:
        view: T = self._facade(provider, store_name, self)
        return view

    def __repr__(self) -> str:
        return f"QueryableStoreTypes.{self.kind}()"


_KEY_VALUE: _StoreType[ReadOnlyKeyValueStore[Any, Any]] = _StoreType(
    "key_value_store", CompositeReadOnlyKeyValueStore, ("get", "range", "all", "put")
)
_WINDOW: _StoreType[ReadOnlyWindowStore[Any, Any]] = _StoreType(
    "window_store", CompositeReadOnlyWindowStore, ("fetch", "fetch_all", "window_size")
)
_SESSION: _StoreType[ReadOnlySessionStore[Any, Any]] = _StoreType(
    "session_store", CompositeReadOnlySessionStore, ("fetch", "find_sessions")
)


class QueryableStoreTypes:
    """The built-in queryable store types, named as in Kafka Streams."""

    @staticmethod
    def key_value_store() -> QueryableStoreType[ReadOnlyKeyValueStore[Any, Any]]:
        return _KEY_VALUE

    @staticmethod
    def window_store() -> QueryableStoreType[ReadOnlyWindowStore[Any, Any]]:
        return _WINDOW

    @staticmethod
    def session_store() -> QueryableStoreType[ReadOnlySessionStore[Any, Any]]:
        return _SESSION
