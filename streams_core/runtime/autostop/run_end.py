"""RunEnd: what `autostop.at` changes in an instance and its stream threads, chosen once.

Two implementations, so neither the stream thread's loop nor `KafkaStreams` branches on the
setting (as `ProcessingGuarantee` for `processing.guarantee`):

- `RunUntilClosed` (no `autostop.at`): the instance processes until it is closed; it deletes a
  metadata topic an earlier batch run left (the seed's batch-to-streaming switch), and its
  threads' hooks do nothing.
- `StopAtEndOfLog` (`autostop.at=eol`, KIP-95, docs/batch.md): the instance creates and tails the
  metadata topic (`AutostopManager`), each thread stops its partitions at the run's stop offsets
  (`AutostopTracker`), the instance closes once every thread finished and the group's committed
  offsets reach the run's stop offsets, and the finished marker is written after its threads
  stopped.

The thread side (`ThreadRunEnd`) is made per thread by `RunEnd.for_thread`, by the thread factory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from streams_core import clients
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.runtime.autostop.autostop_manager import AutostopManager, intermediate_writers
from streams_core.runtime.autostop.autostop_metadata import metadata_topic_name
from streams_core.runtime.autostop.autostop_tracker import AutostopTracker
from streams_core.runtime.tasks.stream_task import StreamTask
from streams_core.runtime.topology_metadata import TopologyMetadata

__all__ = ["RunEnd", "RunUntilClosed", "StopAtEndOfLog", "ThreadRunEnd", "run_end"]

log = logging.getLogger(__name__)

_RUN_END_CHECK_S = 0.25
_RUN_END_LOG_EVERY_S = 10.0

R = TypeVar("R", bound=clients.RawRecord)


class ThreadRunEnd(Protocol):
    """The run mode's hooks in one stream thread's loop and rebalance callbacks."""

    @property
    def finished(self) -> bool:
        """Every task of the thread reached its stop offsets and reported (never, running until closed)."""
        ...

    async def on_assignment(self, *, leader: bool, idle: bool = False) -> None:
        """Before the new tasks are created (`idle`: the assignment has no active task)."""
        ...

    def on_revoked(self) -> None: ...

    def truncate(self, tp: TopicPartition, records: Sequence[R]) -> Sequence[R]:
        """The fetched records of `tp` to buffer."""
        ...

    def commit_position(self, tp: TopicPartition, position: int) -> int | None:
        """Where a drained partition may commit, given the consumer's position; None: not there yet."""
        ...

    async def update(self, tasks: Mapping[TaskId, StreamTask]) -> bool:
        """After a round's output was sent: True when a task just finished (commit now)."""
        ...

    async def after_round(self, tasks: Mapping[TaskId, StreamTask], *, running: bool, processed: int, now_ms: int) -> None:
        """At the end of a loop round (after its commit, if any)."""
        ...

    def metrics(self, tasks: Mapping[TaskId, StreamTask]) -> dict[str, Any] | None: ...


class RunEnd(Protocol):
    """The run mode's side in the instance: its topics, its start and end, and its thread side."""

    async def own_topics(self, admin: clients.Admin) -> list[clients.NewTopicSpec]:
        """Topics to create with the internal ones (called once the topic checks passed)."""
        ...

    async def start(self, metadata: TopologyMetadata, partition_counts: Mapping[str, int]) -> None:
        """Before the stream threads start."""
        ...

    def for_thread(
        self, consumer: clients.Consumer, metadata: TopologyMetadata, *, thread_name: str,
        on_finished: Callable[[], None], log_prefix: str,
    ) -> ThreadRunEnd:
        """The thread side for a new stream thread; `on_finished` is called when its `finished` changes."""
        ...

    def on_threads_finished(self, still_finished: Callable[[], bool], close: Callable[[], object]) -> None:
        """Every thread of the instance finished its partitions: call `close` once the run allows
        it, unless `still_finished()` turns False first (a rebalance brought new work)."""
        ...

    async def end(self) -> None:
        """After the stream threads stopped, whatever stopped the instance."""
        ...


class _UntilClosedThread:
    """The thread side of a run without end: every hook leaves the loop as it is."""

    __slots__ = ()

    @property
    def finished(self) -> bool:
        return False

    async def on_assignment(self, *, leader: bool, idle: bool = False) -> None:
        return None

    def on_revoked(self) -> None:
        return None

    def truncate(self, tp: TopicPartition, records: Sequence[R]) -> Sequence[R]:
        return records

    def commit_position(self, tp: TopicPartition, position: int) -> int | None:
        return position

    async def update(self, tasks: Mapping[TaskId, StreamTask]) -> bool:
        return False

    async def after_round(self, tasks: Mapping[TaskId, StreamTask], *, running: bool, processed: int, now_ms: int) -> None:
        return None

    def metrics(self, tasks: Mapping[TaskId, StreamTask]) -> dict[str, Any] | None:
        return None


class RunUntilClosed:
    """Process until closed; a metadata topic of an earlier batch run is deleted at start."""

    __slots__ = ("_application_id",)

    def __init__(self, application_id: str) -> None:
        self._application_id = application_id

    async def own_topics(self, admin: clients.Admin) -> list[clients.NewTopicSpec]:
        topic = metadata_topic_name(self._application_id)
        if (await admin.partition_counts([topic])).get(topic):
            await admin.delete_topics([topic])
            log.info("stream-client [%s] deleted the stop offsets of an earlier batch run (%s)", self._application_id, topic)
        return []

    async def start(self, metadata: TopologyMetadata, partition_counts: Mapping[str, int]) -> None:
        return None

    def for_thread(
        self, consumer: clients.Consumer, metadata: TopologyMetadata, *, thread_name: str,
        on_finished: Callable[[], None], log_prefix: str,
    ) -> ThreadRunEnd:
        return _UntilClosedThread()

    def on_threads_finished(self, still_finished: Callable[[], bool], close: Callable[[], object]) -> None:
        return None  # its threads never finish

    async def end(self) -> None:
        return None


