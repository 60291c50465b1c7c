"""Transactional SQLite stores (KIP-892/KIP-1035 in SQLite form): changelog offsets kept in the
store file, committed with the data only by `commit(offsets)` under exactly-once; what the state
manager does with them (docs/state.md, "Exactly-once without wipes")."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import TaskCorruptedError
from streams_core.state.internals.in_memory_key_value_store import InMemoryKeyValueStore
from streams_core.state.internals.offset_checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.internals.sqlite_database import FORMAT_VERSION, SqliteStoreFile
from streams_core.state.internals.sqlite_key_value_store import MEMTABLE_ENTRIES, SqliteKeyValueStore
from streams_core.state.internals.sqlite_session_store import SqliteSessionStore
from streams_core.state.internals.sqlite_window_store import SqliteWindowStore
from streams_core.state.internals.store_names import store_changelog_topic
from streams_core.state.windowed import SessionWindow, Windowed

APP = "app"
TP = TopicPartition(store_changelog_topic(APP, "s"), 0)


def _kv() -> SqliteKeyValueStore:
    return SqliteKeyValueStore("s")


def _window() -> SqliteWindowStore:
    return SqliteWindowStore("s", retention_period=1_000_000, window_size=10)


def _session() -> SqliteSessionStore:
    return SqliteSessionStore("s", retention_period=1_000_000)


def _put(store: Any, n: int) -> None:
    if isinstance(store, SqliteKeyValueStore):
        store.put(b"k%d" % n, b"v%d" % n)
    elif isinstance(store, SqliteWindowStore):
        store.put(b"k%d" % n, b"v%d" % n, n * 10)
    else:
        store.put(Windowed(b"k%d" % n, SessionWindow(n, n + 1)), b"v%d" % n)


STORES: list[Callable[[], Any]] = [_kv, _window, _session]
TABLES = {SqliteKeyValueStore: "key_value", SqliteWindowStore: "window_store", SqliteSessionStore: "session_store"}


def _manager(task_dir: Path, *, exactly_once: bool = True) -> ProcessorStateManager:
    manager = ProcessorStateManager(TaskId(0, 0), APP, task_dir, changelog_partitions={"s": TP})
    if exactly_once:
        manager.use_transactional_stores()
    return manager


def _committed_rows(store: SqliteStoreFile) -> tuple[int, dict[tuple[str, int], int]]:
    """What another connection sees of the file: committed data rows and stored offsets."""
    assert store.path is not None
    conn = sqlite3.connect(store.path)
    try:
        rows = conn.execute(f"SELECT count(*) FROM {TABLES[type(store)]}").fetchone()[0]
        offsets = {(t, p): o for t, p, o in conn.execute("SELECT topic, partition, next_offset FROM changelog_offsets")}
    finally:
        conn.close()
    return rows, offsets


@pytest.mark.parametrize("make", STORES, ids=["kv", "window", "session"])
def test_transactional_store_commits_data_and_offsets_together_only_in_commit(tmp_path: Path, make: Callable[[], Any]) -> None:
    with _manager(tmp_path) as manager:
        store = make()
        store.init(manager.context, store)
        assert store.transactional and manager.transactional_stores == ["s"]
        _put(store, 1)
        store.flush()
        manager.flush()
        assert _committed_rows(store) == (0, {}), "flush commits nothing under exactly-once"
        manager.update_changelog_offsets({TP: 7})
        manager.commit_stores()
        assert _committed_rows(store) == (1, {(TP.topic, 0): 7})
        assert store.committed_offsets() == {TP: 7}
        _put(store, 2)
        manager.flush()
    # closed without a commit (a crash between the Kafka commit and the SQLite commit looks the same)
    with _manager(tmp_path) as manager:
        reopened = make()
        reopened.init(manager.context, reopened)
        assert _committed_rows(reopened) == (1, {(TP.topic, 0): 7}), "the uncommitted write was rolled back"
        assert manager.changelog_offsets == {TP: 7}, "the store's offsets say where the restore starts"
        [partition] = manager.changelogs_to_restore()
        assert partition.start_offset == 7 and partition.commit is not None


def test_memtable_overflow_reaches_sqlite_but_not_its_committed_state(tmp_path: Path) -> None:
    """The memtable spills into the open SQLite transaction at MEMTABLE_ENTRIES keys: still uncommitted."""
    with _manager(tmp_path) as manager:
        store = _kv()
        store.init(manager.context, store)
        for n in range(MEMTABLE_ENTRIES + 5):
            store.put(b"%08d" % n, b"x")
        assert store.approximate_num_entries() == MEMTABLE_ENTRIES + 5
        assert _committed_rows(store) == (0, {})
    with _manager(tmp_path) as manager:
        store = _kv()
        store.init(manager.context, store)
        assert store.approximate_num_entries() == 0 and store.committed_offsets() == {}


def test_commit_without_changes_writes_nothing_and_offsets_of_other_partitions_stay(tmp_path: Path) -> None:
    store = _kv()
    with _manager(tmp_path) as manager:
        store.init(manager.context, store)
        other = TopicPartition("other", 3)
        store.commit({TP: 1, other: 9})
        store.commit({TP: 2})
        assert _committed_rows(store)[1] == {(TP.topic, 0): 2, ("other", 3): 9}
        total = store._conn.total_changes  # type: ignore[union-attr]
        store.commit({TP: 2})
        assert store._conn.total_changes == total  # type: ignore[union-attr]


def test_at_least_once_flush_commits_and_drops_offsets_the_data_moved_past(tmp_path: Path) -> None:
    with _manager(tmp_path) as manager:
        store = _kv()
        store.init(manager.context, store)
        store.put(b"a", b"1")
        manager.update_changelog_offsets({TP: 1})
        manager.commit_stores()
    with _manager(tmp_path, exactly_once=False) as manager:
        store = _kv()
        store.init(manager.context, store)
        assert not store.transactional and manager.transactional_stores == []
        assert manager.changelog_offsets == {TP: 1}, "offsets an exactly-once run left are exact: used"
        store.put(b"b", b"2")
        manager.flush()
        assert _committed_rows(store) == (2, {}), "at-least-once: flush commits; the stored offsets no longer hold"


def test_exactly_once_store_offsets_win_over_the_checkpoint(tmp_path: Path) -> None:
    with _manager(tmp_path) as manager:
        store = _kv()
        store.init(manager.context, store)
        store.put(b"a", b"1")
        manager.update_changelog_offsets({TP: 5})
        manager.commit_stores()
    OffsetCheckpoint(tmp_path / CHECKPOINT_FILE_NAME).write({(TP.topic, 0): 9})
    with _manager(tmp_path) as manager:
        manager.load_checkpoint()
        store = _kv()
        store.init(manager.context, store)
        assert manager.changelog_offsets == {TP: 5}


def test_exactly_once_data_without_offsets_or_checkpoint_is_a_corrupted_task(tmp_path: Path) -> None:
    """Written under at-least-once (or by version 1) and not closed cleanly: may hold aborted writes."""
    with _manager(tmp_path, exactly_once=False) as manager:
        store = _kv()
        store.init(manager.context, store)
        store.put(b"a", b"1")
        manager.flush()
    with _manager(tmp_path) as manager:
        store = _kv()
        with pytest.raises(TaskCorruptedError, match="without the changelog offset"):
            store.init(manager.context, store)
        store.close()


def test_exactly_once_empty_store_without_offsets_restores_from_the_beginning(tmp_path: Path) -> None:
    for _ in range(2):  # the second time the file exists: opened, never committed (killed before the first commit)
        with _manager(tmp_path) as manager:
            store = _kv()
            store.init(manager.context, store)
            assert manager.changelogs_to_restore()[0].start_offset is None
            store.put(b"a", b"1")


def test_restore_commit_moves_the_stored_offset(tmp_path: Path) -> None:
    """A restore killed midway resumes from what it committed (records of read_committed changelogs)."""
    with _manager(tmp_path) as manager:
        store = _kv()
        store.init(manager.context, store)
        [partition] = manager.changelogs_to_restore()
        partition.restore_callback([(b"a", b"1"), (b"b", b"2")])
        assert partition.commit is not None
        partition.commit(2)
        partition.restore_callback([(b"c", b"3")])
    with _manager(tmp_path) as manager:
        store = _kv()
        store.init(manager.context, store)
        assert manager.changelogs_to_restore()[0].start_offset == 2
        assert [kv.key for kv in store.all()] == [b"a", b"b"]


def test_wipe_keeping_store_files(tmp_path: Path) -> None:
    with _manager(tmp_path) as manager:
        store = _kv()
        store.init(manager.context, store)
        store.commit({TP: 1})
    (tmp_path / "custom-store.bin").write_bytes(b"x")
    OffsetCheckpoint(tmp_path / CHECKPOINT_FILE_NAME).write({(TP.topic, 0): 1})
    with _manager(tmp_path) as manager:
        manager.wipe(keep_store_files=True)
        names = {p.name for p in tmp_path.iterdir()}
        assert "s.sqlite" in names and "s.sqlite.crc32" in names
        assert "custom-store.bin" not in names and CHECKPOINT_FILE_NAME not in names
        store = _kv()
        store.init(manager.context, store)
        assert manager.changelog_offsets == {TP: 1}


def test_a_version_1_file_is_upgraded_without_offsets(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE key_value (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID")
    conn.execute("INSERT INTO key_value VALUES (x'61', x'31')")
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    with _manager(tmp_path, exactly_once=False) as manager:
        store = _kv()
        store.init(manager.context, store)
        assert store.get(b"a") == b"1" and store.committed_offsets() == {}
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == FORMAT_VERSION == 2
    conn.close()


def test_in_memory_stores_are_not_transactional(tmp_path: Path) -> None:
    with _manager(tmp_path) as manager:
        store = InMemoryKeyValueStore("s")
        store.init(manager.context, store)
        assert manager.transactional_stores == []
        assert manager.changelogs_to_restore()[0].commit is None
