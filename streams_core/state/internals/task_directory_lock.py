"""TaskDirectoryLock: one process at a time owns a task's state directory (`fcntl.flock`).

The lock is on `<task dir>/.lock` and lasts while the file descriptor is open, so it goes
away with the process however it ends. The owner's pid is written into the file to make the
"locked by another process" error say who holds it. The file is never deleted (deleting a lock
file races with a process about to lock it). `DirectoryLock` is the mechanism, which the
application's state directory also uses (`state_directory.py`), with its own error.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

from streams_core.errors import ProcessorStateError, StreamsError, TaskDirectoryLockedError

__all__ = ["LOCK_FILE_NAME", "DirectoryLock", "TaskDirectoryLock"]

log = logging.getLogger(__name__)

LOCK_FILE_NAME = ".lock"


class DirectoryLock:
    """An exclusive, non-blocking lock on a directory (its `.lock` file), also against other
    holders in this process (each lock opens the file anew)."""

    def __init__(self, directory: Path) -> None:
        self._path = Path(directory) / LOCK_FILE_NAME
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        return self._path

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise `locked_error` naming the holder; re-acquiring is a no-op."""
        if self._fd is not None:
            return
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise self.locked_error(holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        log.debug("locked %s", self._path)

    def locked_error(self, holder: str) -> StreamsError:
        """The error of a directory another holder (pid `holder`) has locked."""
        return ProcessorStateError(f"directory {self._path.parent} is locked by another holder (pid {holder})")

    def release(self) -> None:
        """Give the lock up; releasing a lock not held does nothing."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        log.debug("unlocked %s", self._path)


class TaskDirectoryLock(DirectoryLock):
    """An exclusive, non-blocking lock on a task directory."""

    def locked_error(self, holder: str) -> StreamsError:
        return TaskDirectoryLockedError(
            f"state directory {self._path.parent} is locked by another process (pid {holder}): another "
            "stream thread of this instance that has not given the task up yet, or another instance with "
            "the same application.id on this state.dir (two must not share one)"
        )
