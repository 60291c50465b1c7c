"""StreamsRebalanceListener: the main consumer's rebalance callbacks, which change a thread's tasks.

Kafka Streams' `StreamsRebalanceListener`. The classic group rebalances eagerly (aiokafka revokes
every partition each time): on revocation the thread's tasks are committed and closed, then, before
the consumer joins again, the changelog end offsets the assignor needs are refreshed if this member
leads; on assignment the new tasks are created. A streams group member (KIP-1071) revokes only the
partitions of the tasks the broker takes away: the tasks are committed and those closed, the others
keep running; a fenced member's tasks are lost (`on_partitions_lost`: closed without committing). Each callback runs under the thread's lock, so
tasks change only between the loop's batches; errors are handed to the loop, not to aiokafka.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from streams_core import clients
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment.streams_partition_assignor import StreamsPartitionAssignor
from streams_core.runtime.autostop.run_end import ThreadRunEnd
from streams_core.runtime.restore.standby_updater import StandbyUpdater
from streams_core.runtime.tasks.task_manager import TaskManager
from streams_core.runtime.threads.thread_clients import ThreadClients
from streams_core.runtime.threads.thread_state import ThreadState

__all__ = ["RebalancingThread", "StreamsRebalanceListener"]

log = logging.getLogger(__name__)


class RebalancingThread(Protocol):
    """The stream thread, as its rebalance listener sees it."""

    @property
    def log_prefix(self) -> str: ...

    @property
    def state(self) -> ThreadState: ...

    def set_state(self, new: ThreadState) -> None: ...

    @property
    def lock(self) -> asyncio.Lock:
        """Held by each part of a loop round: tasks change only between them."""
        ...

    async def commit(self) -> None: ...

    def fail_later(self, error: BaseException) -> None:
        """Keep the first error for the loop to raise."""
        ...

    def tasks_assigned(self) -> None:
        """The new tasks exist: restart the commit interval and tell the instance."""
        ...


class StreamsRebalanceListener:
    """The main consumer's `RebalanceListener` (clients/ports.py), made by the thread it serves."""

    __slots__ = ("_assignor", "_collector", "_end_offsets", "_partitions_for", "_run_end", "_standbys", "_task_manager", "_thread")

    def __init__(
        self,
        thread: RebalancingThread,
        *,
        task_manager: TaskManager,
        assignor: StreamsPartitionAssignor,
        run_end: ThreadRunEnd,
        standbys: StandbyUpdater,
        kafka_clients: ThreadClients,
    ) -> None:
        self._thread = thread
        self._task_manager = task_manager
        self._assignor = assignor
        self._run_end = run_end
        self._standbys = standbys
        self._collector = kafka_clients.collector
        self._partitions_for = kafka_clients.producer.partitions_for
        self._end_offsets = kafka_clients.changelog_reader.end_offsets

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        await self._handle_revocation(revoked)
        await self._refresh_changelog_end_offsets()

    async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
        """Fenced: the tasks belong to others already; close every one without committing."""
        if self._skips_rebalance("partitions lost"):
            return
        thread = self._thread
        async with thread.lock:
            self._run_end.on_revoked()
            thread.set_state(ThreadState.PARTITIONS_REVOKED)
            self._collector.clear_pending()
            try:
                await self._task_manager.close_all(clean=False)
            except Exception as exc:
                thread.fail_later(exc)

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        await self._handle_assignment()

    @property
    def _shutting_down(self) -> bool:
        return self._thread.state in (ThreadState.PENDING_SHUTDOWN, ThreadState.DEAD)

    def _skips_rebalance(self, callback: str) -> bool:
        """Once the thread shuts down, rebalance callbacks do nothing (its consumer takes part in
        the group until it stops; Kafka Streams skips them as invalid state transitions): they
        would reopen tasks on closed clients and pull the thread out of PENDING_SHUTDOWN."""
        if self._shutting_down:
            log.info("%s%s skipped: the thread is %s", self._thread.log_prefix, callback, self._thread.state.name)
            return True
        return False

    async def _handle_revocation(self, revoked: frozenset[TopicPartition]) -> None:
        """Commit every task, then close those reading a revoked partition (eager rebalance: all)."""
        if self._skips_rebalance("partitions revoked"):
            return
        thread, tm = self._thread, self._task_manager
        async with thread.lock:
            self._run_end.on_revoked()
            thread.set_state(ThreadState.PARTITIONS_REVOKED)
            if not (tm.tasks or tm.standby_tasks):
                return
            clean = True
            try:
                await thread.commit()
            except clients.ProducerFenced as exc:  # migrated already: closed dirty, as the rebalance wants
                log.warning("%stask migrated (%r) while committing before the rebalance", thread.log_prefix, exc)
                clean = False
            except Exception as exc:
                log.exception("%scommit before rebalance failed", thread.log_prefix)
                thread.fail_later(exc)
                clean = False
            partial = [t for t, task in tm.tasks.items() if task.partitions & revoked]
            if clean and len(partial) < len(tm.tasks):  # a streams group revokes tasks, not everything
                for task_id in partial:
                    try:
                        await tm.close_task(task_id)
                    except Exception as exc:
                        thread.fail_later(exc)
                return
            self._collector.clear_pending()
            try:
                await tm.close_all(clean=clean)
            except Exception as exc:
                thread.fail_later(exc)

    async def _handle_assignment(self) -> None:
        """Create the tasks of the new assignment; errors surface in the loop, not inside aiokafka."""
        if self._skips_rebalance("partitions assigned"):
            return
        thread, tm = self._thread, self._task_manager
        async with thread.lock:
            thread.set_state(ThreadState.PARTITIONS_ASSIGNED)
            info = self._assignor.assignment
            if info is None:
                return
            try:
                info.raise_if_error()
                await self._run_end.on_assignment(leader=self._assignor.is_leader, idle=not info.active_tasks)
                await tm.handle_assignment(info.active_tasks, info.standby_tasks)
                await self._standbys.assign()
            except Exception as exc:
                log.error("%sassignment failed: %s", thread.log_prefix, exc)
                thread.fail_later(exc)
                return
            log.info(
                "%srebalance: assigned active tasks %s, standby tasks %s",
                thread.log_prefix, sorted(str(t) for t in tm.tasks), sorted(str(t) for t in tm.standby_tasks),
            )
            thread.tasks_assigned()
            thread.set_state(ThreadState.RUNNING)

    async def _refresh_changelog_end_offsets(self) -> None:
        """Before each JoinGroup: the end offsets the assignor needs for task lags if this member leads
        (not once the thread shuts down: its clients may be stopped, and a stopped one answers only
        after its request timeout, 40 s, while the whole group waits for this join)."""
        if self._shutting_down:
            return
        await self._assignor.refresh_end_offsets(self._partitions_for, self._end_offsets)
