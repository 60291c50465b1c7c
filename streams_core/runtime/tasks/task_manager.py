"""TaskManager: the active tasks of one stream thread, created and closed as assignments change.

Rebalances are eager (aiokafka revokes everything each time), so tasks are committed and closed
(checkpointed) on revocation and created for the new assignment, restoring only the changelog
tail past their checkpoint; their state directories stay on disk so the assignor can give them
back to this instance. Standby tasks replicate other instances' stores from the changelogs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from time import perf_counter
from typing import Any

from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.store import StateStore
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.errors import TaskCorruptedError, TaskDirectoryLockedError
from streams_core.processor.internals.record_deserializer import DeserializationHandler
from streams_core.runtime.assignment.streams_partition_assignor import TaskStates
from streams_core.runtime.restore.standby_task import StandbyTask
from streams_core.runtime.restore.store_changelog_reader import StoreChangelogReader
from streams_core.runtime.tasks.flow_control import FlowControl
from streams_core.runtime.tasks.processing_guarantee import ProcessingGuarantee
from streams_core.runtime.tasks.record_collector_impl import RecordCollectorImpl
from streams_core.runtime.tasks.stream_task import StreamTask
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.state.internals.offset_checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.internals.sqlite_database import STORE_FILE_SUFFIX, stored_changelog_offsets
from streams_core.state.internals.thread_cache import ThreadCache

__all__ = ["PROCESS_CHUNK", "TASK_LOCK_WAIT_S", "TaskManager", "local_task_dirs"]

TASK_LOCK_WAIT_S = 10.0
"""How long a new task waits for a directory another process still holds (see `_once_unlocked`)."""


async def _now(create: Callable[[TaskId], object], task_id: TaskId) -> None:
    create(task_id)

log = logging.getLogger(__name__)

PROCESS_CHUNK = 32
"""Records a task processes before the slice deadline is checked again."""


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


class TaskManager:
    """Creates, runs and closes the active tasks of one thread."""

    def __init__(
        self,
        topology: TopologyMetadata,
        config: StreamsConfig,
        guarantee: ProcessingGuarantee,
        changelog_reader: StoreChangelogReader,
        *,
        flow_control: FlowControl,
        deserialization_handler: DeserializationHandler | None = None,
        wall_clock: Callable[[], int] | None = None,
        global_stores: Callable[[], Mapping[str, StateStore]] | None = None,
        cache_max_bytes: int | None = None,
        log_prefix: str = "",
    ) -> None:
        """`cache_max_bytes`: this thread's share of `statestore.cache.max.bytes` (all of it when None)."""
        self.topology = topology
        self.config = config
        self.app_state_dir = Path(config["state.dir"]) / topology.application_id
        self._guarantee = guarantee
        self._global_stores = global_stores or dict
        self._deserialization_handler = deserialization_handler
        self._wall_clock = wall_clock
        self._log_prefix = log_prefix
        self._reader = changelog_reader
        self._flow_control = flow_control
        self.cache = ThreadCache(config["statestore.cache.max.bytes"] if cache_max_bytes is None else cache_max_bytes)
        self.tasks: dict[TaskId, StreamTask] = {}
        self._by_partition: dict[TopicPartition, StreamTask] = {}
        self.standby_tasks: dict[TaskId, StandbyTask] = {}
        self._standby_by_partition: dict[TopicPartition, StandbyTask] = {}
        self.restored_records = 0
        self.corrupted_tasks = 0
        """Task creations that found damaged local state and wiped it (`_wipe_corrupted`)."""
        self.prev_active: frozenset[TaskId] = frozenset()
        self._closed_totals = {"processed": 0, "dropped": 0}
        """Counters of tasks closed so far (the live tasks' are summed on demand)."""

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
                await self._once_unlocked(task_id, partial(self._create_task, task_id, frozenset(partitions)))
        for task_id in sorted(standby):
            if task_id not in self.standby_tasks and self.topology.changelog_partitions(task_id):
                await self._once_unlocked(task_id, partial(_now, self._create_standby, task_id))
        self.prev_active = frozenset(self.tasks)

    async def _once_unlocked(self, task_id: TaskId, create: Callable[[], Awaitable[object]]) -> None:
        """`create()`, retried while another process holds the task's directory, for at most
        `TASK_LOCK_WAIT_S`: a worker that lost the task in a rebalance it took no part in (it was busy
        in the previous one's callback) gives it up at its next poll, as Kafka Streams retries a
        directory another thread still holds. Then the TaskDirectoryLockedError is raised."""
        deadline = time.monotonic() + TASK_LOCK_WAIT_S
        while True:
            try:
                await create()
                return
            except TaskDirectoryLockedError as exc:
                if time.monotonic() >= deadline:
                    raise
                log.info("%stask %s: %s; retrying", self._log_prefix, task_id, exc, extra={"task": str(task_id)})
                await asyncio.sleep(0.1)

    def _open_state(self, task_id: TaskId, *, active: bool) -> ProcessorStateManager:
        """Lock the task's directory and let the guarantee load, keep or wipe what it holds."""
        changelogs = {store: TopicPartition(*tp) for store, tp in self.topology.changelog_partitions(task_id).items()}
        state_manager = ProcessorStateManager(
            task_id,
            self.topology.application_id,
            self.app_state_dir / str(task_id),
            default_key_serde=self.config["default.key.serde"],
            default_value_serde=self.config["default.value.serde"],
            changelog_partitions=changelogs,
            global_stores=self._global_stores(),
        )
        try:
            self._guarantee.prepare_state(state_manager, active=active)
        except BaseException:
            state_manager.close()
            raise
        return state_manager

    def _wipe_corrupted(self, task_id: TaskId, exc: TaskCorruptedError) -> None:
        """Delete a task's damaged local state, so that its next creation restores it from scratch."""
        self.corrupted_tasks += 1
        log.warning(
            "%stask %s: %s; wiping its local state to restore it from the changelogs", self._log_prefix, task_id, exc,
            extra={"task": str(task_id)},
        )
        with ProcessorStateManager(task_id, self.topology.application_id, self.app_state_dir / str(task_id)) as manager:
            manager.wipe()

    async def _create_task(self, task_id: TaskId, partitions: frozenset[TopicPartition]) -> StreamTask:
        """Create a task; damaged local state (TaskCorruptedError) is wiped and the task created again."""
        try:
            return await self._create_task_once(task_id, partitions)
        except TaskCorruptedError as exc:
            self._wipe_corrupted(task_id, exc)
        return await self._create_task_once(task_id, partitions)

    async def _create_task_once(self, task_id: TaskId, partitions: frozenset[TopicPartition]) -> StreamTask:
        """Open the stores, restore them from their changelogs, then start the processors."""
        state_manager = self._open_state(task_id, active=True)
        task: StreamTask | None = None
        collector = None
        try:
            sink_topics = self.topology.topic_groups[task_id.subtopology].sink_topics
            collector = await self._guarantee.task_collector(task_id, sink_topics)
            task = StreamTask(
                task_id,
                partitions,
                self.topology.builder.build_subtopology(task_id.subtopology, self.config),
                self.config,
                state_manager,
                collector,
                deserialization_handler=self._deserialization_handler,
                wall_clock=self._wall_clock,
                checkpoint_on_commit=self._guarantee.checkpoint_on_commit,
                lag=self._flow_control.lag_provider,
            )
            for tp, offset in (await self._guarantee.resume_positions(partitions)).items():
                task.resume_at(tp, offset)
            task.processor.context.cache = self.cache
            task.processor.init_state_stores()
            committed = await self._guarantee.committed_offsets(partitions)
            state_manager.limit_source_changelogs({tp: found.offset for tp, found in committed.items()})
            to_restore = state_manager.changelogs_to_restore()
            if to_restore:
                result = await self._reader.restore(str(task_id), to_restore)
                task.restored_records = result.total
                state_manager.update_changelog_offsets(result.end_offsets)
                state_manager.commit_stores()  # exactly-once: what was restored, with the offsets reached
            task.initialize_task_time_and_processor_metadata(committed)
            task.processor.init_processors()
        except BaseException:
            if task is not None:
                task.processor.close()
            state_manager.close()
            if collector is not None:
                await self._guarantee.release_task_collector(collector, clean=False)
            raise
        self.tasks[task_id] = task
        for tp in partitions:
            self._by_partition[tp] = task
        self.restored_records += task.restored_records
        log.info(
            "%screated task %s for %s (restored %d records)",
            self._log_prefix, task_id, sorted(partitions), task.restored_records,
            extra={"task": str(task_id)},
        )
        return task

    def _create_standby(self, task_id: TaskId) -> StandbyTask:
        try:
            return self._create_standby_once(task_id)
        except TaskCorruptedError as exc:
            self._wipe_corrupted(task_id, exc)
        return self._create_standby_once(task_id)

    def _create_standby_once(self, task_id: TaskId) -> StandbyTask:
        state_manager = self._open_state(task_id, active=False)
        try:
            standby = StandbyTask(
                task_id,
                self.topology.builder.build_subtopology(task_id.subtopology, self.config),
                self.config,
                state_manager,
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
        totals = self._closed_totals
        totals["processed"] += task.processed_records
        totals["dropped"] += task.dropped_records
        try:
            task.close(clean=clean)
        finally:
            await self._guarantee.release_task_collector(task.record_collector, clean=clean)
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
        """Per task directory on disk, the sum of its checkpointed changelog offsets; without a
        checkpoint (exactly-once while running or after a crash) of the offsets its store files hold."""
        sums = {}
        for task_id, directory in local_task_dirs(self.app_state_dir).items():
            try:
                offsets = OffsetCheckpoint(directory / CHECKPOINT_FILE_NAME).read()
                if not offsets:
                    for store_file in directory.glob(f"*{STORE_FILE_SUFFIX}"):
                        offsets.update(stored_changelog_offsets(store_file))
                sums[task_id] = sum(offsets.values())
            except Exception:
                sums[task_id] = 0
        return sums

    def task_states(self) -> TaskStates:
        """What the thread reports to the assignor for stickiness (KIP-441)."""
        sums = self.local_state_offset_sums()
        return TaskStates(prev_active=self.prev_active, with_local_state=frozenset(sums), offset_sums=sums)

    # -- the tasks' stores, for interactive queries (`state_store_providers.ThreadStores`) -----

    def active_states(self) -> list[tuple[TaskId, ProcessorStateManager]]:
        return [(task_id, task.state_manager) for task_id, task in self.tasks.items()]

    def standby_states(self) -> list[tuple[TaskId, ProcessorStateManager]]:
        return [(task_id, task.state_manager) for task_id, task in self.standby_tasks.items()]

    def readable_standby_states(self) -> list[tuple[TaskId, ProcessorStateManager]]:
        return [(task_id, task.state_manager) for task_id, task in self.standby_tasks.items() if task.caught_up]

    def input_position(self, task_id: TaskId) -> Mapping[TopicPartition, int]:
        task = self.tasks.get(task_id)
        return {} if task is None else task.position

    def changelog_highwater(self, partition: TopicPartition) -> int | None:
        return self._reader.highwater(partition)

    async def changelog_end_offsets(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        """End offsets of changelog partitions, asked with the restore consumer."""
        return await self._reader.end_offsets(partitions) if partitions else {}

    # -- processing ---------------------------------------------------------------------------

    def add_records(self, tp: TopicPartition, records: Iterable[Any]) -> int:
        """Buffer records of a partition in its task; -1 when no task owns it (stale fetch)."""
        task = self._by_partition.get(tp)
        if task is None:
            return -1
        return task.add_records(tp, records)

    def process(self, max_records_per_task: int, now_ms: int, slice_s: float | None = None) -> int:
        """Rounds over the tasks, `PROCESS_CHUNK` records each, until up to `max_records_per_task`
        each are done or `slice_s` seconds have passed; returns the number of records processed.

        The time bound keeps the event loop free for queries and heartbeats: a slice ends within
        one chunk of one task after its deadline, whatever a record costs.
        """
        if slice_s is None:
            return sum(task.process(max_records_per_task, now_ms) for task in self.tasks.values())
        deadline = perf_counter() + slice_s
        chunk = min(PROCESS_CHUNK, max_records_per_task)
        total = 0
        for _ in range(0, max_records_per_task, chunk):
            done = 0
            for task in self.tasks.values():
                done += task.process(chunk, now_ms)
                if perf_counter() >= deadline:
                    return total + done
            total += done
            if not done:
                break
        return total

    def apply_flow_control(self) -> None:
        """Pause partitions whose queue is full or that run ahead in time; resume drained ones."""
        self._flow_control.apply(self.tasks.values())

    def punctuate(self, now_ms: int) -> int:
        """Run the wall-clock punctuations that are due; returns how many tasks punctuated."""
        return sum(task.punctuate_wall_clock(now_ms) for task in self.tasks.values())

    def task_metrics(self, highwater: Callable[[TopicPartition], int | None]) -> dict[str, dict[str, Any]]:
        """Per active task: its counters and, per source partition, records buffered, skipped, paused
        and `records_lag`: the end offset as of the last fetch (`highwater`) minus the next offset to
        process (None before a fetch)."""
        found: dict[str, dict[str, Any]] = {}
        for task_id, task in sorted(self.tasks.items()):
            partitions = {}
            for tp in sorted(task.partitions):
                end, at = highwater(tp), task.committable_offset(tp)
                lag = None if end is None or at is None else max(0, end - at)
                partitions[str(tp)] = {**task.partition_metrics(tp), "records_lag": lag}
            found[str(task_id)] = {
                "processed_records": task.processed_records,
                "dropped_records": task.dropped_records,
                "restored_records": task.restored_records,
                "partitions": partitions,
            }
        return found

    def record_collectors(self) -> list[RecordCollectorImpl]:
        """The distinct collectors the tasks write through (the thread's, or under exactly-once each task's own)."""
        return list({id(task.record_collector): task.record_collector for task in self.tasks.values()}.values())

    def has_buffered(self) -> bool:
        return any(task.num_buffered() for task in self.tasks.values())

    def commit_requested(self) -> bool:
        return any(task.commit_requested for task in self.tasks.values())

    def prepare_commit(self) -> list[tuple[StreamTask, dict[TopicPartition, OffsetAndMetadata]]]:
        """Step 1 of a commit: flush the stores of tasks that processed; each one's offsets to commit."""
        return [
            (task, task.prepare_commit())
            for task in self.tasks.values()
            if task.commit_needed or task.commit_requested
        ]

    @property
    def processed_records(self) -> int:
        return self._closed_totals["processed"] + sum(t.processed_records for t in self.tasks.values())

    @property
    def dropped_records(self) -> int:
        return self._closed_totals["dropped"] + sum(t.dropped_records for t in self.tasks.values())

    @property
    def pause_count(self) -> int:
        """Partitions flow control paused, over every task this thread had."""
        return self._flow_control.pause_count

    @property
    def resume_count(self) -> int:
        return self._flow_control.resume_count
