"""The suppliers `Stores` hands out: one per store kind and backing (SQLite or in-memory)."""

from __future__ import annotations

from dataclasses import dataclass

from streams_core.state.internals.abstract_window_store import default_segment_interval
from streams_core.state.internals.in_memory_key_value_store import InMemoryKeyValueStore
from streams_core.state.internals.in_memory_session_store import InMemorySessionStore
from streams_core.state.internals.in_memory_window_store import InMemoryWindowStore
from streams_core.state.internals.sqlite_key_value_store import SqliteKeyValueStore
from streams_core.state.internals.sqlite_session_store import SqliteSessionStore
from streams_core.state.internals.sqlite_window_store import SqliteWindowStore

__all__ = [
    "InMemoryKeyValueBytesStoreSupplier",
    "InMemorySessionBytesStoreSupplier",
    "InMemoryWindowBytesStoreSupplier",
    "SqliteKeyValueBytesStoreSupplier",
    "SqliteSessionBytesStoreSupplier",
    "SqliteTimeOrderedWindowBytesStoreSupplier",
    "SqliteWindowBytesStoreSupplier",
]


@dataclass(frozen=True, slots=True)
class SqliteKeyValueBytesStoreSupplier:
    """Supplies `SqliteKeyValueStore`s."""

    name: str

    @property
    def metrics_scope(self) -> str:
        return "sqlite-state"

    def get(self) -> SqliteKeyValueStore:
        return SqliteKeyValueStore(self.name)


@dataclass(frozen=True, slots=True)
class InMemoryKeyValueBytesStoreSupplier:
    """Supplies `InMemoryKeyValueStore`s."""

    name: str

    @property
    def metrics_scope(self) -> str:
        return "in-memory-state"

    def get(self) -> InMemoryKeyValueStore:
        return InMemoryKeyValueStore(self.name)


@dataclass(frozen=True, slots=True)
class _WindowSupplier:
    name: str
    retention_period: int
    window_size: int
    retain_duplicates: bool = False

    @property
    def segment_interval(self) -> int:
        return default_segment_interval(self.retention_period)


class SqliteWindowBytesStoreSupplier(_WindowSupplier):
    """Supplies `SqliteWindowStore`s."""

    __slots__ = ()

    @property
    def metrics_scope(self) -> str:
        return "sqlite-window-state"

    def get(self) -> SqliteWindowStore:
        return SqliteWindowStore(self.name, self.retention_period, self.window_size, self.retain_duplicates)


class SqliteTimeOrderedWindowBytesStoreSupplier(SqliteWindowBytesStoreSupplier):
    """Supplies the `SqliteWindowStore`s of emit-on-close aggregations, which keep the window at
    exactly `observed - retention` (Java's RocksDbIndexedTimeOrderedWindowBytesStoreSupplier)."""

    __slots__ = ()

    def get(self) -> SqliteWindowStore:
        return SqliteWindowStore(
            self.name, self.retention_period, self.window_size, self.retain_duplicates, time_ordered=True
        )


class InMemoryWindowBytesStoreSupplier(_WindowSupplier):
    """Supplies `InMemoryWindowStore`s."""

    __slots__ = ()

    @property
    def metrics_scope(self) -> str:
        return "in-memory-window-state"

    def get(self) -> InMemoryWindowStore:
        return InMemoryWindowStore(self.name, self.retention_period, self.window_size, self.retain_duplicates)


@dataclass(frozen=True, slots=True)
class _SessionSupplier:
    name: str
    retention_period: int

    @property
    def segment_interval(self) -> int:
        return default_segment_interval(self.retention_period)


class SqliteSessionBytesStoreSupplier(_SessionSupplier):
    """Supplies `SqliteSessionStore`s."""

    __slots__ = ()

    @property
    def metrics_scope(self) -> str:
        return "sqlite-session-state"

    def get(self) -> SqliteSessionStore:
        return SqliteSessionStore(self.name, self.retention_period)


class InMemorySessionBytesStoreSupplier(_SessionSupplier):
    """Supplies `InMemorySessionStore`s."""

    __slots__ = ()

    @property
    def metrics_scope(self) -> str:
        return "in-memory-session-state"

    def get(self) -> InMemorySessionStore:
        return InMemorySessionStore(self.name, self.retention_period)
