"""StandbyTask: a replica of a stateful task's stores, kept current by tailing their changelogs.

It runs no processors: the stream thread's restore consumer reads the changelog partitions and
the records are applied through the stores' restore callbacks. Its checkpoint (written on commit
and close) lets the task become active here with only the changelog tail to restore.
A changelog that is a source topic is read to its end (Java stops a standby at the group's
committed offset): a copy found past the committed offset when the task becomes active here is
restored from scratch (docs/dsl.md, "topology.optimization").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.processor.internals.task_processor import TaskProcessor
from streams_core.state.internals.processor_state_manager import ProcessorStateManager

__all__ = ["NoRecords", "StandbyTask"]

log = logging.getLogger(__name__)


class NoRecords:
    """The collector of tasks that never produce: standbys (stores only restored) and the global task."""

    def send(self, *args: Any) -> None:
        raise AssertionError("this task does not produce records")

    def partitions_for(self, topic: str) -> int:
        raise AssertionError("this task does not produce records")


class StandbyTask:
    """Stores of one task on a non-owning instance, fed from the changelogs.

    Its state manager owns the changelog offsets and the checkpoint, as for an active task.
    """

    def __init__(
        self,
        task_id: TaskId,
        topology: ProcessorTopology,
        config: StreamsConfig,
        state_manager: ProcessorStateManager,
    ) -> None:
        self.id = task_id
        self.state_manager = state_manager
        self.processor = TaskProcessor(task_id, topology, config, state_manager, NoRecords())
        self._callbacks: dict[TopicPartition, Callable[[Sequence[Any]], None]] = {}
        self.updated_records = 0
        self.caught_up = False
        """Whether its changelogs once reached their ends: until then a stale read does not use this copy,
        which may hold only the start of its changelog (an existing key would answer 404)."""

    def __repr__(self) -> str:
        return f"StandbyTask({self.id})"

    def initialize(self) -> None:
        """Open the stores; the state manager knows from its checkpoint how far they are."""
        self.processor.init_state_stores()
        self._callbacks = {cp.partition: cp.apply for cp in self.state_manager.changelogs_to_restore()}

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return frozenset(self._callbacks)

    def start_offset(self, tp: TopicPartition) -> int | None:
        return self.state_manager.changelog_offsets.get(tp)

    def update(self, tp: TopicPartition, records: Iterable[Any]) -> None:
        """Apply changelog records of one partition and note the next offset."""
        batch = list(records)
        if not batch:
            return
        self._callbacks[tp](batch)
        self.state_manager.update_changelog_offsets({tp: batch[-1].offset + 1})
        self.updated_records += len(batch)

    def checkpoint(self) -> None:
        """Flush the stores, then record how far they are (transactional stores: in their own file,
        committed with their data: a standby applies only committed changelog records)."""
        self.state_manager.flush()
        self.state_manager.commit_stores()
        self.state_manager.checkpoint()

    def close(self) -> None:
        try:
            self.checkpoint()
        finally:
            self.processor.close()
        log.info("standby task %s closed at %s", self.id, {str(tp): o for tp, o in self.state_manager.changelog_offsets.items()})
