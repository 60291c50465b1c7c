"""Bytes session stores (SQLite and in-memory): put/remove, find_sessions bounds, retention."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streams_core.common.task_id import TaskId
from streams_core.errors import InvalidStateStoreError
from streams_core.state import KeyValue, SessionWindow, Windowed
from streams_core.state.internals import session_key_schema
from streams_core.state.internals.abstract_session_store import AbstractSessionStore
from streams_core.state.internals.in_memory_session_store import InMemorySessionStore
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.internals.sqlite_session_store import SqliteSessionStore

KINDS = {"sqlite": SqliteSessionStore, "memory": InMemorySessionStore}
MakeStore = Callable[..., AbstractSessionStore]


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[ProcessorStateManager]:
    with ProcessorStateManager(TaskId(0, 0), "app", tmp_path / "0_0") as manager:
        yield manager


@pytest.fixture(params=sorted(KINDS))
def make(request: pytest.FixtureRequest, manager: ProcessorStateManager) -> MakeStore:
    def make(retention: int = 1000, segment: int | None = None) -> AbstractSessionStore:
        store = KINDS[request.param]("s", retention, segment)
        store.init(manager.context, store)
        return store

    return make


def s(key: bytes, start: int, end: int) -> Windowed[bytes]:
    return Windowed(key, SessionWindow(start, end))


def sessions(entries: Iterator[KeyValue[Windowed[bytes], bytes]]) -> list[tuple[bytes, int, int]]:
    return [(kv.key.key, kv.key.window.start, kv.key.window.end) for kv in entries]


def test_put_fetch_session_and_remove(make: MakeStore) -> None:
    store = make()
    store.put(s(b"k", 10, 20), b"v")
    assert store.fetch_session(b"k", 10, 20) == b"v"
    assert store.fetch_session(b"k", 10, 21) is None
    store.put(s(b"k", 10, 20), b"v2")
    assert store.fetch_session(b"k", 10, 20) == b"v2"
    store.remove(s(b"k", 10, 20))
    assert store.fetch_session(b"k", 10, 20) is None
    store.put(s(b"k", 5, 5), b"single record")
    store.put(s(b"k", 5, 5), None)
    assert list(store.fetch(b"k")) == []


def test_find_sessions_selects_end_at_or_after_and_start_at_or_before(make: MakeStore) -> None:
    store = make()
    for start, end in ((0, 5), (10, 20), (30, 40), (50, 50)):
        store.put(s(b"k", start, end), f"{start}-{end}".encode())
    store.put(s(b"other", 10, 20), b"x")
    assert sessions(store.find_sessions(b"k", 20, 30)) == [(b"k", 10, 20), (b"k", 30, 40)]
    assert sessions(store.find_sessions(b"k", 21, 29)) == []
    assert sessions(store.find_sessions(b"k", 5, 10)) == [(b"k", 0, 5), (b"k", 10, 20)]
    assert sessions(store.find_sessions(b"k", 0, 100)) == [(b"k", 0, 5), (b"k", 10, 20), (b"k", 30, 40), (b"k", 50, 50)]
    assert sessions(store.backward_find_sessions(b"k", 20, 30)) == [(b"k", 30, 40), (b"k", 10, 20)]
    assert list(store.find_sessions(b"k", 50, 50)) == [KeyValue(s(b"k", 50, 50), b"50-50")]


def test_sessions_of_a_key_order_by_end_then_start(make: MakeStore) -> None:
    store = make()
    for start, end in ((15, 20), (5, 20), (1, 10)):
        store.put(s(b"k", start, end), b"v")
    assert sessions(store.fetch(b"k")) == [(b"k", 1, 10), (b"k", 5, 20), (b"k", 15, 20)]


def test_key_ranges_order_by_key_then_end(make: MakeStore) -> None:
    store = make()
    for key, start, end in ((b"b", 0, 10), (b"a", 20, 30), (b"a", 0, 10), (b"c", 0, 10), (b"ab", 0, 1)):
        store.put(s(key, start, end), key)
    assert sessions(store.find_sessions(b"a", b"b", 0, 100)) == [
        (b"a", 0, 10), (b"a", 20, 30), (b"ab", 0, 1), (b"b", 0, 10)
    ]  # fmt: skip
    assert sessions(store.find_sessions(None, b"a", 15, 100)) == [(b"a", 20, 30)]
    assert [k for k, _, _ in sessions(store.fetch(b"b", None))] == [b"b", b"c"]
    assert sessions(store.backward_fetch(b"a", b"ab")) == [(b"ab", 0, 1), (b"a", 20, 30), (b"a", 0, 10)]
    assert list(store.find_sessions(b"c", b"a", 0, 100)) == []


def test_expired_sessions_are_dropped_and_not_returned(make: MakeStore) -> None:
    store = make(retention=100)
    store.put(s(b"k", 0, 10), b"old")
    store.put(s(b"k", 50, 110), b"moves time to 110")
    assert store.observed_stream_time == 110
    # live while end > observed - retention: end 10 is expired at 110
    assert sessions(store.fetch(b"k")) == [(b"k", 50, 110)]
    assert store.fetch_session(b"k", 0, 10) is None
    store.put(s(b"k", 0, 10), b"too late")
    assert store.expired_records_dropped == 1
    store.put(s(b"k", 5, 11), b"just in time")
    assert store.fetch_session(b"k", 5, 11) == b"just in time"


def test_expired_rows_are_deleted_once_per_segment_interval(make: MakeStore) -> None:
    store = make(retention=100, segment=50)
    for end in range(0, 100, 10):
        store.put(s(b"k", end, end), b"v")
    store.put(s(b"k", 120, 120), b"v")
    assert store.approximate_num_entries() == 8


def test_restore_batch_decodes_changelog_keys(make: MakeStore) -> None:
    store = make(retention=100)
    store.put(s(b"gone", 0, 40), b"x")
    store.restore_batch(
        [
            (session_key_schema.to_binary(b"k", 10, 51), b"1"),
            (session_key_schema.to_binary(b"gone", 0, 40), None),
            (session_key_schema.to_binary(b"old", 0, 5), b"expired by the batch"),
            (session_key_schema.to_binary(b"k", 100, 150), b"2"),
        ]
    )
    assert store.observed_stream_time == 150
    assert sessions(store.fetch(None, None)) == [(b"k", 10, 51), (b"k", 100, 150)]  # end 51 > 150 - 100


def test_closed_session_store_refuses_operations(make: MakeStore) -> None:
    store = make()
    store.close()
    with pytest.raises(InvalidStateStoreError):
        store.put(s(b"k", 0, 1), b"v")
    with pytest.raises(InvalidStateStoreError):
        store.fetch(b"k")


def test_argument_counts_are_checked(make: MakeStore) -> None:
    store = make()
    with pytest.raises(TypeError, match="3 or 4"):
        store.find_sessions(b"k", 0)
    with pytest.raises(TypeError, match="key or a key range"):
        store.fetch()


def test_session_key_schema_matches_kafka_streams_layout() -> None:
    binary = session_key_schema.to_binary(b"key", 1, 2)
    assert binary == b"key" + (2).to_bytes(8, "big") + (1).to_bytes(8, "big")
    assert session_key_schema.from_binary(binary) == (b"key", 1, 2)
    with pytest.raises(ValueError):
        session_key_schema.from_binary(b"short")
