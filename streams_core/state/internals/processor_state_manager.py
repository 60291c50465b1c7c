"""ProcessorStateManager: the stores of one task, their directory, lock, changelog offsets and checkpoint.

A task (active or standby) creates one manager for its directory
`state.dir/<application.id>/<task id>/`, builds its stores and calls `store.init(manager.context,
store)`; each store registers itself (with a restore callback) through the context. The manager
flushes and closes them in registration order.

It is the one owner of changelog bookkeeping: which changelog partition backs each logged store,
the offset each one's store holds data up to (`changelog_offsets`: read from the `.checkpoint` on
open, advanced by restores, standby updates and commits), the checkpoint file (`checkpoint()`,
`delete_checkpoint()`), and wiping the stores to rebuild them (`wipe()`). The task's IQv2 position
lives and dies with the checkpoint (`.position`, position_checkpoint.py): loaded with it, written just
before it, removed with it and by a wipe.

Damage found while the instance was down is not fatal: a corrupt `.checkpoint` (Java fails the
thread instead: docs/state.md), and a persistent store whose file was missing or empty while the
checkpoint has its changelog offset, raise TaskCorruptedError; the task manager then wipes the
task and restores it from the changelogs.
Offsets of in-memory stores are never checkpointed (as Java): they restart empty.

Stores that manage their changelog offsets (KIP-1035: the SQLite stores keep them in their file)
are trusted for them over the checkpoint. Under exactly-once (`use_transactional_stores()`) they
are transactional (KIP-892): `commit_stores()`, called once the Kafka transaction that carried
their changelog records committed (and during and after a restore, whose records are committed
ones), commits each one's data with its offsets; nothing else commits them (docs/state.md).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from streams_core.common.store import RestoreCallback, StateStore
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import ProcessorStateError, TaskCorruptedError
from streams_core.serde import Serde
from streams_core.state.internals.offset_checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streams_core.state.internals.position_checkpoint import POSITION_FILE_NAME, PositionCheckpoint
from streams_core.state.internals.sqlite_database import DIGEST_SUFFIX, STORE_FILE_SUFFIX
from streams_core.state.internals.store_context import StoreContext
from streams_core.state.internals.store_names import store_changelog_topic
from streams_core.state.internals.task_directory_lock import TaskDirectoryLock

__all__ = ["ChangelogPartition", "OffsetManagingStore", "ProcessorStateManager", "StateStoreMetadata"]

log = logging.getLogger(__name__)

_STORE_FILE_ENDINGS = tuple(STORE_FILE_SUFFIX + tail for tail in ("", "-wal", "-shm", DIGEST_SUFFIX))
"""A SQLite store's file, its WAL and shared memory, and its digest: kept by `wipe(keep_store_files=True)`."""


@runtime_checkable
class OffsetManagingStore(Protocol):
    """A bytes store that keeps the changelog offsets its data reflects (KIP-1035) and can commit
    both together only when told (KIP-892): `SqliteStoreFile`."""

    @property
    def manages_offsets(self) -> bool: ...

    @property
    def persistent(self) -> bool: ...

    def set_transactional(self) -> None: ...

    def committed_offsets(self) -> dict[TopicPartition, int]: ...

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None: ...

    def is_empty(self) -> bool: ...


@dataclass(slots=True)
class StateStoreMetadata:
    """A registered store, how to restore it and its changelog topic."""

    store: StateStore
    restore_callback: RestoreCallback | None
    changelog_topic: str


_TIMESTAMP = struct.Struct(">q")


