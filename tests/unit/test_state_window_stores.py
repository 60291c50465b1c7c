"""Bytes window stores (SQLite and in-memory): fetch forms, boundaries, duplicates, retention."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streams_core.common.task_id import TaskId
from streams_core.errors import InvalidStateStoreError
from streams_core.state import KeyValue, SessionWindow, TimeWindow, Window, Windowed
from streams_core.state.internals import window_key_schema
from streams_core.state.internals.abstract_window_store import AbstractWindowStore
from streams_core.state.internals.in_memory_window_store import InMemoryWindowStore
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.internals.sqlite_window_store import SqliteWindowStore

KINDS = {"sqlite": SqliteWindowStore, "memory": InMemoryWindowStore}
MakeStore = Callable[..., AbstractWindowStore]


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[ProcessorStateManager]:
    with ProcessorStateManager(TaskId(0, 0), "app", tmp_path / "0_0") as manager:
        yield manager


@pytest.fixture(params=sorted(KINDS))
def make(request: pytest.FixtureRequest, manager: ProcessorStateManager) -> MakeStore:
    def make(
        retention: int = 1000, size: int = 10, duplicates: bool = False, segment: int | None = None
    ) -> AbstractWindowStore:
        store = KINDS[request.param]("w", retention, size, duplicates, segment)
        store.init(manager.context, store)
        return store

    return make


def w(key: bytes, start: int, size: int = 10) -> Windowed[bytes]:
    return Windowed(key, TimeWindow(start, start + size))


def test_put_and_fetch_one_window(make: MakeStore) -> None:
    store = make()
    store.put(b"k", b"v", 100)
    assert store.fetch(b"k", 100) == b"v"
    assert store.fetch(b"k", 101) is None
    assert store.fetch(b"other", 100) is None
    store.put(b"k", b"v2", 100)
    assert store.fetch(b"k", 100) == b"v2"
    store.put(b"k", None, 100)
    assert store.fetch(b"k", 100) is None


def test_fetch_key_time_range_is_inclusive_and_ordered_by_start(make: MakeStore) -> None:
    store = make()
    for start in (30, 10, 20, 40):
        store.put(b"k", str(start).encode(), start)
    store.put(b"j", b"other key", 20)
    store.put(b"k\x00", b"longer key", 20)
    assert list(store.fetch(b"k", 10, 30)) == [KeyValue(10, b"10"), KeyValue(20, b"20"), KeyValue(30, b"30")]
    assert list(store.fetch(b"k", 11, 29)) == [KeyValue(20, b"20")]
    assert list(store.fetch(b"k", 40, 40)) == [KeyValue(40, b"40")]
    assert list(store.fetch(b"k", 41, 100)) == []
    assert list(store.fetch(b"k", 30, 10)) == []
    assert [kv.key for kv in store.backward_fetch(b"k", 10, 40)] == [40, 30, 20, 10]


def test_fetch_key_range_orders_by_key_then_start(make: MakeStore) -> None:
    store = make()
    for key, start in ((b"b", 20), (b"a", 30), (b"b", 10), (b"c", 10), (b"a", 10), (b"\xff", 10)):
        store.put(key, key + str(start).encode(), start)
    got = [kv.key for kv in store.fetch(b"a", b"b", 0, 100)]
    assert got == [w(b"a", 10), w(b"a", 30), w(b"b", 10), w(b"b", 20)]
    assert [kv.key for kv in store.fetch(b"a", b"c", 15, 30)] == [w(b"a", 30), w(b"b", 20)]
    assert [kv.key.key for kv in store.fetch(None, None, 10, 10)] == [b"a", b"b", b"c", b"\xff"]
    assert [kv.key.key for kv in store.fetch(b"b", None, 10, 10)] == [b"b", b"c", b"\xff"]
    assert [kv.key for kv in store.backward_fetch(b"a", b"b", 0, 100)] == got[::-1]
    assert list(store.fetch(b"c", b"a", 0, 100)) == []
    assert next(store.fetch(b"a", b"a", 0, 100)) == KeyValue(w(b"a", 10), b"a10")


def test_all_and_fetch_all_order_by_start_then_key(make: MakeStore) -> None:
    store = make()
    for key, start in ((b"b", 20), (b"a", 20), (b"c", 10), (b"a", 30)):
        store.put(key, b"v", start)
    expected = [w(b"c", 10), w(b"a", 20), w(b"b", 20), w(b"a", 30)]
    assert [kv.key for kv in store.all()] == expected
    assert [kv.key for kv in store.backward_all()] == expected[::-1]
    assert [kv.key for kv in store.fetch_all(20, 20)] == [w(b"a", 20), w(b"b", 20)]
    assert [kv.key for kv in store.backward_fetch_all(10, 20)] == [w(b"b", 20), w(b"a", 20), w(b"c", 10)]
    assert list(store.fetch_all(31, 100)) == []


def test_windowed_keys_carry_the_window_size(make: MakeStore) -> None:
    store = make(size=60_000, retention=120_000)
    store.put(b"k", b"v", 60_000)
    (entry,) = list(store.all())
    assert entry.key.window == TimeWindow(60_000, 120_000)
    assert (entry.key.window.start, entry.key.window.end) == (60_000, 120_000)


def test_retained_duplicates_keep_every_value_in_insertion_order(make: MakeStore) -> None:
    store = make(duplicates=True)
    for value in (b"3", b"1", b"2"):
        store.put(b"k", value, 10)
    store.put(b"k", None, 10)
    assert [kv.value for kv in store.fetch(b"k", 0, 100)] == [b"3", b"1", b"2"]
    assert [kv.value for kv in store.backward_fetch(b"k", 0, 100)] == [b"2", b"1", b"3"]
    assert [kv.key for kv in store.all()] == [w(b"k", 10)] * 3
    assert store.fetch(b"k", 10) == b"2"
    assert store.retain_duplicates


def test_expired_windows_are_dropped_and_not_returned(make: MakeStore) -> None:
    store = make(retention=100)
    store.put(b"k", b"at 0", 0)
    store.put(b"k", b"at 50", 50)
    store.put(b"k", b"at 100", 100)
    assert store.observed_stream_time == 100
    # live while start > observed - retention: 0 is expired at 100, 1 is not
    assert [kv.key for kv in store.fetch(b"k", 0, 200)] == [50, 100]
    assert store.fetch(b"k", 0) is None
    assert store.fetch(b"k", 50) == b"at 50"
    store.put(b"k", b"too late", 0)
    assert store.expired_records_dropped == 1
    store.put(b"k", b"just in time", 1)
    assert store.fetch(b"k", 1) == b"just in time"
    store.put(b"k", b"moves time", 151)
    assert [kv.key.window.start for kv in store.all()] == [100, 151]
    assert list(store.fetch_all(0, 99)) == []


def test_time_ordered_store_keeps_the_window_at_exactly_stream_time_minus_retention(manager: ProcessorStateManager) -> None:
    """Java's time-ordered window store (AbstractDualSchemaRocksDBSegmentedBytesStore.getActualFrom
    and get with TimeFirstWindowKeySchema): live while start >= observed - retention."""
    store = SqliteWindowStore("w", 100, 10, time_ordered=True)
    store.init(manager.context, store)
    for start in (0, 1, 101):
        store.put(b"k", f"at {start}".encode(), start)
    assert store.time_ordered and store.expired_through == 0
    assert store.fetch(b"k", 1) == b"at 1" and store.fetch(b"k", 0) is None
    assert [kv.key for kv in store.fetch(b"k", 0, 200)] == [1, 101]
    assert [kv.key.window.start for kv in store.fetch_all(0, 200)] == [1, 101]
    store.put(b"k", b"too late", 0)
    assert store.expired_records_dropped == 1 and store.fetch(b"k", 0) is None


def test_expired_rows_are_deleted_once_per_segment_interval(make: MakeStore) -> None:
    store = make(retention=100, segment=50)
    for start in range(0, 100, 10):
        store.put(b"k", b"v", start)
    assert store.approximate_num_entries() == 10
    store.put(b"k", b"v", 120)  # observed 120 >= next cleanup (0 + 50 -> 50 -> 100): drops start <= 20
    assert store.approximate_num_entries() == 8
    store.put(b"k", b"v", 160)  # next cleanup is at 170: nothing deleted, but 30..60 are invisible
    assert store.approximate_num_entries() == 9
    assert next(store.all()).key.window.start == 70
    store.put(b"k", b"v", 170)  # cleanup: drops start <= 70, keeps 80, 90, 120, 160, 170
    assert store.approximate_num_entries() == 5


def test_restore_batch_decodes_changelog_keys(make: MakeStore) -> None:
    store = make(retention=100)
    store.put(b"gone", b"x", 40)
    store.restore_batch(
        [
            (window_key_schema.to_store_key_binary(b"k", 50, 0), b"1"),
            (window_key_schema.to_store_key_binary(b"gone", 40, 0), None),
            (window_key_schema.to_store_key_binary(b"k", 60, 0), b"2"),
            (window_key_schema.to_store_key_binary(b"old", 0, 0), b"expired by the batch"),
            (window_key_schema.to_store_key_binary(b"k", 150, 0), b"3"),
        ]
    )
    assert store.observed_stream_time == 150
    assert [(kv.key.key, kv.key.window.start, kv.value) for kv in store.all()] == [
        (b"k", 60, b"2"),
        (b"k", 150, b"3"),
    ]


def test_restore_keeps_duplicate_seqnums(make: MakeStore) -> None:
    store = make(duplicates=True)
    store.restore_batch([(window_key_schema.to_store_key_binary(b"k", 5, seq), bytes([seq])) for seq in (1, 2, 3)])
    assert [kv.value for kv in store.fetch(b"k", 0, 10)] == [b"\x01", b"\x02", b"\x03"]
    store.put(b"k", b"\x04", 5)
    assert [kv.value for kv in store.fetch(b"k", 0, 10)][-1] == b"\x04"


def test_iterators_are_safe_while_the_store_is_written(make: MakeStore) -> None:
    store = make()
    for start in range(10):
        store.put(b"k", b"v", start)
    seen = []
    for kv in store.fetch(b"k", 0, 9):
        seen.append(kv.key)
        store.put(b"k", None, kv.key + 1)
        store.put(b"j", b"new", kv.key)
    assert seen == sorted(seen) and seen[0] == 0
    assert len(list(store.fetch(b"j", 0, 9))) == len(seen)


def test_closed_window_store_refuses_operations(make: MakeStore) -> None:
    store = make()
    store.close()
    with pytest.raises(InvalidStateStoreError):
        store.put(b"k", b"v", 1)
    with pytest.raises(InvalidStateStoreError):
        store.fetch(b"k", 0, 1)
    with pytest.raises(InvalidStateStoreError):
        store.all()


def test_fetch_argument_count_is_checked(make: MakeStore) -> None:
    with pytest.raises(TypeError, match="2, 3 or 4"):
        make().fetch(b"k")


def test_window_key_schema_matches_kafka_streams_layout() -> None:
    binary = window_key_schema.to_store_key_binary(b"key", 1, 2)
    assert binary == b"key" + (1).to_bytes(8, "big") + (2).to_bytes(4, "big")
    assert window_key_schema.from_store_key_binary(binary) == (b"key", 1, 2)
    assert window_key_schema.from_store_key_binary(window_key_schema.to_store_key_binary(b"", 2**40, 0)) == (
        b"",
        2**40,
        0,
    )
    with pytest.raises(ValueError):
        window_key_schema.from_store_key_binary(b"short")


def test_window_value_types() -> None:
    assert TimeWindow(0, 10) == TimeWindow(0, 10)
    assert TimeWindow(0, 10) != SessionWindow(0, 10)
    assert TimeWindow(0, 10).overlap(TimeWindow(5, 15))
    assert not TimeWindow(0, 10).overlap(TimeWindow(10, 20))
    assert SessionWindow(0, 10).overlap(SessionWindow(10, 20))
    assert isinstance(TimeWindow(0, 1), Window)
    assert str(Windowed("word", TimeWindow(0, 60_000))) == "[word@0/60000]"
    assert hash(Windowed(b"k", TimeWindow(0, 1))) == hash(Windowed(b"k", TimeWindow(0, 1)))
    with pytest.raises(ValueError):
        TimeWindow(-1, 10)
    with pytest.raises(ValueError):
        SessionWindow(10, 5)
