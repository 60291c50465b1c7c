"""QueryableStoreTypes: what `KafkaStreams.store()` can hand out, and the read-only facades (KIP-67).

A `QueryableStoreType` says which stores it accepts and wraps all local instances of a store
(one per task) in one read-only view. The built-in types cover key-value, window and session
stores; a user's own type implements `accepts` and `create` the same way, so a custom store
becomes queryable. The facades ask their provider for the stores on every call, so a store
that is closed or migrating raises `InvalidStateStoreError` instead of answering partially.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from streams_core.state.store import KeyValue

__all__ = [
    "CompositeReadOnlyKeyValueStore",
    "CompositeReadOnlySessionStore",
    "CompositeReadOnlyWindowStore",
    "QueryableStoreType",
    "QueryableStoreTypes",
    "StoreProvider",
]

StoreProvider = Callable[[], list[Any]]
"""Returns the current local instances of one store (raises InvalidStateStoreError if not queryable)."""


class QueryableStoreType(Protocol):
    """A kind of store that can be queried: which stores it accepts, and the view over them."""

    def accepts(self, store: Any) -> bool: ...

    def create(self, provider: StoreProvider, store_name: str) -> Any: ...


def _key_bytes(store: Any) -> Callable[[Any], bytes]:
    serde = store.key_serde
    return lambda key: serde.serialize(None, key) or b""


class CompositeReadOnlyKeyValueStore:
    """One read-only key-value view over every local instance of a store; ranges in key-byte order."""

    def __init__(self, provider: StoreProvider, store_name: str) -> None:
        self._provider = provider
        self.name = store_name

    def get(self, key: Any) -> Any:
        for store in self._provider():
            value = store.get(key)
            if value is not None:
                return value
        return None

    def _merge(self, call: Callable[[Any], Iterator[KeyValue[Any, Any]]], reverse: bool = False) -> Iterator[KeyValue[Any, Any]]:
        stores = self._provider()
        if not stores:
            return iter(())
        if len(stores) == 1:
            return iter(list(call(stores[0])))
        to_bytes = _key_bytes(stores[0])
        merged = heapq.merge(*(list(call(s)) for s in stores), key=lambda kv: to_bytes(kv.key), reverse=reverse)
        return iter(list(merged))

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


class CompositeReadOnlyWindowStore:
    """One read-only window view over every local instance of a window store."""

    def __init__(self, provider: StoreProvider, store_name: str) -> None:
        self._provider = provider
        self.name = store_name

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


class CompositeReadOnlySessionStore:
    """One read-only session view over every local instance of a session store."""

    def __init__(self, provider: StoreProvider, store_name: str) -> None:
        self._provider = provider
        self.name = store_name

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


class _StoreType:
    def __init__(self, kind: str, facade: Callable[[StoreProvider, str], Any], required: tuple[str, ...]) -> None:
        self.kind = kind
        self._facade = facade
        self._required = required

    def accepts(self, store: Any) -> bool:
        return all(hasattr(store, name) for name in self._required)

    def create(self, provider: StoreProvider, store_name: str) -> Any:
        return self._facade(provider, store_name)

    def __repr__(self) -> str:
        return f"QueryableStoreTypes.{self.kind}()"


_KEY_VALUE = _StoreType("key_value_store", CompositeReadOnlyKeyValueStore, ("get", "range", "all", "put"))
_WINDOW = _StoreType("window_store", CompositeReadOnlyWindowStore, ("fetch", "fetch_all", "window_size"))
_SESSION = _StoreType("session_store", CompositeReadOnlySessionStore, ("fetch", "find_sessions"))


class QueryableStoreTypes:
    """The built-in queryable store types, named as in Kafka Streams."""

    @staticmethod
    def key_value_store() -> QueryableStoreType:
        return _KEY_VALUE

    @staticmethod
    def window_store() -> QueryableStoreType:
        return _WINDOW

    @staticmethod
    def session_store() -> QueryableStoreType:
        return _SESSION
