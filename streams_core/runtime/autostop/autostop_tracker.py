"""AutostopTracker: a stream thread's side of KIP-95 (`autostop.at=eol`).

Each assigned source partition stops at its stop offset: records at or past it are dropped from
fetched batches (`truncate`), and once everything before it was processed the partition is
finished: committed exactly at the stop offset and paused (`update`). A task whose partitions
are all finished reports, after the commit that made its output visible, the end offsets of the
intermediate partitions its sub-topology writes to (`after_round`), which lets downstream
sub-topologies learn their stop offsets. The thread is finished when every task is; the
tracker tells the instance (`on_finished`) whenever that changes. It is `StopAtEndOfLog`'s
thread side (`run_end.ThreadRunEnd`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from streams_core import clients
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.autostop.autostop_manager import AutostopManager
from streams_core.runtime.tasks.stream_task import StreamTask

__all__ = ["AutostopTracker", "PartitionProgress"]

log = logging.getLogger(__name__)

R = TypeVar("R", bound=clients.RawRecord)

_PROGRESS_EVERY_MS = 10_000
_TERMINAL_PROGRESS_EVERY_MS = 500
PartitionProgress = tuple[int, int | None]
"""(next offset to process, stop offset or None while unknown) of one partition."""


class AutostopTracker:
    """Stops one thread's partitions at their stop offsets and reports its finished tasks."""

    def __init__(
        self,
        manager: AutostopManager,
        consumer: clients.Consumer,
        sink_topics: Mapping[int, frozenset[str]],
        *,
        thread_name: str = "",
        on_finished: Callable[[], None] = lambda: None,
        log_prefix: str = "",
    ) -> None:
        self._manager = manager
        self._thread_name = thread_name
        self._on_finished = on_finished
        self._all_finished = False
        self._consumer = consumer
        self._sink_topics = sink_topics
        self._log_prefix = log_prefix
        self._stops: dict[TopicPartition, int] = {}
        self._finished: set[TopicPartition] = set()
        self._reported: set[TaskId] = set()
        self._positions: dict[TopicPartition, int] = {}
        self._last_progress_ms = 0
        self._last_progress_log_ms = 0

    async def on_assignment(self, *, leader: bool, idle: bool = False) -> None:
        """Before the new tasks run: know the run (the leader may start one; an idle member, without
        active tasks, does not wait for it); forget the old partitions."""
        await self._manager.establish_run(leader=leader, wait=not idle)
        self._all_finished = False  # new tasks: `after_round` tells the instance again once they finish
        self._stops.clear()
        self._finished.clear()
        self._reported.clear()
        self._positions.clear()

    @property
    def finished(self) -> bool:
        """Every task finished and reported, as of the last round the thread was RUNNING."""
        return self._all_finished

    def on_revoked(self) -> None:
        self._all_finished = False

    def truncate(self, tp: TopicPartition, records: Sequence[R]) -> Sequence[R]:
        """The records before `tp`'s stop offset.

        Asks the manager when `update` has not learnt the stop yet: the first batch after an
        assignment (a restart into a run under way, a partition moved here) already holds
        records past it, and queued they would be processed before the next `update`.
        """
        stop = self._stops.get(tp)
        if stop is None:
            stop = self._manager.stop_offset(tp)
            if stop is not None:
                self._stops[tp] = stop
        if stop is None or not records or records[-1].offset < stop:
            return records
        return [r for r in records if r.offset < stop]

    async def update(self, tasks: Mapping[TaskId, StreamTask]) -> bool:
        """Learn new stop offsets; finish and pause drained partitions. True when a task just finished."""
        manager = self._manager
        just_finished = False
        for task in tasks.values():
            open_partitions = 0
            for tp in task.partitions:
                if tp in self._finished:
                    continue
                stop = self._stops.get(tp)
                if stop is None:
                    stop = manager.stop_offset(tp)
                    if stop is None:
                        open_partitions += 1
                        continue
                    self._stops[tp] = stop
                if task.num_buffered(tp) or not await self._reached(task, tp, stop):
                    open_partitions += 1
                    continue
                task.finish_partition(tp, stop)
                self._finished.add(tp)
                self._consumer.pause(tp)
                log.info("%sautostop: %s finished at its stop offset %d", self._log_prefix, tp, stop)
            if not open_partitions and task.id not in self._reported:
                just_finished = True
        return just_finished

    async def _reached(self, task: StreamTask, tp: TopicPartition, stop: int) -> bool:
        committable = task.committable_offset(tp)
        if committable is not None and committable >= stop:
            return True
        position = await self._consumer.position(tp)
        self._positions[tp] = position
        return position >= stop

    def commit_position(self, tp: TopicPartition, position: int) -> int | None:
        """A drained partition commits at the consumer's position, never past its stop offset
        (None while that is unknown)."""
        stop = self._stops.get(tp)
        return None if stop is None else min(position, stop)

    def task_finished(self, task: StreamTask) -> bool:
        return all(tp in self._finished for tp in task.partitions)

    async def after_round(self, tasks: Mapping[TaskId, StreamTask], *, running: bool, processed: int, now_ms: int) -> None:
        """Report finished tasks after their commit; tell the instance once every task is finished
        (and the thread RUNNING); otherwise report progress."""
        await self._report_finished_tasks(tasks)
        finished = running and self._every_task_reported(tasks)
        if finished != self._all_finished:
            self._all_finished = finished
            log.info("%sautostop: %s", self._log_prefix, "every task finished" if finished else "tasks to process")
            self._on_finished()
        if not finished:
            self.report_progress(tasks, processed, now_ms)

    async def _report_finished_tasks(self, tasks: Mapping[TaskId, StreamTask]) -> None:
        """Report every finished task whose output is committed (its intermediate partitions' end offsets)."""
        manager = self._manager
        for task_id, task in tasks.items():
            if task_id in self._reported or task.commit_needed or not self.task_finished(task):
                continue
            sinks = self._sink_topics.get(task_id.subtopology, frozenset())
            intermediates = [tp for tp in manager.intermediate_partitions if tp.topic in sinks]
            if intermediates and not manager.reported(task.partitions, intermediates):
                await manager.report_done(task.partitions, intermediates)
            self._reported.add(task_id)

    def _every_task_reported(self, tasks: Mapping[TaskId, StreamTask]) -> bool:
        """Every task finished and reported (a thread without tasks is finished too)."""
        return all(task_id in self._reported for task_id in tasks)

    def progress(self, tasks: Mapping[TaskId, StreamTask]) -> dict[TopicPartition, PartitionProgress]:
        """Per assigned partition: where processing is and where it stops."""
        out: dict[TopicPartition, PartitionProgress] = {}
        for task in tasks.values():
            for tp in task.partitions:
                at = task.committable_offset(tp)
                if at is None:
                    at = self._positions.get(tp, 0)
                stop = self._stops.get(tp)
                out[tp] = (min(at, stop) if stop is not None else at, stop)
        return out

    def report_progress(self, tasks: Mapping[TaskId, StreamTask], processed: int, now_ms: int) -> None:
        """A batch run's progress: on a terminal a status line every 0.5 s, in the log every 10 s."""
        on_terminal = sys.stderr.isatty()
        if now_ms - self._last_progress_ms < (_TERMINAL_PROGRESS_EVERY_MS if on_terminal else _PROGRESS_EVERY_MS):
            return
        self._last_progress_ms = now_ms
        progress = self.progress(tasks)
        to_go = sum(stop - at for at, stop in progress.values() if stop is not None)
        if on_terminal:
            sys.stderr.write(f"\r{self._thread_name}: batch run, {processed} processed, {to_go} to go   ")
            sys.stderr.flush()
        if now_ms - self._last_progress_log_ms >= _PROGRESS_EVERY_MS:
            self._last_progress_log_ms = now_ms
            unknown = sum(1 for _, stop in progress.values() if stop is None)
            log.info(
                "%sbatch run: %d records processed, %d to go over %d partitions (%d waiting for a stop offset)",
                self._log_prefix, processed, to_go, len(progress), unknown,
            )  # fmt: skip

    def metrics(self, tasks: Mapping[TaskId, StreamTask]) -> dict[str, Any]:
        """KIP-95 progress for the metrics: per assigned partition the next offset to process and the stop offset."""
        progress = self.progress(tasks)
        return {
            "finished": self._all_finished,
            "records_to_go": sum(stop - at for at, stop in progress.values() if stop is not None),
            "partitions": {str(tp): {"offset": at, "stop_offset": stop} for tp, (at, stop) in sorted(progress.items())},
        }