class StopAtEndOfLog:
    """KIP-95 `autostop.at=eol`: process up to the run's stop offsets, then close."""

    __slots__ = ("_clients", "_config", "_manager", "_process_id", "_run_end_watch")

    def __init__(self, config: StreamsConfig, client_supplier: clients.KafkaClientSupplier, process_id: str) -> None:
        self._config = config
        self._clients = client_supplier
        self._process_id = process_id
        self._manager: AutostopManager | None = None
        self._run_end_watch: asyncio.Task[None] | None = None

    async def own_topics(self, admin: clients.Admin) -> list[clients.NewTopicSpec]:
        """The metadata topic: one partition, compacted."""
        return [clients.NewTopicSpec(metadata_topic_name(self._config["application.id"]), 1, {"cleanup.policy": "compact"})]

    async def start(self, metadata: TopologyMetadata, partition_counts: Mapping[str, int]) -> None:
        """Start the instance's metadata-topic manager (its inputs: sources no sub-topology writes)."""
        writers, intermediates = intermediate_writers(metadata.topic_groups, partition_counts)
        inputs = [
            TopicPartition(topic, p)
            for topic in metadata.source_topics - writers.topics
            for p in range(partition_counts[topic])
        ]
        self._manager = AutostopManager(
            self._config,
            self._clients,
            input_partitions=inputs,
            writers=writers,
            intermediate_partitions=intermediates,
            process_id=self._process_id,
        )
        await self._manager.start()

    def for_thread(
        self, consumer: clients.Consumer, metadata: TopologyMetadata, *, thread_name: str,
        on_finished: Callable[[], None], log_prefix: str,
    ) -> ThreadRunEnd:
        if self._manager is None:
            raise RuntimeError("StopAtEndOfLog.start() must run before its threads are made")
        sinks = {sid: info.sink_topics for sid, info in metadata.topic_groups.items()}
        return AutostopTracker(
            self._manager, consumer, sinks, thread_name=thread_name, on_finished=on_finished, log_prefix=log_prefix
        )

    def on_threads_finished(self, still_finished: Callable[[], bool], close: Callable[[], object]) -> None:
        """Close once the group's committed offsets reach every stop offset of the run, not when
        this instance's own partitions are done (the seed's "no partitions left: terminate").

        A member killed just after a rebalance holds its partitions until its session times out;
        if every live instance had left by then, nobody would take them over and the run would
        end unfinished, without its marker. Waiting, an instance stays in the group to receive
        them; while none is behind, the wait is one committed-offsets request.
        """
        if self._run_end_watch is None or self._run_end_watch.done():
            self._run_end_watch = asyncio.get_running_loop().create_task(
                self._close_at_run_end(still_finished, close), name=f"{self._config['application.id']}-run-end"
            )

    async def _close_at_run_end(self, still_finished: Callable[[], bool], close: Callable[[], object]) -> None:
        application_id = self._config["application.id"]
        admin = self._clients.get_admin(self._config)
        try:
            await admin.start()
        except Exception:
            log.exception("stream-client [%s] batch run: no admin client to watch the run's end; closing", application_id)
            close()
            return
        try:
            done = await self._run_end(admin, still_finished)
        finally:
            await admin.close()
        if done:
            log.info("stream-client [%s] batch run: every partition of the run is at its stop offset; closing", application_id)
            close()

    async def _run_end(self, admin: clients.Admin, still_finished: Callable[[], bool]) -> bool:
        """True once no partition of the run is behind; False when `still_finished()` turns False first."""
        manager = self._manager
        assert manager is not None
        logged = -_RUN_END_LOG_EVERY_S
        while still_finished():
            try:
                behind = await manager.behind(admin)
            except Exception as exc:  # the coordinator moving: asked again at the next check
                log.warning("stream-client [%s] batch run: reading committed offsets failed: %r", manager.application_id, exc)
                behind = None
            if behind == {}:
                return True
            if time.monotonic() - logged >= _RUN_END_LOG_EVERY_S:
                logged = time.monotonic()
                log.info(
                    "stream-client [%s] batch run: every partition here reached its stop offset; staying in the group "
                    "until the rest of the run does (behind: %s)", manager.application_id, "unknown" if behind is None else behind,
                )  # fmt: skip
            await asyncio.sleep(_RUN_END_CHECK_S)
        return False

    async def end(self) -> None:
        """The finished marker if the whole run is done, then the manager closes.

        The committed offsets decide, not the threads' `finished`, which a rebalance during the
        close resets (others leaving as they finish): the last instance to finish would then
        leave the run without its marker.
        """
        if self._run_end_watch is not None:
            self._run_end_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._run_end_watch
        manager = self._manager
        if manager is None:
            return
        application_id = self._config["application.id"]
        try:
            admin = self._clients.get_admin(self._config)
            await admin.start()
            try:
                await manager.finish_if_done(admin)
            finally:
                await admin.close()
        except Exception:
            log.exception("stream-client [%s] could not check whether the batch run is finished", application_id)
        finally:
            await manager.close()


def run_end(config: StreamsConfig, client_supplier: clients.KafkaClientSupplier, process_id: str) -> RunEnd:
    """The implementation for `autostop.at`."""
    if config["autostop.at"] == "eol":
        return StopAtEndOfLog(config, client_supplier, process_id)
    return RunUntilClosed(config["application.id"])
