"""StandbyTask: a replica of a stateful task's stores, kept current by tailing their changelogs.

It runs no processors: the stream thread's restore consumer reads the changelog partitions and
the records are applied through the stores' restore callbacks. Its checkpoint (written on commit
and close) lets the task become active here with only the changelog tail to restore.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from streams_core.config import StreamsConfig
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.processor.internals.task_processor import TaskProcessor
from streams_core.processor.task_id import TaskId
from streams_core.runtime.topic_partition import TopicPartition
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.store import RestoreCallback

__all__ = ["StandbyTask", "read_checkpoint"]

log = logging.getLogger(__name__)


class _NoRecords:
    """The collector of a standby: its stores are only restored, never written by processors."""

    def send(self, *args: Any) -> None:
        raise AssertionError("a standby task does not produce records")

    def partitions_for(self, topic: str) -> int:
        raise AssertionError("a standby task does not produce records")


def read_checkpoint(state_manager: ProcessorStateManager) -> dict[TopicPartition, int]:
    """The task's `.checkpoint` as {changelog partition: next offset to restore from}."""
    return {TopicPartition(topic, partition): offset for (topic, partition), offset in state_manager.checkpoint_file.read().items()}


class StandbyTask:
    """Stores of one task on a non-owning instance, fed from the changelogs."""

    def __init__(
        self,
        task_id: TaskId,
        topology: ProcessorTopology,
        config: StreamsConfig,
        state_manager: ProcessorStateManager,
        changelog_partitions: Mapping[str, TopicPartition],
    ) -> None:
        self.id = task_id
        self.state_manager = state_manager
        self.changelog_partitions = dict(changelog_partitions)
        self.processor = TaskProcessor(task_id, topology, config, state_manager, _NoRecords())
        self._callbacks: dict[TopicPartition, RestoreCallback] = {}
        self.offsets: dict[TopicPartition, int] = {}
        self.updated_records = 0

    def __repr__(self) -> str:
        return f"StandbyTask({self.id})"

    def initialize(self) -> None:
        """Open the stores and read where the checkpoint says they are."""
        self.processor.init_state_stores()
        for store, tp in self.changelog_partitions.items():
            meta = self.state_manager.store_metadata(store)
            if meta is not None and meta.restore_callback is not None:
                self._callbacks[tp] = meta.restore_callback
        checkpoint = read_checkpoint(self.state_manager)
        self.offsets = {tp: checkpoint[tp] for tp in self._callbacks if tp in checkpoint}

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return frozenset(self._callbacks)

    def start_offset(self, tp: TopicPartition) -> int | None:
        return self.offsets.get(tp)

    def update(self, tp: TopicPartition, records: Iterable[Any]) -> None:
        """Apply changelog records of one partition and remember the next offset."""
        batch = list(records)
        if not batch:
            return
        self._callbacks[tp]([(r.key, r.value) for r in batch])
        self.offsets[tp] = batch[-1].offset + 1
        self.updated_records += len(batch)

    def checkpoint(self) -> None:
        """Flush the stores, then record how far they are."""
        self.state_manager.flush()
        self.state_manager.checkpoint_file.write({(tp.topic, tp.partition): o for tp, o in self.offsets.items()})

    def close(self) -> None:
        try:
            self.checkpoint()
        finally:
            self.processor.close()
        log.info("standby task %s closed at %s", self.id, {str(tp): o for tp, o in self.offsets.items()})
