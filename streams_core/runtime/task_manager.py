"""TaskManager: the active tasks of one stream thread, created and closed as assignments change.

Rebalances are eager (aiokafka revokes everything each time), so tasks are committed and closed
(checkpointed) on revocation and created for the new assignment, restoring only the changelog
tail past their checkpoint; their state directories stay on disk so the assignor can give them
back to this instance. Standby tasks replicate other instances' stores from the changelogs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from streams_core.config import StreamsConfig
from streams_core.processor.internals.record_collector import RecordCollector
from streams_core.processor.internals.record_deserializer import DeserializationHandler
from streams_core.processor.task_id import TaskId
from streams_core.runtime.record_collector_impl import RecordCollectorImpl
from streams_core.runtime.standby_task import StandbyTask, read_checkpoint
from streams_core.runtime.store_changelog_reader import ChangelogPartition, StoreChangelogReader
from streams_core.runtime.stream_task import StreamTask
from streams_core.runtime.topic_partition import TopicPartition
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.state.internals.offset_checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.internals.thread_cache import ThreadCache

__all__ = ["TaskManager", "local_task_dirs", "wipe_store_files"]

log = logging.getLogger(__name__)


def local_task_dirs(state_dir: Path) -> dict[TaskId, Path]:
    """Task directories found under `<state.dir>/<application.id>` (tasks with local state)."""
    found: dict[TaskId, Path] = {}
    if state_dir.is_dir():
        for entry in state_dir.iterdir():
            if entry.is_dir():
                try:
                    found[TaskId.parse(entry.name)] = entry
                except ValueError:
                    continue
    return found


def wipe_store_files(task_dir: Path) -> None:
    """Delete a task's store files (not its lock or checkpoint): state to rebuild from the changelog."""
    for entry in task_dir.iterdir():
        if entry.is_file() and not entry.name.startswith("."):
            entry.unlink()
    log.info("wiped local state of %s to restore it from the changelog", task_dir)