class _Record(Protocol):
    """What a restore reads of a changelog record."""

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def timestamp(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ChangelogPartition:
    """One store's changelog partition, where to start restoring it, and how to apply its records.

    The changelog of a store of `ValueAndTimestamp` bytes holds plain values, as Java's (the
    ChangeLogging layer logs the timestamp as the record's), and so does a source topic used as
    the changelog (a read-only store, a table's topic reused by `topology.optimization`): each
    value gets the record's timestamp in front (Java's `RecordConverters.rawValueToTimestampedValue`).
    An active task restores a source topic only up to the group's committed offset (`end_offset`):
    the records after it are processed again.
    """

    store_name: str
    partition: TopicPartition
    start_offset: int | None
    restore_callback: RestoreCallback
    commit: Callable[[int], None] | None = None
    """A transactional store: commit what was restored, with the next offset to restore from."""
    source_topic: bool = False
    timestamped: bool = False
    end_offset: int | None = None
    """Restore no further than this offset (a source topic: the committed offset), None: the end."""

    def apply(self, records: Iterable[_Record]) -> None:
        """Hand keyed records to the store (converted when the changelog is a source topic of plain values)."""
        if self.timestamped:
            pack = _TIMESTAMP.pack
            self.restore_callback(
                [(r.key, None if r.value is None else pack(r.timestamp) + r.value) for r in records if r.key is not None]
            )
        else:
            self.restore_callback([(r.key, r.value) for r in records if r.key is not None])


class ProcessorStateManager:
    """Owns a task directory (locked) and the stores registered in it."""

    def __init__(
        self,
        task_id: TaskId,
        application_id: str,
        task_dir: Path,
        *,
        default_key_serde: Serde[Any] | None = None,
        default_value_serde: Serde[Any] | None = None,
        changelog_partitions: Mapping[str, TopicPartition] | None = None,
        global_stores: Mapping[str, StateStore] | None = None,
    ) -> None:
        """Create the directory and lock it; ProcessorStateError if another process holds it.

        `changelog_partitions` maps each logged store to its changelog partition for this task;
        `global_stores` are the instance's global stores, which `get_store` also finds (they
        belong to the global thread, which flushes and closes them).
        """
        self._task_id = task_id
        self._application_id = application_id
        self._task_dir = Path(task_dir)
        try:
            self._task_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ProcessorStateError(f"task {task_id}: cannot create state directory {self._task_dir}: {exc}") from exc
        self._lock = TaskDirectoryLock(self._task_dir)
        self._lock.acquire()
        self._stores: dict[str, StateStoreMetadata] = {}
        self._closed = False
        self._context = StoreContext(self, default_key_serde, default_value_serde)
        self._checkpoint = OffsetCheckpoint(self._task_dir / CHECKPOINT_FILE_NAME)
        self._position_file = PositionCheckpoint(self._task_dir / POSITION_FILE_NAME)
        self._loaded_position: dict[TopicPartition, int] = {}
        self._changelogs: dict[str, TopicPartition] = dict(changelog_partitions or {})
        self._changelog_offsets: dict[TopicPartition, int] = {}
        self._volatile: set[TopicPartition] = set()
        self._source_changelogs: set[TopicPartition] = set()
        """Changelogs that are source topics (read-only stores, reused table topics)."""
        self._timestamped: set[TopicPartition] = set()
        """Changelogs of stores of `ValueAndTimestamp` bytes (Java's timestamped stores), which a restore builds."""
        self._restore_limits: dict[TopicPartition, int] = {}
        """Changelogs of in-memory stores: never checkpointed, always restored from the beginning."""
        self._files_at_open = _non_empty_files(self._task_dir)
        self._global_stores = global_stores or {}
        self._exactly_once = False
        self._transactional: dict[str, OffsetManagingStore] = {}
        """Stores committed by `commit_stores()` only (exactly-once), by name."""
        log.debug("task %s: state manager opened %s", task_id, self._task_dir)

    @property
    def task_id(self) -> TaskId:
        return self._task_id

    @property
    def application_id(self) -> str:
        return self._application_id

    @property
    def task_dir(self) -> Path:
        return self._task_dir

    @property
    def context(self) -> StoreContext:
        """What the task passes to `store.init(context, root)`."""
        return self._context

    @property
    def checkpoint_file(self) -> OffsetCheckpoint:
        """The task's `.checkpoint` (changelog offsets of its stores)."""
        return self._checkpoint

    @property
    def stores(self) -> dict[str, StateStore]:
        """Registered stores by name, in registration order (a copy)."""
        return {name: meta.store for name, meta in self._stores.items()}

    def register(self, store: StateStore, restore_callback: RestoreCallback | None = None) -> None:
        """Register an initialised store; a second store of the same name is an error."""
        if self._closed:
            raise ProcessorStateError(
                f"task {self._task_id}: cannot register store {store.name!r}: the state manager is closed"
            )
        name = store.name
        if name in self._stores:
            raise ProcessorStateError(f"task {self._task_id}: store {name!r} is already registered")
        try:
            topic = store_changelog_topic(self._application_id, name)
        except ValueError as exc:
            raise ProcessorStateError(f"task {self._task_id}: {exc}") from exc
        tp = self._changelogs.get(name)
        if tp is not None and getattr(store, "timestamped_values", False):
            self._timestamped.add(tp)
        if tp is not None and tp.topic != topic:
            self._source_changelogs.add(tp)
            topic = tp.topic
        self._stores[name] = StateStoreMetadata(store, restore_callback, topic)
        log.debug("task %s: registered store %s", self._task_id, name)
        offset_store = _offset_managing(store)
        if offset_store is not None and self._exactly_once:
            offset_store.set_transactional()
            self._transactional[name] = offset_store
        if tp is None:
            return
        stored = None if offset_store is None else offset_store.committed_offsets().get(tp)
        if not store.persistent:
            self._volatile.add(tp)
            self._changelog_offsets.pop(tp, None)
        elif stored is not None:
            self._changelog_offsets[tp] = stored
        elif tp in self._changelog_offsets and name + STORE_FILE_SUFFIX not in self._files_at_open:
            raise TaskCorruptedError(
                f"task {self._task_id}: the checkpoint has offset {self._changelog_offsets[tp]} of {tp} but the "
                f"file of store {name!r} was missing or empty"
            )
        elif self._exactly_once and tp not in self._changelog_offsets and offset_store is not None:
            if not offset_store.is_empty():
                raise TaskCorruptedError(
                    f"task {self._task_id}: store {name!r} holds data without the changelog offset it reflects "
                    "(written under at_least_once or by an older version and not closed cleanly): under "
                    "exactly_once it may hold writes of aborted transactions"
                )

    def get_store(self, name: str) -> StateStore | None:
        """The registered store of that name, else the global store of that name, or None."""
        meta = self._stores.get(name)
        return self._global_stores.get(name) if meta is None else meta.store

    def store_metadata(self, name: str) -> StateStoreMetadata | None:
        """Registration details of a store (restore callback, changelog topic), or None."""
        return self._stores.get(name)

    # -- changelogs and the checkpoint ---------------------------------------------------------

    @property
    def changelog_partitions(self) -> dict[str, TopicPartition]:
        """Changelog partition per logged store of this task (a copy)."""
        return dict(self._changelogs)

    @property
    def changelog_offsets(self) -> dict[TopicPartition, int]:
        """Per changelog partition, the next offset: what the stores hold data up to (a copy)."""
        return dict(self._changelog_offsets)

    @property
    def has_checkpoint(self) -> bool:
        return self._checkpoint.path.exists()

    def load_checkpoint(self) -> dict[TopicPartition, int]:
        """Read `.checkpoint` into the changelog offsets of the logged stores; returns them.

        A corrupt file is a TaskCorruptedError: nothing says how far the stores are, so the task
        manager wipes them and they restore from the beginning of their changelogs.
        """
        logged = set(self._changelogs.values())
        try:
            stored = self._checkpoint.read()
        except TaskCorruptedError:
            raise
        except ProcessorStateError as exc:
            raise TaskCorruptedError(f"task {self._task_id}: {exc}") from exc
        self._changelog_offsets = {
            tp: offset for (topic, partition), offset in stored.items() if (tp := TopicPartition(topic, partition)) in logged
        }
        self._loaded_position = self._position_file.read()
        return dict(self._changelog_offsets)

    @property
    def loaded_position(self) -> dict[TopicPartition, int]:
        """The IQv2 position saved with the checkpoint `load_checkpoint()` read (empty without one, or
        after a wipe): per source partition, the last offset whose processing the stores hold (a copy)."""
        return dict(self._loaded_position)

    def changelogs_to_restore(self) -> list[ChangelogPartition]:
        """Each registered logged store with a restore callback, from its stored or checkpointed
        offset (None: the beginning); a transactional store with how to commit what was restored."""
        out = []
        for store, tp in self._changelogs.items():
            meta = self._stores.get(store)
            if meta is not None and meta.restore_callback is not None:
                commit = partial(self._commit_restored, store, tp) if store in self._transactional else None
                source = tp in self._source_changelogs
                out.append(ChangelogPartition(
                    store, tp, self._changelog_offsets.get(tp), meta.restore_callback, commit,
                    source, tp in self._timestamped, self._restore_limits.get(tp) if source else None,
                ))  # fmt: skip
        return out

    @property
    def source_changelog_partitions(self) -> frozenset[TopicPartition]:
        """The changelog partitions that are source topics of the task (their offsets are the consumed ones)."""
        return frozenset(self._source_changelogs)

    def limit_source_changelogs(self, committed: Mapping[TopicPartition, int]) -> None:
        """An active task restores a source-topic changelog up to the group's committed offset only (none
        committed: 0), as Java's StoreChangelogReader: the task processes the records after it again."""
        self._restore_limits = {tp: committed.get(tp, 0) for tp in self._changelogs.values()}

    def _commit_restored(self, store: str, tp: TopicPartition, next_offset: int) -> None:
        """A transactional store holds its changelog up to `next_offset`: commit that (read_committed records)."""
        self._changelog_offsets[tp] = next_offset
        self._transactional[store].commit({tp: next_offset})

    # -- exactly-once: transactional stores (KIP-892) --------------------------------------------

    def use_transactional_stores(self) -> None:
        """Exactly-once: stores that manage their offsets, registered from now on, commit only in
        `commit_stores()`. Call before the stores register."""
        self._exactly_once = True

    @property
    def transactional_stores(self) -> list[str]:
        """Names of the stores that `commit_stores()` commits."""
        return list(self._transactional)

    def commit_stores(self) -> None:
        """Commit each transactional store's data with the changelog offsets it reflects, in one
        SQLite transaction each. Call only when every changelog record of the data written so far
        is committed in Kafka (after the task's transaction committed, or after a restore or a
        standby update); the first failure is raised after trying all."""
        offsets = self._changelog_offsets
        first: BaseException | None = None
        for name, store in self._transactional.items():
            tp = self._changelogs.get(name)
            try:
                store.commit({tp: offsets[tp]} if tp is not None and tp in offsets else {})
            except Exception as exc:
                log.error("task %s: failed to commit store %s: %s", self._task_id, name, exc)
                first = first or exc
        if first is not None:
            raise ProcessorStateError(f"task {self._task_id}: failed to commit stores: {first}") from first

    def update_changelog_offsets(self, next_offsets: Mapping[TopicPartition, int]) -> None:
        """The stores now hold their changelogs up to these next offsets (partitions of other tasks are ignored)."""
        offsets = self._changelog_offsets
        for tp in self._changelogs.values():
            offset = next_offsets.get(tp)
            if offset is not None:
                offsets[tp] = offset

    def checkpoint(self, position: Mapping[TopicPartition, int] | None = None) -> None:
        """Write the changelog offsets to `.checkpoint` (flush the stores first: it promises their content),
        after `position` (an active task's, as of the commit the offsets are from) to `.position`; a
        standby passes none and keeps the file its last active period wrote. Nothing without offsets."""
        offsets = {(tp.topic, tp.partition): o for tp, o in self._changelog_offsets.items() if tp not in self._volatile}
        if offsets:
            if position is not None:
                self._position_file.write(position)
            self._checkpoint.write(offsets)

    def delete_checkpoint(self) -> None:
        """Remove `.checkpoint` and `.position` (exactly-once while a task runs: a crash must not trust its stores)."""
        self._checkpoint.delete()
        self._position_file.delete()

    def wipe(self, *, keep_store_files: bool = False) -> None:
        """Delete the store files, the checkpoint and the position (not the lock): the stores rebuild from their changelogs.

        `keep_store_files`: keep SQLite store files, which hold the offsets their data reflects
        (exactly-once without a checkpoint: only stores that cannot say how far they are go).
        Call before the stores are registered.
        """
        if self._stores:
            raise ProcessorStateError(f"task {self._task_id}: cannot wipe state while stores are open")
        for entry in self._task_dir.iterdir():
            if entry.is_file() and not entry.name.startswith("."):
                if not (keep_store_files and entry.name.endswith(_STORE_FILE_ENDINGS)):
                    entry.unlink()
        self._checkpoint.delete()
        self._position_file.delete()
        self._changelog_offsets = {}
        self._loaded_position = {}
        self._files_at_open = _non_empty_files(self._task_dir)
        if not keep_store_files:
            log.info("task %s: wiped local state in %s to restore it from the changelogs", self._task_id, self._task_dir)

    # -- flush and close ----------------------------------------------------------------------

    def flush(self) -> None:
        """Flush every store in registration order; the first failure is raised after trying all."""
        self._for_each_store("flush", lambda store: store.flush())

    def close(self) -> None:
        """Close every store in registration order, then release the directory lock.

        Stores commit what they hold when closed. The first failure is raised (as
        ProcessorStateError) after every store was tried and the lock released. Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._for_each_store("close", lambda store: store.close())
        finally:
            self._stores.clear()
            self._lock.release()
            log.debug("task %s: state manager closed", self._task_id)

    def _for_each_store(self, action: str, call: Callable[[StateStore], None]) -> None:
        first: BaseException | None = None
        failed = ""
        for name, meta in list(self._stores.items()):
            try:
                call(meta.store)
            except Exception as exc:
                log.error("task %s: failed to %s store %s: %s", self._task_id, action, name, exc)
                if first is None:
                    first, failed = exc, name
        if first is not None:
            raise ProcessorStateError(f"task {self._task_id}: failed to {action} store {failed!r}: {first}") from first

    def __enter__(self) -> ProcessorStateManager:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ProcessorStateManager(task {self._task_id}, {self._task_dir}, stores={list(self._stores)})"


def _offset_managing(store: StateStore) -> OffsetManagingStore | None:
    """The bytes store under `store`'s layers if it manages its changelog offsets, else None."""
    inner: Any = store
    while not isinstance(inner, OffsetManagingStore):
        unwrap = getattr(inner, "wrapped", None)
        if unwrap is None:
            return None
        inner = unwrap()
    return inner if inner.persistent and inner.manages_offsets else None


def _non_empty_files(directory: Path) -> set[str]:
    """Names of the non-empty files in `directory` (what the stores find when they open)."""
    return {entry.name for entry in directory.iterdir() if entry.is_file() and entry.stat().st_size > 0}
