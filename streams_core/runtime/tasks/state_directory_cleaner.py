"""Deleting the state of tasks this instance no longer runs, after `state.cleanup.delay.ms`.

A task directory that no thread owns (as active or standby) and that nothing touched for the
cleanup delay is removed, as Kafka Streams' StateDirectory.cleanRemovedTasks does. A directory
whose lock another process holds is left alone. Directories are closed and checkpointed on every
rebalance, which refreshes their modification time, so a task being moved is never cleaned.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Collection
from pathlib import Path

from streams_core.common.task_id import TaskId
from streams_core.errors import ProcessorStateError
from streams_core.runtime.tasks.task_manager import local_task_dirs
from streams_core.state.internals.task_directory_lock import TaskDirectoryLock

__all__ = ["clean_removed_tasks"]

log = logging.getLogger(__name__)


def _last_modified(directory: Path) -> float:
    times = [directory.stat().st_mtime]
    times += [entry.stat().st_mtime for entry in directory.iterdir() if entry.is_file()]
    return max(times)


def clean_removed_tasks(
    app_state_dir: Path, owned: Collection[TaskId], delay_ms: int, now: float | None = None
) -> list[TaskId]:
    """Remove unowned task directories idle for `delay_ms`; returns the tasks cleaned."""
    now = time.time() if now is None else now
    cleaned = []
    for task_id, directory in sorted(local_task_dirs(app_state_dir).items()):
        if task_id in owned:
            continue
        try:
            idle_ms = (now - _last_modified(directory)) * 1000
        except FileNotFoundError:
            continue
        if idle_ms < delay_ms:
            continue
        lock = TaskDirectoryLock(directory)
        try:
            lock.acquire()
        except (ProcessorStateError, FileNotFoundError):
            continue
        try:
            shutil.rmtree(directory)
        finally:
            lock.release()
        log.info("removed the state of task %s (not owned, idle %.0f s): %s", task_id, idle_ms / 1000, directory)
        cleaned.append(task_id)
    return cleaned