class TaskManager:
    """Creates, runs and closes the active tasks of one thread."""

    def __init__(
        self,
        topology: TopologyMetadata,
        config: StreamsConfig,
        record_collector: RecordCollector,
        changelog_reader: StoreChangelogReader,
        *,
        deserialization_handler: DeserializationHandler | None = None,
        wall_clock: Callable[[], int] | None = None,
        task_collector_factory: Callable[[TaskId], Awaitable[RecordCollectorImpl]] | None = None,
        log_prefix: str = "",
    ) -> None:
        self.topology = topology
        self.config = config
        self.app_state_dir = Path(config["state.dir"]) / topology.application_id
        self._collector = record_collector
        self._deserialization_handler = deserialization_handler
        self._wall_clock = wall_clock
        self._log_prefix = log_prefix
        self._reader = changelog_reader
        threads = max(1, config["num.stream.threads"])
        self.cache = ThreadCache(config["statestore.cache.max.bytes"] // threads)
        self._task_collector_factory = task_collector_factory
        self.tasks: dict[TaskId, StreamTask] = {}
        self._by_partition: dict[TopicPartition, StreamTask] = {}
        self.standby_tasks: dict[TaskId, StandbyTask] = {}
        self._standby_by_partition: dict[TopicPartition, StandbyTask] = {}
        self.restored_records = 0
        self.prev_active: frozenset[TaskId] = frozenset()
        self.dropped_records_of_closed_tasks = 0
        self.processed_records_of_closed_tasks = 0

    # -- assignment ---------------------------------------------------------------------------

    async def handle_assignment(
        self,
        active: Mapping[TaskId, Iterable[TopicPartition]],
        standby: Mapping[TaskId, Iterable[TopicPartition]] | None = None,
    ) -> None:
        """Close tasks no longer assigned; create (and restore) the new active and standby tasks."""
        standby = standby or {}
        for task_id in [t for t in self.tasks if t not in active]:
            await self.close_task(task_id)
        for task_id in [t for t in self.standby_tasks if t not in standby]:
            self.close_standby(task_id)
        for task_id, partitions in sorted(active.items()):
            if task_id not in self.tasks:
                await self._create_task(task_id, frozenset(partitions))
        for task_id in sorted(standby):
            if task_id not in self.standby_tasks and self.topology.changelog_partitions(task_id):
                self._create_standby(task_id)
        self.prev_active = frozenset(self.tasks)

    def _open_state(self, task_id: TaskId) -> ProcessorStateManager:
        return ProcessorStateManager(
            task_id,
            self.topology.application_id,
            self.app_state_dir / str(task_id),
            default_key_serde=self.config["default.key.serde"],
            default_value_serde=self.config["default.value.serde"],
        )

    def _changelogs(self, task_id: TaskId) -> dict[str, TopicPartition]:
        return {store: TopicPartition(*tp) for store, tp in self.topology.changelog_partitions(task_id).items()}

    async def _create_task(self, task_id: TaskId, partitions: frozenset[TopicPartition]) -> StreamTask:
        """Open the stores, restore them from their changelogs, then start the processors.

        Under exactly-once a task whose stores have no checkpoint (a crash, not a clean close)
        is wiped and restored from the beginning, and the checkpoint is removed while it runs.
        """
        exactly_once = self.config.exactly_once
        state_manager = self._open_state(task_id)
        task: StreamTask | None = None
        collector: Any = self._collector
        try:
            if self._task_collector_factory is not None:
                collector = await self._task_collector_factory(task_id)
            checkpoint = read_checkpoint(state_manager)
            if exactly_once:
                if not state_manager.checkpoint_file.path.exists():
                    wipe_store_files(state_manager.task_dir)
                state_manager.checkpoint_file.delete()
            changelogs = self._changelogs(task_id)
            task = StreamTask(
                task_id,
                partitions,
                self.topology.builder.build_subtopology(task_id.subtopology, self.config),
                self.config,
                state_manager,
                collector,
                deserialization_handler=self._deserialization_handler,
                wall_clock=self._wall_clock,
                changelog_partitions=changelogs,
                checkpoint_on_commit=not exactly_once,
            )
            task.processor.context.cache = self.cache
            task.processor.init_state_stores()
            to_restore = []
            for store, tp in changelogs.items():
                meta = state_manager.store_metadata(store)
                if meta is not None and meta.restore_callback is not None:
                    to_restore.append(ChangelogPartition(store, tp, checkpoint.get(tp), meta.restore_callback))
            if to_restore:
                result = await self._reader.restore(str(task_id), to_restore)
                task.restored_records = result.total
                task.changelog_offsets.update(result.end_offsets)
            task.processor.init_processors()
        except BaseException:
            if task is not None:
                task.processor.close()
            state_manager.close()
            if collector is not self._collector:
                await collector.close(clean=False)
            raise
        self.tasks[task_id] = task
        for tp in partitions:
            self._by_partition[tp] = task
        self.restored_records += task.restored_records
        log.info(
            "%screated task %s for %s (restored %d records)",
            self._log_prefix, task_id, sorted(partitions), task.restored_records,
        )
        return task

    def _create_standby(self, task_id: TaskId) -> StandbyTask:
        state_manager = self._open_state(task_id)
        try:
            if self.config.exactly_once and not state_manager.checkpoint_file.path.exists():
                # As for an active task: without a checkpoint the stores may hold writes of
                # aborted transactions, which replaying the changelog would not undo.
                wipe_store_files(state_manager.task_dir)
            standby = StandbyTask(
                task_id,
                self.topology.builder.build_subtopology(task_id.subtopology, self.config),
                self.config,
                state_manager,
                self._changelogs(task_id),
            )
            standby.initialize()
        except BaseException:
            state_manager.close()
            raise
        self.standby_tasks[task_id] = standby
        for tp in standby.partitions:
            self._standby_by_partition[tp] = standby
        log.info("%screated standby task %s", self._log_prefix, task_id)
        return standby

    async def close_task(self, task_id: TaskId, *, clean: bool = True) -> None:
        """Close a task (a clean close checkpoints) and, under exactly-once, its producer."""
        task = self.tasks.pop(task_id)
        for tp in task.partitions:
            self._by_partition.pop(tp, None)
        self.dropped_records_of_closed_tasks += task.dropped_records
        self.processed_records_of_closed_tasks += task.processed_records
        try:
            task.close(clean=clean)
        finally:
            if task.record_collector is not self._collector:
                await task.record_collector.close(clean=clean)  # type: ignore[attr-defined]
        log.info("%sclosed task %s%s", self._log_prefix, task_id, "" if clean else " (dirty)")

    def close_standby(self, task_id: TaskId) -> None:
        standby = self.standby_tasks.pop(task_id)
        for tp in standby.partitions:
            self._standby_by_partition.pop(tp, None)
        standby.close()

    async def close_all(self, *, clean: bool = True) -> None:
        """Close every task and standby; the first error is raised after all were tried."""
        first: BaseException | None = None
        for task_id in list(self.tasks):
            try:
                await self.close_task(task_id, clean=clean)
            except Exception as exc:
                log.exception("%sfailed to close task %s", self._log_prefix, task_id)
                first = first or exc
        for task_id in list(self.standby_tasks):
            try:
                self.close_standby(task_id)
            except Exception as exc:
                log.exception("%sfailed to close standby task %s", self._log_prefix, task_id)
                first = first or exc
        if first is not None:
            raise first

    def standby_start_offsets(self) -> dict[TopicPartition, int | None]:
        """Changelog partitions of the standby tasks and where to start reading each."""
        return {tp: s.start_offset(tp) for s in self.standby_tasks.values() for tp in s.partitions}

    def update_standby(self, tp: TopicPartition, records: Iterable[Any]) -> None:
        standby = self._standby_by_partition.get(tp)
        if standby is not None:
            standby.update(tp, records)

    def checkpoint_standbys(self) -> None:
        for standby in self.standby_tasks.values():
            standby.checkpoint()

    def local_state_offset_sums(self) -> dict[TaskId, int]:
        """Per task directory on disk, the sum of its checkpointed changelog offsets."""
        sums = {}
        for task_id, directory in local_task_dirs(self.app_state_dir).items():
            try:
                sums[task_id] = sum(OffsetCheckpoint(directory / CHECKPOINT_FILE_NAME).read().values())
            except Exception:
                sums[task_id] = 0
        return sums

    def local_state_tasks(self) -> frozenset[TaskId]:
        return frozenset(local_task_dirs(self.app_state_dir))

    # -- processing ---------------------------------------------------------------------------

    def task_for(self, tp: TopicPartition) -> StreamTask | None:
        return self._by_partition.get(tp)

    def add_records(self, tp: TopicPartition, records: Iterable[Any]) -> int:
        """Buffer records of a partition in its task; -1 when no task owns it (stale fetch)."""
        task = self._by_partition.get(tp)
        if task is None:
            return -1
        return task.add_records(tp, records)

    def process(self, max_records_per_task: int, now_ms: int) -> int:
        """One round over the tasks; returns the number of records processed."""
        total = 0
        for task in self.tasks.values():
            total += task.process(max_records_per_task, now_ms)
        return total

    def punctuate(self, now_ms: int) -> None:
        for task in self.tasks.values():
            task.punctuate_wall_clock(now_ms)

    def has_buffered(self) -> bool:
        return any(task.partition_group.num_buffered() for task in self.tasks.values())

    def commit_requested(self) -> bool:
        return any(task.commit_requested for task in self.tasks.values())

    def prepare_commit(self) -> list[tuple[StreamTask, dict[TopicPartition, int]]]:
        """Step 1 of a commit: flush the stores of tasks that processed; each one's offsets to commit."""
        return [
            (task, task.prepare_commit())
            for task in self.tasks.values()
            if task.commit_needed or task.commit_requested
        ]

    @property
    def processed_records(self) -> int:
        return self.processed_records_of_closed_tasks + sum(t.processed_records for t in self.tasks.values())

    @property
    def dropped_records(self) -> int:
        return self.dropped_records_of_closed_tasks + sum(t.dropped_records for t in self.tasks.values())
