"""Cleanup of task directories no longer owned, after the delay."""

from __future__ import annotations

import os
import time
from pathlib import Path

from streams_core.common.task_id import TaskId
from streams_core.runtime.tasks.state_directory_cleaner import clean_removed_tasks
from streams_core.state.internals.task_directory_lock import TaskDirectoryLock


def _task_dir(root: Path, name: str, age_s: float) -> Path:
    directory = root / name
    directory.mkdir()
    (directory / "counts.sqlite").write_bytes(b"x")
    past = time.time() - age_s
    for path in (directory / "counts.sqlite", directory):
        os.utime(path, (past, past))
    return directory


def test_removes_only_unowned_idle_unlocked_task_dirs(tmp_path: Path) -> None:
    old_unowned = _task_dir(tmp_path, "0_0", age_s=120)
    old_owned = _task_dir(tmp_path, "0_1", age_s=120)
    fresh_unowned = _task_dir(tmp_path, "0_2", age_s=1)
    locked = _task_dir(tmp_path, "0_3", age_s=120)
    not_a_task = _task_dir(tmp_path, "global", age_s=120)
    lock = TaskDirectoryLock(locked)
    lock.acquire()
    lock_time = time.time() - 120
    os.utime(locked / ".lock", (lock_time, lock_time))
    try:
        cleaned = clean_removed_tasks(tmp_path, {TaskId(0, 1)}, delay_ms=60_000)
    finally:
        lock.release()
    assert cleaned == [TaskId(0, 0)]
    assert not old_unowned.exists()
    assert old_owned.exists() and fresh_unowned.exists() and locked.exists() and not_a_task.exists()


def test_nothing_to_clean_in_a_missing_directory(tmp_path: Path) -> None:
    assert clean_removed_tasks(tmp_path / "absent", set(), delay_ms=0) == []
