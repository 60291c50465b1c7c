"""StreamThread: one consumer, one producer and their tasks, run as an asyncio task.

The loop (KIP-28 "Workflow Summary"): poll a batch, buffer it in the tasks' record queues,
apply flow control (pause/resume), process in timestamp order, punctuate, hand produced records
to the producer, and commit every `commit.interval.ms` or on request. Processing is synchronous;
the loop yields to the event loop between batches so heartbeats, queries and other threads run.
Rebalance callbacks take the same lock as a loop iteration, so tasks change only between batches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from streams_core import clients
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.runtime.assignment import AssignmentInfo
from streams_core.runtime.assignment.streams_partition_assignor import StreamsPartitionAssignor
from streams_core.runtime.autostop.run_end import ThreadRunEnd
from streams_core.runtime.queries.state_store_providers import StreamThreadStateStoreProvider
from streams_core.runtime.restore.standby_updater import StandbyUpdater
from streams_core.runtime.tasks.processing_guarantee import ProcessingGuarantee
from streams_core.runtime.tasks.task_manager import TaskManager
from streams_core.runtime.threads.gc_policy import raise_gen0_threshold
from streams_core.runtime.threads.instance_thread import ThreadCallbacks
from streams_core.runtime.threads.round_poll import RoundPoll
from streams_core.runtime.threads.streams_rebalance_listener import StreamsRebalanceListener
from streams_core.runtime.threads.thread_clients import ThreadClients
from streams_core.runtime.threads.thread_metadata import TaskMetadata, ThreadMetadata, thread_metadata
from streams_core.runtime.threads.thread_metrics import ThreadMetrics
from streams_core.runtime.threads.thread_state import ThreadState
from streams_core.runtime.topology_metadata import TopologyMetadata

__all__ = ["StreamThread"]

log = logging.getLogger(__name__)


PROCESSING_SLICE_S = 0.002
"""Longest stretch of record processing before the loop yields to queries, heartbeats and I/O."""


async def _let_others_run() -> None:
    """Yield until the I/O callbacks and the tasks they start (queries) have run.

    One `sleep(0)` queues this thread's next step ahead of the callbacks the loop's next poll
    finds, and those only start a request's task, which again runs after the thread's step: a
    query waited two to three steps. Three yields let it run before the next step.
    """
    for _ in range(3):
        await asyncio.sleep(0)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class StreamThread:
    """A stream thread of one KafkaStreams instance (an asyncio task, not an OS thread)."""

    def __init__(
        self,
        index: int,
        name: str,
        topology: TopologyMetadata,
        config: StreamsConfig,
        *,
        kafka_clients: ThreadClients,
        assignor: StreamsPartitionAssignor,
        task_manager: TaskManager,
        guarantee: ProcessingGuarantee,
        standbys: StandbyUpdater,
        run_end: ThreadRunEnd,
        metrics: ThreadMetrics,
        callbacks: ThreadCallbacks,
    ) -> None:
        """Made by `StreamThreadFactory.create`, which builds every part passed in."""
        self.index = index
        self.name = name
        self.log_prefix = f"stream-thread [{name}] "
        self.topology = topology
        self.config = config
        self.state = ThreadState.CREATED
        self._clients = kafka_clients
        self._consumer = kafka_clients.consumer
        self._collector = kafka_clients.collector
        self.assignor = assignor
        self.task_manager = task_manager
        self._guarantee = guarantee
        self._standbys = standbys
        self._run_end = run_end
        self._metrics = metrics
        self._callbacks = callbacks
        self.store_provider = StreamThreadStateStoreProvider(task_manager)
        self._lock = asyncio.Lock()
        self._stopping = False
        self._runner: asyncio.Task[None] | None = None
        self._pending_error: BaseException | None = None
        self._cache_resize: int | None = None
        self._last_commit_ms = 0
        self.rebalance_listener = StreamsRebalanceListener(
            self, task_manager=task_manager, assignor=assignor, run_end=run_end, standbys=standbys, kafka_clients=kafka_clients
        )

    def __repr__(self) -> str:
        return f"StreamThread({self.name}, {self.state.name})"

    # -- lifecycle ----------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Nothing to do before `start` for a thread on the instance's loop."""

    async def start(self) -> None:
        """Start the clients, subscribe, and start the processing loop; a thread that fails to start is
        DEAD (its clients stopped), so it holds neither the client in REBALANCING nor its index."""
        self.set_state(ThreadState.STARTING)
        try:
            await self._clients.start()
            self._consumer.subscribe(sorted(self.topology.source_topics), self.rebalance_listener)
            await self._consumer.start()
        except BaseException:
            await self._clients.stop(self.log_prefix)
            self.set_state(ThreadState.DEAD)
            raise
        self._last_commit_ms = wall_clock_ms()
        raise_gen0_threshold(self.config["python.gc.gen0.threshold"])
        self._runner = asyncio.create_task(self._run(), name=self.name)

    def shutdown(self) -> None:
        """Ask the loop to stop after its current batch (Kafka Streams' `StreamThread.shutdown`); `stop` waits for it."""
        self._stopping = True

    @property
    def stopping(self) -> bool:
        """Asked to stop (by `shutdown`, `stop` or `kill`): no longer one of the instance's live threads."""
        return self._stopping

    async def stop(self) -> None:
        """Ask the loop to stop after its current batch and wait for the clean shutdown."""
        self._stopping = True
        if self._runner is not None:
            await asyncio.shield(self._runner)

    async def kill(self) -> None:
        """Cancel the loop at once (no commit); for closes that ran out of time."""
        self._stopping = True
        if self._runner is not None and not self._runner.done():
            self._runner.cancel()
            try:
                await self._runner
            except (asyncio.CancelledError, Exception):
                pass

    @property
    def batch_finished(self) -> bool:
        """KIP-95: every task of this thread reached its stop offsets (and reported)."""
        return self._run_end.finished

    @property
    def alive(self) -> bool:
        return self._runner is not None and not self._runner.done()

    async def _run(self) -> None:
        error: BaseException | None = None
        try:
            await self._run_loop()
        except asyncio.CancelledError:
            log.warning("%sprocessing cancelled", self.log_prefix)
        except Exception as exc:
            error = exc
            log.error("%sfailed: %r", self.log_prefix, exc, exc_info=exc)
        self.set_state(ThreadState.PENDING_SHUTDOWN)
        await self._shutdown(clean=error is None)
        self.set_state(ThreadState.DEAD)
        if error is not None:
            self._callbacks.on_error(self, error)

    async def _shutdown(self, *, clean: bool) -> None:
        """Commit (when clean), close tasks, then the producer and the consumer (leaves the group)."""
        async with self._lock:
            if clean:
                try:
                    await self.commit()
                except Exception:  # the stores hold writes the commit did not cover: no checkpoint
                    log.exception("%sfinal commit failed; closing the tasks dirty", self.log_prefix)
                    clean = False
            try:
                await self.task_manager.close_all(clean=clean)
            except Exception:
                log.exception("%sclosing tasks failed", self.log_prefix)
        await self._clients.stop(self.log_prefix)
        log.info("%sshut down (%s)", self.log_prefix, "clean" if clean else "after an error")

    # -- the loop -----------------------------------------------------------------------------

    async def _run_loop(self) -> None:
        config = self.config
        consumer = self._consumer
        poll_ms = config["poll.ms"]
        max_records = int(config.client_overrides("main.consumer").get("max.poll.records", 1000))
        commit_interval = config["commit.interval.ms"]
        poll = RoundPoll(consumer, max_records=max_records, slice_s=PROCESSING_SLICE_S).poll
        tm = self.task_manager
        guarantee = self._guarantee
        run_end = self._run_end
        metrics = self._metrics
        idle_rounds = 0
        while not self._stopping:
            busy = tm.has_buffered()
            timeout = 0 if busy and idle_rounds == 0 else (10 if busy else poll_ms)
            polled = time.perf_counter()
            batch = await poll(timeout)
            metrics.polled(polled)
            async with self._lock:
                self._raise_pending_error()
                for tp, records in batch.items():
                    tm.add_records(tp, run_end.truncate(tp, records))
            if batch:
                await _let_others_run()  # each part of a round is its own loop step: queries wait for one part, not the round
            async with self._lock:
                if self._cache_resize is not None:
                    tm.cache.resize(self._cache_resize)
                    self._cache_resize = None
                now = wall_clock_ms()
                started = time.perf_counter()
                processed = tm.process(max_records, now, PROCESSING_SLICE_S)
                if processed:
                    metrics.processed(started)
                idle_rounds = 0 if processed else idle_rounds + 1
                tm.apply_flow_control()
                metrics.punctuate_count += tm.punctuate(now)
                await self._standbys.update()
            await _let_others_run()
            async with self._lock:
                try:
                    await guarantee.send_pending(tm.tasks.values())
                    task_finished = await run_end.update(tm.tasks)
                    if task_finished or tm.commit_requested() or now - self._last_commit_ms >= commit_interval:
                        await self.commit()
                except clients.ProducerFenced as exc:
                    await self._on_task_migrated(exc)
                    continue
                running = self.state is ThreadState.RUNNING
                await run_end.after_round(tm.tasks, running=running, processed=tm.processed_records, now_ms=now)
            await _let_others_run()

    async def commit(self) -> None:
        """Commit the tasks that processed: flush their stores, then the guarantee delivers the
        output and commits the offsets (and transactions), then standbys checkpoint."""
        tm = self.task_manager
        started = time.perf_counter()
        await self._note_positions()
        prepared = tm.prepare_commit()
        if not await self._guarantee.commit(prepared):
            return
        tm.checkpoint_standbys()
        self._last_commit_ms = wall_clock_ms()
        if prepared:
            self._metrics.committed(started)

    async def _on_task_migrated(self, error: BaseException) -> None:
        """A task's producer was fenced: another instance owns its transactional id now.

        As Kafka Streams' TaskMigratedException: close every task dirty (open transactions are
        aborted; without a checkpoint their stores are restored again) and rejoin the group, which
        gives the tasks to whoever owns them now.
        """
        tm = self.task_manager
        log.warning("%stask migrated (%r): closing every task dirty and rejoining the group", self.log_prefix, error)
        self._collector.clear_pending()
        try:
            await tm.close_all(clean=False)
        except Exception:
            log.exception("%sclosing migrated tasks failed", self.log_prefix)
        self._consumer.enforce_rebalance()

    async def resubscribe(self) -> None:
        """Subscribe to the topology's current source topics (pattern subscriptions found new ones).

        aiokafka drops the assignment as soon as the subscription changes, so the tasks are
        committed and closed first, while their partitions are still assigned; the rebalance that
        follows creates them again.
        """
        async with self._lock:
            tm = self.task_manager
            if tm.tasks or tm.standby_tasks:
                await self.commit()
                self._collector.clear_pending()
                await tm.close_all(clean=True)
            self._consumer.subscribe(sorted(self.topology.source_topics), self.rebalance_listener)

    async def _note_positions(self) -> None:
        """Drained partitions commit at the consumer's position (not before a trailing marker),
        but never past a batch run's stop offset."""
        consumer = self._consumer
        for task in self.task_manager.tasks.values():
            for tp in task.drained_partitions():
                position = self._run_end.commit_position(tp, await consumer.position(tp))
                if position is not None:
                    task.note_position(tp, position)

    def _raise_pending_error(self) -> None:
        if self._pending_error is not None:
            error, self._pending_error = self._pending_error, None
            raise error

    # -- rebalance: what the listener (locks, errors, assignment) and the assignor (probing) call

    @property
    def lock(self) -> asyncio.Lock:
        """Held by each part of a loop round and by the rebalance callbacks: tasks change between batches."""
        return self._lock

    def fail_later(self, error: BaseException) -> None:
        """Keep the first error of a rebalance callback for the loop to raise (not inside aiokafka)."""
        self._pending_error = self._pending_error or error

    def tasks_assigned(self) -> None:
        """The assignment's tasks exist: the commit interval starts again, and the instance hears of it."""
        self._last_commit_ms = wall_clock_ms()
        self._callbacks.on_assignment(self)

    def request_probing_rebalance(self) -> None:
        """The leader's scheduled probing rebalance (KIP-441) is due: rejoin unless shutting down."""
        if self.alive and not self._stopping:
            self._consumer.enforce_rebalance()

    # -- helpers ------------------------------------------------------------------------------

    def resize_cache(self, max_bytes: int) -> None:
        """Give the record cache a new size; the loop applies it between batches, under its lock, as a
        shrink may flush dirty entries (which must not land inside a commit)."""
        if self._runner is None:
            self.task_manager.cache.resize(max_bytes)
        else:
            self._cache_resize = max_bytes

    def highwater(self, tp: TopicPartition) -> int | None:
        """The end offset of a source partition as the consumer last saw it (None before a fetch)."""
        return self._consumer.highwater(tp)

    def set_state(self, new: ThreadState) -> None:
        old, self.state = self.state, new
        if old is not new:
            log.info("%sstate %s -> %s", self.log_prefix, old.name, new.name)
            self._callbacks.on_state_change(self, old, new)

    def metrics(self) -> dict[str, Any]:
        """This thread's entry in `KafkaStreams.metrics()` (docs/metrics.md)."""
        return self._metrics.snapshot(self.name, self.state.name)

    @property
    def assignment(self) -> AssignmentInfo | None:
        """The group's assignment as this thread last received it (every host's partitions, for discovery)."""
        return self.assignor.assignment

    def metadata(self) -> ThreadMetadata:
        """This thread's `ThreadMetadata` now (KIP-663's `metadataForLocalThreads` entry)."""
        tm = self.task_manager
        active = frozenset(
            TaskMetadata(
                task_id,
                task.partitions,
                task.committed_offsets,
                {tp: end for tp in task.partitions if (end := self.highwater(tp)) is not None},
                task.partition_group.idle_start_ms,
            )
            for task_id, task in tm.tasks.items()
        )
        assignment = self.assignor.assignment
        standby_partitions = assignment.standby_tasks if assignment is not None else {}
        standby = frozenset(
            TaskMetadata(task_id, frozenset(standby_partitions.get(task_id, ()))) for task_id in tm.standby_tasks
        )
        return thread_metadata(self.config, self.index, self.name, self.state.name, active, standby)
