"""StandbyUpdater: keeps one stream thread's standby tasks current from their changelogs.

Kafka Streams updates standbys with the restore consumer between processing rounds
(`StoreChangelogReader` in its standby mode). Ours: after each assignment the restore consumer
is assigned the standbys' changelog partitions from their checkpoints; each loop round applies
what those partitions have (no waiting, at most `STANDBY_BATCH` records, so queries and
heartbeats keep running) and notes which standbys once reached their changelogs' ends (only
those answer stale queries).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.restore.standby_task import StandbyTask
from streams_core.runtime.restore.store_changelog_reader import StoreChangelogReader

__all__ = ["STANDBY_BATCH", "StandbyTasks", "StandbyUpdater"]

STANDBY_BATCH = 500
"""Changelog records a standby update applies per loop round."""


class StandbyTasks(Protocol):
    """The task manager, as the updater sees it: the standby tasks and where each changelog starts."""

    @property
    def standby_tasks(self) -> Mapping[TaskId, StandbyTask]: ...

    def standby_start_offsets(self) -> dict[TopicPartition, int | None]: ...

    def update_standby(self, tp: TopicPartition, records: Iterable[Any]) -> None: ...


class StandbyUpdater:
    """Feeds one thread's standby tasks from the restore consumer's changelog partitions."""

    __slots__ = ("_reader", "_tasks")

    def __init__(self, reader: StoreChangelogReader, tasks: StandbyTasks) -> None:
        self._reader = reader
        self._tasks = tasks

    async def assign(self) -> None:
        """After an assignment: read the current standbys' changelogs, each from its checkpoint."""
        await self._reader.assign_standby_partitions(self._tasks.standby_start_offsets())

    async def update(self) -> None:
        """Apply whatever the standby changelogs have now; note which standbys caught up."""
        tasks = self._tasks
        if not tasks.standby_tasks:
            return
        reader = self._reader
        for tp, records in (await reader.poll_standby(STANDBY_BATCH)).items():
            tasks.update_standby(tp, records)
        for standby in tasks.standby_tasks.values():
            if not standby.caught_up:
                standby.caught_up = await reader.reached_ends(standby.partitions)
