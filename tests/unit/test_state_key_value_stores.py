"""Bytes key-value stores (SQLite and in-memory): every operation, byte order, iterator safety."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streams_core.common.task_id import TaskId
from streams_core.errors import InvalidStateStoreError, ProcessorStateError
from streams_core.state import KeyValue
from streams_core.state.internals import sqlite_database
from streams_core.state.internals.byte_order import prefix_upper_bound
from streams_core.state.internals.in_memory_key_value_store import InMemoryKeyValueStore
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.internals.sqlite_key_value_store import SqliteKeyValueStore

KINDS = {"sqlite": SqliteKeyValueStore, "memory": InMemoryKeyValueStore}


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[ProcessorStateManager]:
    with ProcessorStateManager(TaskId(0, 0), "app", tmp_path / "0_0") as manager:
        yield manager


@pytest.fixture(params=sorted(KINDS))
def store(request: pytest.FixtureRequest, manager: ProcessorStateManager) -> SqliteKeyValueStore:
    store = KINDS[request.param]("kv")
    store.init(manager.context, store)
    return store


def keys(entries: Iterator[KeyValue[bytes, bytes]]) -> list[bytes]:
    return [kv.key for kv in entries]


def test_get_put_and_overwrite(store: SqliteKeyValueStore) -> None:
    assert store.get(b"a") is None
    store.put(b"a", b"1")
    store.put(b"a", b"2")
    assert store.get(b"a") == b"2"
    assert store.approximate_num_entries() == 1


def test_empty_value_is_a_value_and_none_is_a_tombstone(store: SqliteKeyValueStore) -> None:
    store.put(b"a", b"")
    assert store.get(b"a") == b""
    store.put(b"a", None)
    assert store.get(b"a") is None
    store.put(b"never", None)
    assert list(store.all()) == []


def test_put_if_absent_returns_the_existing_value(store: SqliteKeyValueStore) -> None:
    assert store.put_if_absent(b"a", b"1") is None
    assert store.put_if_absent(b"a", b"2") == b"1"
    assert store.get(b"a") == b"1"


def test_delete_returns_the_old_value(store: SqliteKeyValueStore) -> None:
    store.put(b"a", b"1")
    assert store.delete(b"a") == b"1"
    assert store.delete(b"a") is None
    assert store.get(b"a") is None
    assert store.approximate_num_entries() == 0


def test_put_all_applies_in_order_last_write_wins(store: SqliteKeyValueStore) -> None:
    store.put(b"gone", b"x")
    store.put_all([(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"gone", None), (b"b", None), (b"b", b"4")])
    assert list(store.all()) == [KeyValue(b"a", b"3"), KeyValue(b"b", b"4")]


def test_iteration_is_in_unsigned_byte_order(store: SqliteKeyValueStore) -> None:
    for key in (b"\xff", b"a", b"\x00", b"ab", b"", b"b", b"\x7f", b"\x80"):
        store.put(key, key)
    expected = [b"", b"\x00", b"a", b"ab", b"b", b"\x7f", b"\x80", b"\xff"]
    assert keys(store.all()) == expected
    assert keys(store.reverse_all()) == expected[::-1]
    assert [kv.value for kv in store.all()] == expected


def test_range_is_inclusive_and_none_is_unbounded(store: SqliteKeyValueStore) -> None:
    for key in (b"a", b"b", b"c", b"d"):
        store.put(key, key.upper())
    assert list(store.range(b"b", b"c")) == [KeyValue(b"b", b"B"), KeyValue(b"c", b"C")]
    assert keys(store.range(b"bb", b"c")) == [b"c"]
    assert keys(store.range(None, b"b")) == [b"a", b"b"]
    assert keys(store.range(b"c", None)) == [b"c", b"d"]
    assert keys(store.range(None, None)) == [b"a", b"b", b"c", b"d"]
    assert keys(store.range(b"b", b"b")) == [b"b"]
    assert keys(store.reverse_range(b"b", b"d")) == [b"d", b"c", b"b"]
    assert keys(store.reverse_range(None, b"b")) == [b"b", b"a"]


def test_inverted_range_is_empty(store: SqliteKeyValueStore, caplog: pytest.LogCaptureFixture) -> None:
    store.put(b"a", b"1")
    assert list(store.range(b"z", b"a")) == []
    assert list(store.reverse_range(b"z", b"a")) == []
    assert "invalid range" in caplog.text


def test_prefix_scan(store: SqliteKeyValueStore) -> None:
    for key in (b"a", b"ab", b"ab\x00", b"ab\xff", b"ac", b"b", b"\xff", b"\xff\xff", b"\xff\xff\x01"):
        store.put(key, b"v")
    assert keys(store.prefix_scan(b"ab")) == [b"ab", b"ab\x00", b"ab\xff"]
    assert keys(store.prefix_scan(b"a")) == [b"a", b"ab", b"ab\x00", b"ab\xff", b"ac"]
    assert keys(store.prefix_scan(b"\xff\xff")) == [b"\xff\xff", b"\xff\xff\x01"]
    assert keys(store.prefix_scan(b"")) == keys(store.all())
    assert keys(store.prefix_scan(b"zz")) == []


def test_prefix_upper_bound() -> None:
    assert prefix_upper_bound(b"ab") == b"ac"
    assert prefix_upper_bound(b"a\xff") == b"b"
    assert prefix_upper_bound(b"\xff\xff") is None
    assert prefix_upper_bound(b"") is None


def test_iterators_are_safe_while_the_store_is_written(store: SqliteKeyValueStore) -> None:
    for i in range(10):
        store.put(bytes([i]), b"v")
    seen = []
    for kv in store.all():
        seen.append(kv.key)
        store.put(kv.key, b"changed")
        store.delete(bytes([kv.key[0] + 1]))
    assert seen == sorted(set(seen))
    assert [bytes([i]) for i in range(0, 10, 2)] == [k for k in seen if k[0] % 2 == 0]
    if isinstance(store, InMemoryKeyValueStore):
        assert seen == [bytes([i]) for i in range(0, 10, 2)]
    assert list(store.all()) == [KeyValue(k, b"changed") for k in seen if store.get(k) is not None]
    assert store.approximate_num_entries() == len(list(store.all()))


def test_iterators_page_through_large_ranges(store: SqliteKeyValueStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_database, "PAGE_SIZE", 3)
    sqlite_database._page_queries.cache_clear()
    try:
        for i in range(10):
            store.put(bytes([i]), b"v")
        assert keys(store.range(bytes([2]), bytes([8]))) == [bytes([i]) for i in range(2, 9)]
        assert keys(store.reverse_range(bytes([2]), bytes([8]))) == [bytes([i]) for i in range(8, 1, -1)]
        written_ahead = []
        for kv in store.all():
            if kv.key == bytes([1]):
                store.put(bytes([9, 9]), b"new")
            written_ahead.append(kv.key)
        assert written_ahead[-1] == bytes([9, 9]) if isinstance(store, SqliteKeyValueStore) else bytes([9])
    finally:
        sqlite_database._page_queries.cache_clear()


def test_restore_batch_applies_puts_and_deletes(store: SqliteKeyValueStore) -> None:
    store.put(b"old", b"x")
    store.restore_batch([(b"a", b"1"), (b"old", None), (b"b", b"2"), (b"a", None), (b"a", b"3")])
    assert list(store.all()) == [KeyValue(b"a", b"3"), KeyValue(b"b", b"2")]


def test_registers_itself_with_its_restore_callback(store: SqliteKeyValueStore, manager: ProcessorStateManager) -> None:
    meta = manager.store_metadata("kv")
    assert meta is not None and meta.store is store
    assert meta.restore_callback == store.restore_batch
    assert meta.changelog_topic == "app-kv-changelog"


def test_closed_store_refuses_operations(store: SqliteKeyValueStore) -> None:
    store.put(b"a", b"1")
    iterator = store.all()
    store.close()
    store.close()
    assert not store.is_open
    with pytest.raises(InvalidStateStoreError, match="'kv' is not open"):
        store.get(b"a")
    with pytest.raises(InvalidStateStoreError):
        store.put(b"a", b"1")
    with pytest.raises(InvalidStateStoreError):
        store.all()
    with pytest.raises(InvalidStateStoreError):
        next(iterator)


def test_uninitialised_store_is_not_open() -> None:
    for kind in KINDS.values():
        store = kind("x")
        assert not store.is_open
        with pytest.raises(InvalidStateStoreError):
            store.get(b"a")


def test_flags(store: SqliteKeyValueStore) -> None:
    assert store.name == "kv"
    assert store.is_open
    assert store.persistent is isinstance(store, SqliteKeyValueStore)


def test_a_second_init_is_refused(store: SqliteKeyValueStore, manager: ProcessorStateManager) -> None:
    with pytest.raises(ProcessorStateError, match="already initialised"):
        store.init(manager.context, store)
