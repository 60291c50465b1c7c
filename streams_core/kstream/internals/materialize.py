"""Store builders of the DSL's stateful operators, from their `Materialized` (or its absence).

Key-value and window stores of tables and aggregates hold `ValueAndTimestamp`s behind a plain
view (timestamped_stores.py); session stores hold plain aggregates (a session's end is its
timestamp). Stores are SQLite unless `Materialized.with_in_memory_store()` or a supplier says
otherwise; caching and logging follow the `Materialized` flags (on by default).
"""

from __future__ import annotations

from typing import Any

from streams_core.kstream.internals.internal_streams_builder import InternalStreamsBuilder
from streams_core.kstream.internals.timestamped_stores import (
    TimestampedKeyValueStore,
    TimestampedStoreBuilder,
    TimestampedWindowStore,
)
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestampSerde
from streams_core.kstream.internals.versioned_stores import VersionedKeySerde, VersionedStoreBuilder, VersionedValueSerde
from streams_core.kstream.materialized import Materialized
from streams_core.serde import Serde
from streams_core.state.internals.bytes_store_suppliers import SqliteTimeOrderedWindowBytesStoreSupplier
from streams_core.state.stores import Stores
from streams_core.state.versioned_key_value_store import VersionedKeyValueBytesStoreSupplier

__all__ = ["is_versioned", "key_value_store", "session_store", "store_name", "window_store"]


def is_versioned(materialized: Materialized | None) -> bool:
    """Whether the Materialized names a versioned store (`Stores.persistent_versioned_key_value_store`)."""
    return materialized is not None and isinstance(materialized.supplier, VersionedKeyValueBytesStoreSupplier)


def store_name(isb: InternalStreamsBuilder, materialized: Materialized | None, prefix: str) -> str:
    """The store's name: the user's, else a generated `<prefix>STATE-STORE-<n>`."""
    if materialized is not None and materialized.store_name is not None:
        return materialized.store_name
    return isb.new_store_name(prefix)


def _flags(builder: Any, materialized: Materialized | None) -> Any:
    m = materialized or Materialized()
    builder = builder.with_caching_enabled() if m.caching_enabled else builder.with_caching_disabled()
    if m.logging_enabled:
        return builder.with_logging_enabled(m.log_config)
    return builder.with_logging_disabled()


def key_value_store(
    isb: InternalStreamsBuilder,
    name: str,
    materialized: Materialized | None,
    key_serde: Serde[Any] | None,
    value_serde: Serde[Any] | None,
) -> Any:
    """A timestamped key-value store builder (a KTable's or an aggregate's store)."""
    m = materialized or Materialized()
    supplier = m.supplier
    if isinstance(supplier, VersionedKeyValueBytesStoreSupplier):
        versions = Stores.key_value_store_builder(
            Stores.persistent_key_value_store(supplier.name), isb.bound(VersionedKeySerde(key_serde)),
            isb.bound(VersionedValueSerde(value_serde)),
        )  # fmt: skip
        return isb.dsl_store(VersionedStoreBuilder(_flags(versions, m), supplier.history_retention_ms))
    if supplier is None:
        factory = Stores.in_memory_key_value_store if m.in_memory else Stores.persistent_key_value_store
        supplier = factory(name)
    elif hasattr(supplier, "window_size") or hasattr(supplier, "retention_period"):
        raise TypeError(f"store {name!r}: this operator needs a key-value store supplier, got {supplier!r}")
    builder = Stores.key_value_store_builder(supplier, key_serde, isb.bound(ValueAndTimestampSerde(value_serde)))
    return isb.dsl_store(TimestampedStoreBuilder(_flags(builder, m), TimestampedKeyValueStore))


def window_store(
    isb: InternalStreamsBuilder,
    name: str,
    materialized: Materialized | None,
    window_size_ms: int,
    minimum_retention_ms: int,
    key_serde: Serde[Any] | None,
    value_serde: Serde[Any] | None,
    emits_on_close: bool = False,
) -> TimestampedStoreBuilder:
    """A timestamped window store builder; retention at least `minimum_retention_ms` (size + grace).

    Emit-on-close aggregations get Java's time-ordered persistent store by default (it keeps the
    window at exactly stream time minus retention); in-memory and supplied stores are as given.
    """
    m = materialized or Materialized()
    retention = m.retention_ms if m.retention_ms is not None else minimum_retention_ms
    supplier = m.supplier
    if supplier is None:
        factory = Stores.in_memory_window_store if m.in_memory else Stores.persistent_window_store
        supplier = factory(name, retention, window_size_ms, False)
        if emits_on_close and not m.in_memory:
            supplier = SqliteTimeOrderedWindowBytesStoreSupplier(supplier.name, retention, window_size_ms, False)
    else:
        if not hasattr(supplier, "window_size"):
            raise TypeError(f"store {name!r}: a windowed aggregation needs a window store supplier, got {supplier!r}")
        if supplier.window_size != window_size_ms:
            raise ValueError(
                f"store {name!r}: the supplier's window size ({supplier.window_size} ms) must be the windows' "
                f"size ({window_size_ms} ms)"
            )
        retention = supplier.retention_period
    if retention < minimum_retention_ms:
        raise ValueError(
            f"store {name!r}: the retention period ({retention} ms) must be no smaller than the window size "
            f"plus the grace period ({minimum_retention_ms} ms)"
        )
    builder = Stores.window_store_builder(supplier, key_serde, isb.bound(ValueAndTimestampSerde(value_serde)))
    return isb.dsl_store(TimestampedStoreBuilder(_flags(builder, m), TimestampedWindowStore))


def session_store(
    isb: InternalStreamsBuilder,
    name: str,
    materialized: Materialized | None,
    minimum_retention_ms: int,
    key_serde: Serde[Any] | None,
    value_serde: Serde[Any] | None,
) -> Any:
    """A session store builder; retention at least `minimum_retention_ms` (gap + grace)."""
    m = materialized or Materialized()
    retention = m.retention_ms if m.retention_ms is not None else minimum_retention_ms
    supplier = m.supplier
    if supplier is None:
        factory = Stores.in_memory_session_store if m.in_memory else Stores.persistent_session_store
        supplier = factory(name, retention)
    else:
        if hasattr(supplier, "window_size") or not hasattr(supplier, "retention_period"):
            raise TypeError(f"store {name!r}: a session aggregation needs a session store supplier, got {supplier!r}")
        retention = supplier.retention_period
    if retention < minimum_retention_ms:
        raise ValueError(
            f"store {name!r}: the retention period ({retention} ms) must be no smaller than the inactivity gap "
            f"plus the grace period ({minimum_retention_ms} ms)"
        )
    return isb.dsl_store(_flags(Stores.session_store_builder(supplier, key_serde, value_serde), m))
