"""TaskManager: the active tasks of one stream thread, created and closed as assignments change.

Rebalances are eager (aiokafka revokes everything each time), so tasks are committed and closed
on revocation and created for the new assignment; their state directories (and, later, local
state) stay on disk so the assignor can give them back to this instance.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from streams_core.config import StreamsConfig
from streams_core.processor.internals.record_collector import RecordCollector
from streams_core.processor.internals.record_deserializer import DeserializationHandler
from streams_core.processor.task_id import TaskId
from streams_core.runtime.stream_task import StreamTask
from streams_core.runtime.topic_partition import TopicPartition
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.state.internals.processor_state_manager import ProcessorStateManager

__all__ = ["TaskManager", "local_task_dirs"]

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


class TaskManager:
    """Creates, runs and closes the active tasks of one thread."""

    def __init__(
        self,
        topology: TopologyMetadata,
        config: StreamsConfig,
        record_collector: RecordCollector,
        *,
        deserialization_handler: DeserializationHandler | None = None,
        wall_clock: Callable[[], int] | None = None,
        log_prefix: str = "",
    ) -> None:
        self.topology = topology
        self.config = config
        self.app_state_dir = Path(config["state.dir"]) / topology.application_id
        self._collector = record_collector
        self._deserialization_handler = deserialization_handler
        self._wall_clock = wall_clock
        self._log_prefix = log_prefix
        self.tasks: dict[TaskId, StreamTask] = {}
        self._by_partition: dict[TopicPartition, StreamTask] = {}
        self.prev_active: frozenset[TaskId] = frozenset()
        self.dropped_records_of_closed_tasks = 0
        self.processed_records_of_closed_tasks = 0

    # -- assignment ---------------------------------------------------------------------------

    def handle_assignment(self, active: Mapping[TaskId, Iterable[TopicPartition]]) -> None:
        """Close tasks no longer assigned and create the new ones (initialised, ready to run)."""
        for task_id in [t for t in self.tasks if t not in active]:
            self.close_task(task_id)
        for task_id, partitions in sorted(active.items()):
            if task_id not in self.tasks:
                self._create_task(task_id, frozenset(partitions))
        self.prev_active = frozenset(self.tasks)

    def _create_task(self, task_id: TaskId, partitions: frozenset[TopicPartition]) -> StreamTask:
        topology = self.topology.builder.build_subtopology(task_id.subtopology, self.config)
        state_manager = ProcessorStateManager(
            task_id,
            self.topology.application_id,
            self.app_state_dir / str(task_id),
            default_key_serde=self.config["default.key.serde"],
            default_value_serde=self.config["default.value.serde"],
        )
        try:
            task = StreamTask(
                task_id,
                partitions,
                topology,
                self.config,
                state_manager,
                self._collector,
                deserialization_handler=self._deserialization_handler,
                wall_clock=self._wall_clock,
            )
            task.initialize()
        except BaseException:
            state_manager.close()
            raise
        self.tasks[task_id] = task
        for tp in partitions:
            self._by_partition[tp] = task
        log.info("%screated task %s for %s", self._log_prefix, task_id, sorted(partitions))
        return task

    def close_task(self, task_id: TaskId) -> None:
        task = self.tasks.pop(task_id)
        for tp in task.partitions:
            self._by_partition.pop(tp, None)
        self.dropped_records_of_closed_tasks += task.dropped_records
        self.processed_records_of_closed_tasks += task.processed_records
        task.close()
        log.info("%sclosed task %s", self._log_prefix, task_id)

    def close_all(self) -> None:
        """Close every task; the first error is raised after all were tried."""
        first: BaseException | None = None
        for task_id in list(self.tasks):
            try:
                self.close_task(task_id)
            except Exception as exc:
                log.exception("%sfailed to close task %s", self._log_prefix, task_id)
                first = first or exc
        if first is not None:
            raise first

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

    def prepare_commit(self) -> tuple[list[StreamTask], dict[TopicPartition, int]]:
        """Step 1 of a commit: flush the stores of tasks that processed; their offsets to commit."""
        tasks = [task for task in self.tasks.values() if task.commit_needed or task.commit_requested]
        offsets: dict[TopicPartition, int] = {}
        for task in tasks:
            offsets.update(task.prepare_commit())
        return tasks, offsets

    @property
    def processed_records(self) -> int:
        return self.processed_records_of_closed_tasks + sum(t.processed_records for t in self.tasks.values())

    @property
    def dropped_records(self) -> int:
        return self.dropped_records_of_closed_tasks + sum(t.dropped_records for t in self.tasks.values())
