"""`Stores` factories, suppliers and builders: validation, fresh instances, layer flags."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streams_core.serde import Serdes
from streams_core.state import Stores
from streams_core.state.internals.in_memory_key_value_store import InMemoryKeyValueStore
from streams_core.state.internals.in_memory_session_store import InMemorySessionStore
from streams_core.state.internals.in_memory_window_store import InMemoryWindowStore
from streams_core.state.internals.metered_key_value_store import MeteredKeyValueStore
from streams_core.state.internals.metered_session_store import MeteredSessionStore
from streams_core.state.internals.metered_window_store import MeteredWindowStore
from streams_core.state.internals.sqlite_key_value_store import SqliteKeyValueStore
from streams_core.state.internals.sqlite_session_store import SqliteSessionStore
from streams_core.state.internals.sqlite_window_store import SqliteWindowStore
from streams_core.state.internals.store_names import store_changelog_topic


def test_suppliers_make_a_fresh_bytes_store_per_get() -> None:
    cases = [
        (Stores.persistent_key_value_store("a"), SqliteKeyValueStore, "sqlite-state"),
        (Stores.in_memory_key_value_store("a"), InMemoryKeyValueStore, "in-memory-state"),
        (Stores.persistent_window_store("a", 100, 10), SqliteWindowStore, "sqlite-window-state"),
        (Stores.in_memory_window_store("a", 100, 10), InMemoryWindowStore, "in-memory-window-state"),
        (Stores.persistent_session_store("a", 100), SqliteSessionStore, "sqlite-session-state"),
        (Stores.in_memory_session_store("a", 100), InMemorySessionStore, "in-memory-session-state"),
    ]
    for supplier, kind, scope in cases:
        first, second = supplier.get(), supplier.get()
        assert type(first) is kind and first is not second
        assert first.name == supplier.name == "a"
        assert supplier.metrics_scope == scope
        assert not first.is_open


def test_window_supplier_settings() -> None:
    supplier = Stores.persistent_window_store("w", timedelta(hours=1), timedelta(minutes=1), retain_duplicates=True)
    assert (supplier.retention_period, supplier.window_size, supplier.retain_duplicates) == (3_600_000, 60_000, True)
    assert supplier.segment_interval == 1_800_000
    store = supplier.get()
    assert (store.retention_period, store.window_size, store.retain_duplicates) == (3_600_000, 60_000, True)
    assert Stores.in_memory_session_store("s", 1_000).segment_interval == 60_000


@pytest.mark.parametrize("name", ["", ".", "..", "has space", "slash/name", "ü", "x" * 238, None, 5])
def test_illegal_store_names_are_refused(name: object) -> None:
    with pytest.raises(ValueError, match="store name"):
        Stores.persistent_key_value_store(name)  # type: ignore[arg-type]


def test_legal_store_names() -> None:
    for name in ("word-count", "KSTREAM-AGGREGATE-STATE-STORE-0000000001", "a.b_c", "x" * 237):
        assert Stores.in_memory_key_value_store(name).name == name


def test_changelog_topic_length_is_checked_with_the_application_id() -> None:
    assert store_changelog_topic("app", "counts") == "app-counts-changelog"
    with pytest.raises(ValueError, match="over Kafka's limit of 249"):
        store_changelog_topic("a" * 200, "b" * 40)


def test_window_and_session_times_are_validated() -> None:
    with pytest.raises(ValueError, match="no smaller than the window size"):
        Stores.persistent_window_store("w", 10, 20)
    with pytest.raises(ValueError, match="cannot be negative"):
        Stores.in_memory_window_store("w", -1, 0)
    with pytest.raises(ValueError, match="cannot be negative"):
        Stores.persistent_session_store("s", -5)
    with pytest.raises(TypeError, match="milliseconds"):
        Stores.persistent_window_store("w", 10.5, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="milliseconds"):
        Stores.in_memory_session_store("s", True)  # type: ignore[arg-type]
    assert Stores.persistent_window_store("w", 10, 10).window_size == 10


def test_builders_make_a_fresh_metered_store_per_build() -> None:
    serdes = (Serdes.String(), Serdes.Long())
    builders = [
        (Stores.key_value_store_builder(Stores.persistent_key_value_store("kv"), *serdes), MeteredKeyValueStore),
        (Stores.window_store_builder(Stores.in_memory_window_store("w", 100, 10), *serdes), MeteredWindowStore),
        (Stores.session_store_builder(Stores.persistent_session_store("s", 100), *serdes), MeteredSessionStore),
    ]
    for builder, kind in builders:
        first, second = builder.build(), builder.build()
        assert type(first) is kind and first is not second
        assert first.wrapped() is not second.wrapped()
        assert first.name == builder.name
        assert (first.key_serde, first.value_serde) == (Serdes.String(), Serdes.Long())
        assert first.persistent is first.wrapped().persistent


def test_builder_flags_default_to_logging_on_and_caching_off() -> None:
    builder = Stores.key_value_store_builder(Stores.persistent_key_value_store("kv"))
    assert builder.logging_enabled and not builder.caching_enabled
    assert builder.log_config() == {}
    assert builder.with_caching_enabled() is builder
    assert builder.caching_enabled
    builder.with_logging_enabled({"min.insync.replicas": "2"})
    assert builder.log_config() == {"min.insync.replicas": "2"}
    builder.log_config()["x"] = "mutating a copy"
    assert builder.log_config() == {"min.insync.replicas": "2"}
    builder.with_logging_disabled().with_caching_disabled()
    assert not builder.logging_enabled and not builder.caching_enabled and builder.log_config() == {}
    assert isinstance(builder.build(), MeteredKeyValueStore)
    with pytest.raises(TypeError, match="strings"):
        builder.with_logging_enabled({"retention.ms": 5})  # type: ignore[dict-item]


def test_window_builder_keeps_caching_off_when_retaining_duplicates(caplog: pytest.LogCaptureFixture) -> None:
    builder = Stores.window_store_builder(Stores.persistent_window_store("join", 100, 10, retain_duplicates=True))
    assert not builder.with_caching_enabled().caching_enabled
    assert "retains duplicates" in caplog.text
    assert (
        Stores.window_store_builder(Stores.persistent_window_store("agg", 100, 10))
        .with_caching_enabled()
        .caching_enabled
    )


def test_builders_refuse_suppliers_of_another_kind_and_bad_serdes() -> None:
    with pytest.raises(TypeError, match="key-value store supplier"):
        Stores.key_value_store_builder(Stores.persistent_window_store("w", 10, 10))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="window store supplier"):
        Stores.window_store_builder(Stores.persistent_key_value_store("kv"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session store supplier"):
        Stores.session_store_builder(Stores.persistent_window_store("w", 10, 10))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key serde must be a Serde"):
        Stores.key_value_store_builder(Stores.persistent_key_value_store("kv"), "string")  # type: ignore[arg-type]
