"""The interfaces of state stores: what processors, the task runtime and queries see.

Layers (as Kafka Streams' decorators): a bytes store at the bottom (SQLite or in-memory),
optionally wrapped by change logging and caching, and a typed (serde) layer on top that
processors use. The runtime talks to `StateStore`; processors to `KeyValueStore`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Generic, NamedTuple, Protocol, TypeVar, runtime_checkable

K = TypeVar("K")
V = TypeVar("V")
S = TypeVar("S", bound="StateStore", covariant=True)

__all__ = [
    "KeyValue",
    "KeyValueStore",
    "ReadOnlyKeyValueStore",
    "RestoreCallback",
    "StateStore",
    "StateStoreContext",
    "StoreBuilder",
    "key_value",
]


class KeyValue(NamedTuple, Generic[K, V]):
    """A key and its value, as store iterators yield them (unpacks as a tuple)."""

    key: K
    value: V


key_value: Callable[[tuple[Any, Any]], KeyValue[Any, Any]] = partial(tuple.__new__, KeyValue)
"""A KeyValue of a (key, value) pair without NamedTuple's Python-level `__new__` (four times the
cost): what store iterators build an entry per row with (`map(key_value, rows)`)."""


RestoreCallback = Callable[[Iterable[tuple[bytes, bytes | None]]], None]
"""Applies a batch of changelog records (key bytes, value bytes or None to delete) to a store."""


class StateStoreContext(Protocol):
    """What a store learns when it is initialised by its task."""

    @property
    def application_id(self) -> str: ...

    @property
    def task_id(self) -> Any: ...

    @property
    def state_dir(self) -> Path:
        """The task's own directory; persistent stores keep their files here."""
        ...

    def register(self, store: StateStore, restore_callback: RestoreCallback | None = None) -> None:
        """Register a store with the task's state manager (changelog restore, flush, close)."""
        ...


@runtime_checkable
class StateStore(Protocol):
    """Lifecycle every store has, whatever it holds."""

    @property
    def name(self) -> str: ...

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        """Open the store and register it; `root` is the outermost layer wrapping this one."""
        ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

    @property
    def persistent(self) -> bool: ...

    @property
    def is_open(self) -> bool: ...


class ReadOnlyKeyValueStore(Protocol[K, V]):
    """Reads of a key-value store; what interactive queries are given."""

    def get(self, key: K) -> V | None: ...

    def range(self, from_key: K | None, to_key: K | None) -> Iterator[KeyValue[K, V]]:
        """Entries with from_key <= key <= to_key in serialized-key byte order (None: unbounded)."""
        ...

    def reverse_range(self, from_key: K | None, to_key: K | None) -> Iterator[KeyValue[K, V]]: ...

    def all(self) -> Iterator[KeyValue[K, V]]: ...

    def reverse_all(self) -> Iterator[KeyValue[K, V]]: ...

    def prefix_scan(self, prefix: Any, prefix_serde: Any = None) -> Iterator[KeyValue[K, V]]: ...

    def approximate_num_entries(self) -> int: ...


class KeyValueStore(StateStore, ReadOnlyKeyValueStore[K, V], Protocol[K, V]):
    """A read-write key-value store; `put(key, None)` deletes like a tombstone."""

    def put(self, key: K, value: V | None) -> None: ...

    def put_if_absent(self, key: K, value: V) -> V | None:
        """Put unless the key has a value; returns the existing value (None if it put)."""
        ...

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None: ...

    def delete(self, key: K) -> V | None:
        """Remove the key and return its old value."""
        ...


class StoreBuilder(Protocol[S]):
    """Builds one store instance per task; carries the name, serdes and layer choices."""

    @property
    def name(self) -> str: ...

    @property
    def logging_enabled(self) -> bool: ...

    def log_config(self) -> dict[str, str]: ...

    def with_caching_enabled(self) -> StoreBuilder[S]: ...

    def with_caching_disabled(self) -> StoreBuilder[S]: ...

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> StoreBuilder[S]: ...

    def with_logging_disabled(self) -> StoreBuilder[S]: ...

    def build(self) -> S: ...
