"""What only the SQLite stores do: files, pragmas, commit on flush, persistence across reopen."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from streams_core.common.task_id import TaskId
from streams_core.errors import ProcessorStateError, TaskCorruptedError
from streams_core.state import KeyValue, SessionWindow, TimeWindow, Windowed
from streams_core.state.internals import sqlite_database
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.internals.sqlite_key_value_store import SqliteKeyValueStore
from streams_core.state.internals.sqlite_session_store import SqliteSessionStore
from streams_core.state.internals.sqlite_window_store import SqliteWindowStore


def open_store(store, task_dir: Path):  # type: ignore[no-untyped-def]
    manager = ProcessorStateManager(TaskId(0, 0), "app", task_dir)
    store.init(manager.context, store)
    return manager, store


def test_one_file_per_store_in_the_task_directory(tmp_path: Path) -> None:
    manager, store = open_store(SqliteKeyValueStore("counts"), tmp_path / "0_0")
    assert store.path == tmp_path / "0_0" / "counts.sqlite"
    assert store.path.exists()
    conn = sqlite3.connect(store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    manager.close()


def test_writes_are_committed_on_flush_not_per_put(tmp_path: Path) -> None:
    manager, store = open_store(SqliteKeyValueStore("kv"), tmp_path / "0_0")
    store.put(b"a", b"1")
    assert store.get(b"a") == b"1"
    reader = sqlite3.connect(store.path)
    assert reader.execute("SELECT count(*) FROM key_value").fetchone()[0] == 0
    store.flush()
    assert reader.execute("SELECT key, value FROM key_value").fetchall() == [(b"a", b"1")]
    reader.close()
    manager.close()


def test_the_memtable_answers_before_sqlite_holds_the_writes(tmp_path: Path) -> None:
    manager, store = open_store(SqliteKeyValueStore("kv"), tmp_path / "0_0")
    store.put_all([(b"a", b"1"), (b"b", b"2")])
    store.put(b"a", b"10")
    store.delete(b"b")
    rows = "SELECT key, value FROM key_value ORDER BY key"
    assert store._conn.execute(rows).fetchall() == [(b"a", b"1"), (b"b", b"2")]  # still in the memtable
    assert (store.get(b"a"), store.get(b"b")) == (b"10", None)
    assert store.put_if_absent(b"b", b"20") is None and store.get(b"b") == b"20"
    assert list(store.range(b"a", b"z")) == [KeyValue(b"a", b"10"), KeyValue(b"b", b"20")]
    assert store._conn.execute(rows).fetchall() == [(b"a", b"10"), (b"b", b"20")]  # the scan wrote it first
    store.delete(b"a")
    assert store.approximate_num_entries() == 1
    manager.close()


def test_a_full_memtable_goes_into_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("streams_core.state.internals.sqlite_key_value_store.MEMTABLE_ENTRIES", 3)
    manager, store = open_store(SqliteKeyValueStore("kv"), tmp_path / "0_0")
    count = "SELECT count(*) FROM key_value"
    store.put(b"a", b"1")
    store.put(b"b", b"2")
    assert store._conn.execute(count).fetchone()[0] == 0
    store.put(b"c", b"3")
    assert store._conn.execute(count).fetchone()[0] == 3
    manager.close()


def test_a_delete_ahead_of_an_iterator_is_not_yielded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_database, "PAGE_SIZE", 2)
    sqlite_database._page_queries.cache_clear()  # the page queries hold the page size
    try:
        manager, store = open_store(SqliteKeyValueStore("kv"), tmp_path / "0_0")
        store.put_all([(b"%d" % i, b"v") for i in range(6)])
        seen = []
        for entry in store.all():
            seen.append(entry.key)
            if entry.key == b"0":
                store.delete(b"4")
        assert seen == [b"0", b"1", b"2", b"3", b"5"]
        manager.close()
    finally:
        sqlite_database._page_queries.cache_clear()


def test_key_value_store_survives_close_and_reopen(tmp_path: Path) -> None:
    manager, store = open_store(SqliteKeyValueStore("kv"), tmp_path / "0_0")
    store.put_all([(b"b", b"2"), (b"a", b"1"), (b"c", b"3")])
    store.delete(b"c")
    manager.close()
    assert not store.is_open
    manager, store = open_store(SqliteKeyValueStore("kv"), tmp_path / "0_0")
    assert list(store.all()) == [KeyValue(b"a", b"1"), KeyValue(b"b", b"2")]
    manager.close()


def test_window_store_survives_reopen_and_resumes_stream_time(tmp_path: Path) -> None:
    manager, store = open_store(SqliteWindowStore("w", 1000, 100, retain_duplicates=True), tmp_path / "0_0")
    store.put(b"k", b"1", 500)
    store.put(b"k", b"2", 500)
    manager.close()
    manager, store = open_store(SqliteWindowStore("w", 1000, 100, retain_duplicates=True), tmp_path / "0_0")
    assert store.observed_stream_time == 500
    store.put(b"k", b"3", 500)
    assert [kv.value for kv in store.fetch(b"k", 0, 1000)] == [b"1", b"2", b"3"]
    store.put(b"k", b"late", 500 - 1000)
    assert store.expired_records_dropped == 1
    manager.close()


def test_session_store_survives_reopen(tmp_path: Path) -> None:
    manager, store = open_store(SqliteSessionStore("s", 1000), tmp_path / "0_0")
    store.put(Windowed(b"k", SessionWindow(10, 20)), b"v")
    manager.close()
    manager, store = open_store(SqliteSessionStore("s", 1000), tmp_path / "0_0")
    assert store.observed_stream_time == 20
    assert list(store.fetch(b"k")) == [KeyValue(Windowed(b"k", SessionWindow(10, 20)), b"v")]
    manager.close()


def test_a_file_of_another_format_version_is_refused(tmp_path: Path) -> None:
    task_dir = tmp_path / "0_0"
    task_dir.mkdir()
    conn = sqlite3.connect(task_dir / "kv.sqlite")
    conn.execute("PRAGMA user_version=99")
    conn.close()
    manager = ProcessorStateManager(TaskId(0, 0), "app", task_dir)
    with pytest.raises(ProcessorStateError, match="format version 99"):
        SqliteKeyValueStore("kv").init(manager.context, SqliteKeyValueStore("kv"))
    manager.close()


def test_a_corrupt_file_is_a_corrupted_task(tmp_path: Path) -> None:
    task_dir = tmp_path / "0_0"
    task_dir.mkdir()
    (task_dir / "w.sqlite").write_bytes(b"this is not a database" * 100)
    manager = ProcessorStateManager(TaskId(0, 0), "app", task_dir)
    store = SqliteWindowStore("w", 10, 10)
    with pytest.raises(TaskCorruptedError, match="is damaged: file is not a database"):
        store.init(manager.context, store)
    assert not store.is_open
    manager.close()


def closed_store_file(task_dir: Path, keys: int = 2000) -> Path:
    """A key-value store file of several pages, closed cleanly (its digest beside it)."""
    manager, store = open_store(SqliteKeyValueStore("kv"), task_dir)
    for i in range(keys):
        store.put(f"key-{i:05d}".encode(), i.to_bytes(8, "big"))
    manager.close()
    return task_dir / "kv.sqlite"


def reopen(task_dir: Path) -> SqliteKeyValueStore:
    manager = ProcessorStateManager(TaskId(0, 0), "app", task_dir)
    store = SqliteKeyValueStore("kv")
    try:
        store.init(manager.context, store)
    finally:
        if not store.is_open:
            manager.close()
    return store


def test_a_clean_close_leaves_a_digest_that_the_next_open_checks_and_removes(tmp_path: Path) -> None:
    path = closed_store_file(tmp_path / "0_0")
    digest = path.with_name("kv.sqlite.crc32")
    assert digest.exists()
    store = reopen(tmp_path / "0_0")
    assert not digest.exists(), "an open file changes: its digest is gone"
    assert store.get(b"key-01999") == (1999).to_bytes(8, "big")
    store.close()


@pytest.mark.parametrize("digest", [True, False], ids=["clean-close", "after-a-crash"])
@pytest.mark.parametrize(
    "damage",
    ["half", "header", "page-header"],
)
def test_damage_to_a_closed_file_is_a_corrupted_task(tmp_path: Path, damage: str, digest: bool) -> None:
    """With its digest any change is found; without it (a crash left no digest) quick_check finds structural damage."""
    path = closed_store_file(tmp_path / "0_0")
    if not digest:
        path.with_name("kv.sqlite.crc32").unlink()
    data = bytearray(path.read_bytes())
    if damage == "half":
        data = data[: len(data) // 2]
    elif damage == "header":
        data[16:48] = bytes(range(32))
    else:
        data[4096 * 3 : 4096 * 3 + 12] = b"\xa5" * 12  # the b-tree header of the fourth page
    path.write_bytes(bytes(data))
    with pytest.raises(TaskCorruptedError, match=r"kv\.sqlite"):
        reopen(tmp_path / "0_0")


def test_one_changed_byte_in_a_row_is_found_by_the_digest(tmp_path: Path) -> None:
    """quick_check cannot see a changed value (SQLite has no page checksums); the clean close's digest does."""
    path = closed_store_file(tmp_path / "0_0")
    data = bytearray(path.read_bytes())
    at = data.rindex((1999).to_bytes(8, "big"))
    data[at + 7] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(TaskCorruptedError, match="CRC-32 mismatch"):
        reopen(tmp_path / "0_0")


def test_another_format_version_is_not_corruption(tmp_path: Path) -> None:
    path = closed_store_file(tmp_path / "0_0", keys=1)
    path.with_name("kv.sqlite.crc32").unlink()
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA user_version=7")
    connection.commit()
    connection.close()
    with pytest.raises(ProcessorStateError, match="format version 7") as raised:
        reopen(tmp_path / "0_0")
    assert not isinstance(raised.value, TaskCorruptedError), "a newer library's file is not wiped"


def test_window_rows_in_the_file_are_keyed_by_key_start_and_seq(tmp_path: Path) -> None:
    manager, store = open_store(SqliteWindowStore("w", 100, 10), tmp_path / "0_0")
    store.put(b"k", b"v", 40)
    store.flush()
    conn = sqlite3.connect(store.path)
    assert conn.execute("SELECT key, start_ms, seq, value FROM window_store").fetchall() == [(b"k", 40, 0, b"v")]
    conn.close()
    assert list(store.all()) == [KeyValue(Windowed(b"k", TimeWindow(40, 50)), b"v")]
    manager.close()
