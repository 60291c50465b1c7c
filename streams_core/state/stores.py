"""Stores: the factories of store suppliers and builders, as Kafka Streams' `Stores`.

    supplier = Stores.persistent_key_value_store("counts")          # SQLite, one file per task
    builder = Stores.key_value_store_builder(supplier, Serdes.String(), Serdes.Long())
    topology.add_state_store(builder, "PROCESSOR")

Times are milliseconds (an int, or a `datetime.timedelta`). Names must be legal in a topic name
(the changelog is `<application.id>-<name>-changelog`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from streams_core.serde import Serde
from streams_core.state.internals.bytes_store_suppliers import (
    InMemoryKeyValueBytesStoreSupplier,
    InMemorySessionBytesStoreSupplier,
    InMemoryWindowBytesStoreSupplier,
    SqliteKeyValueBytesStoreSupplier,
    SqliteSessionBytesStoreSupplier,
    SqliteWindowBytesStoreSupplier,
)
from streams_core.state.internals.key_value_store_builder import KeyValueStoreBuilder
from streams_core.state.internals.session_store_builder import SessionStoreBuilder
from streams_core.state.internals.store_names import validate_store_name
from streams_core.state.internals.window_store_builder import WindowStoreBuilder
from streams_core.state.store_supplier import (
    KeyValueBytesStoreSupplier,
    SessionBytesStoreSupplier,
    WindowBytesStoreSupplier,
)

__all__ = ["Stores"]

Millis = int | timedelta


class Stores:
    """Factories of store suppliers (bytes stores) and of builders (typed stores)."""

    @staticmethod
    def persistent_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        """A key-value store in SQLite, `<task dir>/<name>.sqlite`."""
        return SqliteKeyValueBytesStoreSupplier(validate_store_name(name))

    @staticmethod
    def in_memory_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        """A key-value store in memory, rebuilt from its changelog on start."""
        return InMemoryKeyValueBytesStoreSupplier(validate_store_name(name))

    @staticmethod
    def persistent_versioned_key_value_store(name: str, history_retention_ms: Millis) -> Any:
        """A versioned key-value store (KIP-889): every version of a key for `history_retention_ms`.

        For `Materialized.as_(...)` of a table (a versioned table); see
        `streams_core.state.versioned_key_value_store`.
        """
        from streams_core.state.versioned_key_value_store import VersionedKeyValueBytesStoreSupplier

        retention = _millis(name, "history retention", history_retention_ms)
        return VersionedKeyValueBytesStoreSupplier(validate_store_name(name), retention)

    @staticmethod
    def persistent_window_store(
        name: str, retention_period_ms: Millis, window_size_ms: Millis, retain_duplicates: bool = False
    ) -> WindowBytesStoreSupplier:
        """A window store in SQLite; `retain_duplicates` keeps every value of a window (joins)."""
        retention, size = _window_times(name, retention_period_ms, window_size_ms)
        return SqliteWindowBytesStoreSupplier(validate_store_name(name), retention, size, bool(retain_duplicates))

    @staticmethod
    def in_memory_window_store(
        name: str, retention_period_ms: Millis, window_size_ms: Millis, retain_duplicates: bool = False
    ) -> WindowBytesStoreSupplier:
        """A window store in memory, rebuilt from its changelog on start."""
        retention, size = _window_times(name, retention_period_ms, window_size_ms)
        return InMemoryWindowBytesStoreSupplier(validate_store_name(name), retention, size, bool(retain_duplicates))

    @staticmethod
    def persistent_session_store(name: str, retention_period_ms: Millis) -> SessionBytesStoreSupplier:
        """A session store in SQLite."""
        retention = _millis(name, "retention period", retention_period_ms)
        return SqliteSessionBytesStoreSupplier(validate_store_name(name), retention)

    @staticmethod
    def in_memory_session_store(name: str, retention_period_ms: Millis) -> SessionBytesStoreSupplier:
        """A session store in memory, rebuilt from its changelog on start."""
        retention = _millis(name, "retention period", retention_period_ms)
        return InMemorySessionBytesStoreSupplier(validate_store_name(name), retention)

    @staticmethod
    def key_value_store_builder(
        supplier: KeyValueBytesStoreSupplier,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
    ) -> KeyValueStoreBuilder:
        """Builds typed key-value stores; missing serdes come from the application defaults."""
        _check_supplier(supplier, "key_value_store_builder", forbidden=("window_size", "retention_period"))
        return KeyValueStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def window_store_builder(
        supplier: WindowBytesStoreSupplier,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
    ) -> WindowStoreBuilder:
        """Builds typed window stores; missing serdes come from the application defaults."""
        _check_supplier(supplier, "window_store_builder", "window_size", "retention_period")
        return WindowStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def session_store_builder(
        supplier: SessionBytesStoreSupplier,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
    ) -> SessionStoreBuilder:
        """Builds typed session stores; missing serdes come from the application defaults."""
        _check_supplier(supplier, "session_store_builder", "retention_period", forbidden=("window_size",))
        return SessionStoreBuilder(supplier, key_serde, value_serde)


def _millis(name: str, what: str, value: Millis) -> int:
    if isinstance(value, timedelta):
        millis = value // timedelta(milliseconds=1)
    elif isinstance(value, int) and not isinstance(value, bool):
        millis = value
    else:
        raise TypeError(f"store {name!r}: the {what} must be milliseconds (int) or a timedelta, got {value!r}")
    if millis < 0:
        raise ValueError(f"store {name!r}: the {what} cannot be negative, got {millis} ms")
    return millis


def _window_times(name: str, retention_period_ms: Millis, window_size_ms: Millis) -> tuple[int, int]:
    retention = _millis(name, "retention period", retention_period_ms)
    size = _millis(name, "window size", window_size_ms)
    if retention < size:
        raise ValueError(
            f"store {name!r}: the retention period ({retention} ms) must be no smaller than the window size ({size} ms)"
        )
    return retention, size


def _check_supplier(supplier: object, factory: str, *attributes: str, forbidden: tuple[str, ...] = ()) -> None:
    """Duck-typed check that the supplier is of the builder's kind (a window supplier has a size...)."""
    missing = [a for a in ("name", "get", "metrics_scope", *attributes) if not hasattr(supplier, a)]
    extra = [a for a in forbidden if hasattr(supplier, a)]
    if missing or extra:
        kind = factory.removesuffix("_store_builder").replace("_", "-")
        raise TypeError(
            f"Stores.{factory} needs a {kind} store supplier (from Stores.persistent_* or "
            f"Stores.in_memory_*), got {supplier!r}"
        )
