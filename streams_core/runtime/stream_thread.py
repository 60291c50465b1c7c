"""StreamThread: one consumer, one producer and their tasks, run as an asyncio task.

The loop (KIP-28 "Workflow Summary"): poll a batch, buffer it in the tasks' record queues,
apply flow control (pause/resume), process in timestamp order, punctuate, hand produced records
to the producer, and commit every `commit.interval.ms` or on request. Processing is synchronous;
the loop yields to the event loop between batches so heartbeats, queries and other threads run.
Rebalance callbacks take the same lock as a loop iteration, so tasks change only between batches.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from streams_core import clients
from streams_core.config import StreamsConfig
from streams_core.processor.internals.record_deserializer import RawRecord, dead_letter_headers, resolve_deserialization_handler
from streams_core.processor.task_id import TaskId
from streams_core.runtime.flow_control import FlowControl
from streams_core.runtime.processing_guarantee import ProcessingGuarantee, processing_guarantee
from streams_core.runtime.record_collector_impl import RecordCollectorImpl
from streams_core.runtime.run_mode import RunMode
from streams_core.runtime.standby_updater import StandbyUpdater
from streams_core.runtime.state_store_providers import StreamThreadStateStoreProvider
from streams_core.runtime.store_changelog_reader import StoreChangelogReader
from streams_core.runtime.streams_partition_assignor import StreamsPartitionAssignor, TaskStates
from streams_core.runtime.task_manager import TaskManager
from streams_core.runtime.topic_partition import TopicPartition
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.store import StateStore

__all__ = ["StreamThread", "ThreadState"]

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


class ThreadState(enum.Enum):
    """Kafka Streams' StreamThread states."""

    CREATED = "CREATED"
    STARTING = "STARTING"
    PARTITIONS_REVOKED = "PARTITIONS_REVOKED"
    PARTITIONS_ASSIGNED = "PARTITIONS_ASSIGNED"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    DEAD = "DEAD"


class _RebalanceListener:
    """The main consumer's `RebalanceListener`: hands both callbacks to the thread."""

    __slots__ = ("_thread",)

    def __init__(self, thread: StreamThread) -> None:
        self._thread = thread

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        await self._thread.on_partitions_revoked()
        await self._thread.refresh_changelog_end_offsets()

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        await self._thread.on_partitions_assigned()


class StreamThread:
    """A stream thread of one KafkaStreams instance (an asyncio task, not an OS thread)."""

    def __init__(
        self,
        index: int,
        topology: TopologyMetadata,
        config: StreamsConfig,
        *,
        process_id: str,
        client_supplier: clients.KafkaClientSupplier,
        global_stores: Callable[[], Mapping[str, StateStore]] | None = None,
        on_state_change: Callable[[StreamThread, ThreadState, ThreadState], None],
        on_assignment: Callable[[StreamThread], None],
        on_error: Callable[[StreamThread, BaseException], None],
        run_mode: RunMode,
        on_batch_finished: Callable[[StreamThread], None],
    ) -> None:
        self.index = index
        self.name = f"{config['application.id']}-StreamThread-{index}"
        self.log_prefix = f"stream-thread [{self.name}] "
        self.topology = topology
        self.config = config
        self.state = ThreadState.CREATED
        self._on_state_change = on_state_change
        self._on_assignment = on_assignment
        self._on_error = on_error
        self._lock = asyncio.Lock()
        self._stopping = False
        self._runner: asyncio.Task[None] | None = None
        self._clients = client_supplier
        self._global_stores = global_stores or dict
        self._consumer: clients.Consumer | None = None
        self._producer: clients.Producer | None = None
        self._restore_consumer: clients.Consumer | None = None
        self._changelog_reader: StoreChangelogReader | None = None
        """Restores active tasks and updates standbys with the restore consumer (from `start()` on)."""
        self._pending_error: BaseException | None = None
        self._last_commit_ms = 0
        self.assignor = StreamsPartitionAssignor(
            topology,
            process_id=process_id,
            application_server=config["application.server"],
            num_standby_replicas=config["num.standby.replicas"],
            task_states=self._task_states,
            acceptable_recovery_lag=config["acceptable.recovery.lag"],
            max_warmup_replicas=config["max.warmup.replicas"],
            probing_rebalance_interval_ms=config["probing.rebalance.interval.ms"],
            request_rebalance=self._request_probing_rebalance,
            log_prefix=self.log_prefix,
        )
        self.collector: RecordCollectorImpl | None = None
        self._guarantee: ProcessingGuarantee
        self._run_modes = run_mode
        self._on_batch_finished = on_batch_finished
        self.store_provider = StreamThreadStateStoreProvider(self)
        self.task_manager: TaskManager | None = None
        self.commit_count = 0
        self.commit_latency_ms_total = 0.0
        self.poll_count = 0
        self.poll_latency_ms_total = 0.0
        self.process_latency_ms_total = 0.0
        self.punctuate_count = 0
        self.dead_lettered_records = 0

    def __repr__(self) -> str:
        return f"StreamThread({self.name}, {self.state.name})"

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Create and start the clients, subscribe, and start the processing loop."""
        self._set_state(ThreadState.STARTING)
        config = self.config
        self._producer = self._clients.get_producer(config, thread_index=self.index)
        await self._producer.start()
        self.collector = RecordCollectorImpl(
            self._producer,
            production_handler=config["default.production.exception.handler"],
            log_prefix=self.log_prefix,
        )
        self._restore_consumer = self._clients.get_restore_consumer(config, thread_index=self.index)
        await self._restore_consumer.start()
        reader = self._changelog_reader = StoreChangelogReader(self._restore_consumer, log_prefix=self.log_prefix)
        handler = resolve_deserialization_handler(
            config["default.deserialization.exception.handler"], self._send_to_dead_letter_topic
        )
        self._consumer = self._clients.get_main_consumer(config, assignor=self.assignor, thread_index=self.index)
        self._guarantee = processing_guarantee(
            config,
            self.collector,
            self._consumer,
            lambda transactional_id: self._clients.get_producer(
                config, transactional_id=transactional_id, thread_index=self.index
            ),
            log_prefix=self.log_prefix,
        )
        self._run_mode = self._run_modes.for_thread(
            self._consumer, self.topology, thread_name=self.name,
            on_finished=lambda: self._on_batch_finished(self), log_prefix=self.log_prefix,
        )
        self.task_manager = TaskManager(
            self.topology,
            config,
            self._guarantee,
            reader,
            flow_control=FlowControl.for_config(self._consumer, config, log_prefix=self.log_prefix),
            deserialization_handler=handler,
            global_stores=self._global_stores,
            log_prefix=self.log_prefix,
        )
        self._standbys = StandbyUpdater(reader, self.task_manager)
        self._consumer.subscribe(sorted(self.topology.source_topics), _RebalanceListener(self))
        await self._consumer.start()
        self._last_commit_ms = wall_clock_ms()
        self._runner = asyncio.create_task(self._run(), name=self.name)

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
        return self._run_mode.finished

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
        self._set_state(ThreadState.PENDING_SHUTDOWN)
        await self._shutdown(clean=error is None)
        self._set_state(ThreadState.DEAD)
        if error is not None:
            self._on_error(self, error)

    async def _shutdown(self, *, clean: bool) -> None:
        """Commit (when clean), close tasks, then the producer and the consumer (leaves the group)."""
        tm = self.task_manager
        async with self._lock:
            if tm is not None:
                if clean:
                    try:
                        await self._commit()
                    except Exception:  # the stores hold writes the commit did not cover: no checkpoint
                        log.exception("%sfinal commit failed; closing the tasks dirty", self.log_prefix)
                        clean = False
                try:
                    await tm.close_all(clean=clean)
                except Exception:
                    log.exception("%sclosing tasks failed", self.log_prefix)
        for client in (self._producer, self._restore_consumer, self._consumer):
            if client is not None:
                try:
                    await client.stop()
                except Exception:
                    log.exception("%sstopping a client failed", self.log_prefix)
        log.info("%sshut down (%s)", self.log_prefix, "clean" if clean else "after an error")

    # -- the loop -----------------------------------------------------------------------------

    async def _run_loop(self) -> None:
        config = self.config
        consumer = self._consumer
        assert consumer is not None
        poll_ms = config["poll.ms"]
        max_records = int(config.client_overrides("main.consumer").get("max.poll.records", 1000))
        commit_interval = config["commit.interval.ms"]
        tm = self.task_manager
        guarantee = self._guarantee
        run_mode = self._run_mode
        assert tm is not None
        idle_rounds = 0
        while not self._stopping:
            busy = tm.has_buffered()
            timeout = 0 if busy and idle_rounds == 0 else (10 if busy else poll_ms)
            polled = time.perf_counter()
            batch = await consumer.getmany(timeout_ms=timeout, max_records=max_records)
            self.poll_count += 1
            self.poll_latency_ms_total += (time.perf_counter() - polled) * 1000
            async with self._lock:
                self._raise_pending_error()
                for tp, records in batch.items():
                    tm.add_records(tp, run_mode.truncate(tp, records))
            if batch:
                await _let_others_run()  # each part of a round is its own loop step: queries wait for one part, not the round
            async with self._lock:
                now = wall_clock_ms()
                started = time.perf_counter()
                processed = tm.process(max_records, now, PROCESSING_SLICE_S)
                if processed:
                    self.process_latency_ms_total += (time.perf_counter() - started) * 1000
                idle_rounds = 0 if processed else idle_rounds + 1
                tm.apply_flow_control()
                self.punctuate_count += tm.punctuate(now)
                await self._standbys.update()
            await _let_others_run()
            async with self._lock:
                try:
                    await guarantee.send_pending(tm.tasks.values())
                    task_finished = await run_mode.update(tm.tasks)
                    if task_finished or tm.commit_requested() or now - self._last_commit_ms >= commit_interval:
                        await self._commit()
                except clients.ProducerFenced as exc:
                    await self._on_task_migrated(exc)
                    continue
                running = self.state is ThreadState.RUNNING
                await run_mode.after_round(tm.tasks, running=running, processed=tm.processed_records, now_ms=now)
            await _let_others_run()

    async def _commit(self) -> None:
        """Commit the tasks that processed: flush their stores, then the guarantee delivers the
        output and commits the offsets (and transactions), then standbys checkpoint."""
        tm = self.task_manager
        assert tm is not None
        started = time.perf_counter()
        await self._note_positions()
        prepared = tm.prepare_commit()
        if not await self._guarantee.commit(prepared):
            return
        tm.checkpoint_standbys()
        self._last_commit_ms = wall_clock_ms()
        if prepared:
            self.commit_count += 1
            self.commit_latency_ms_total += (time.perf_counter() - started) * 1000

    async def _on_task_migrated(self, error: BaseException) -> None:
        """A task's producer was fenced: another instance owns its transactional id now.

        As Kafka Streams' TaskMigratedException: close every task dirty (open transactions are
        aborted; without a checkpoint their stores are restored again) and rejoin the group, which
        gives the tasks to whoever owns them now.
        """
        tm = self.task_manager
        assert tm is not None and self._consumer is not None and self.collector is not None
        log.warning("%stask migrated (%r): closing every task dirty and rejoining the group", self.log_prefix, error)
        self.collector.clear_pending()
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
            tm, consumer = self.task_manager, self._consumer
            if consumer is None or tm is None:
                return
            if tm.tasks or tm.standby_tasks:
                await self._commit()
                assert self.collector is not None
                self.collector.clear_pending()
                await tm.close_all(clean=True)
            consumer.subscribe(sorted(self.topology.source_topics), _RebalanceListener(self))

    async def _note_positions(self) -> None:
        """Drained partitions commit at the consumer's position (not before a trailing marker),
        but never past a batch run's stop offset."""
        tm, consumer = self.task_manager, self._consumer
        if tm is None or consumer is None:
            return
        for task in tm.tasks.values():
            for tp in task.drained_partitions():
                position = self._run_mode.commit_position(tp, await consumer.position(tp))
                if position is not None:
                    task.note_position(tp, position)

    def _raise_pending_error(self) -> None:
        if self._pending_error is not None:
            error, self._pending_error = self._pending_error, None
            raise error

    # -- rebalance ----------------------------------------------------------------------------

    @property
    def _shutting_down(self) -> bool:
        return self.state in (ThreadState.PENDING_SHUTDOWN, ThreadState.DEAD)

    def _skips_rebalance(self, callback: str) -> bool:
        """Once the thread shuts down, rebalance callbacks do nothing (its consumer takes part in
        the group until it stops; Kafka Streams skips them as invalid state transitions): they
        would reopen tasks on closed clients and pull the thread out of PENDING_SHUTDOWN."""
        if self._shutting_down:
            log.info("%s%s skipped: the thread is %s", self.log_prefix, callback, self.state.name)
            return True
        return False

    async def on_partitions_revoked(self) -> None:
        """Eager rebalance: commit and close every task before the group reassigns."""
        if self._skips_rebalance("partitions revoked"):
            return
        async with self._lock:
            self._run_mode.on_revoked()
            self._set_state(ThreadState.PARTITIONS_REVOKED)
            tm = self.task_manager
            if tm is None or not (tm.tasks or tm.standby_tasks):
                return
            clean = True
            try:
                await self._commit()
            except clients.ProducerFenced as exc:  # migrated already: closed dirty, as the rebalance wants
                log.warning("%stask migrated (%r) while committing before the rebalance", self.log_prefix, exc)
                clean = False
            except Exception as exc:
                log.exception("%scommit before rebalance failed", self.log_prefix)
                self._pending_error = self._pending_error or exc
                clean = False
            assert self.collector is not None
            self.collector.clear_pending()
            try:
                await tm.close_all(clean=clean)
            except Exception as exc:
                self._pending_error = self._pending_error or exc

    async def on_partitions_assigned(self) -> None:
        """Create the tasks of the new assignment; errors surface in the loop, not inside aiokafka."""
        if self._skips_rebalance("partitions assigned"):
            return
        async with self._lock:
            self._set_state(ThreadState.PARTITIONS_ASSIGNED)
            info = self.assignor.assignment
            tm = self.task_manager
            if info is None or tm is None:
                return
            try:
                info.raise_if_error()
                await self._run_mode.on_assignment(leader=self.assignor.is_leader)
                await tm.handle_assignment(info.active_tasks, info.standby_tasks)
                await self._standbys.assign()
            except Exception as exc:
                log.error("%sassignment failed: %s", self.log_prefix, exc)
                self._pending_error = self._pending_error or exc
                return
            self._last_commit_ms = wall_clock_ms()
            log.info(
                "%srebalance: assigned active tasks %s, standby tasks %s",
                self.log_prefix, sorted(str(t) for t in tm.tasks), sorted(str(t) for t in tm.standby_tasks),
            )
            self._on_assignment(self)
            self._set_state(ThreadState.RUNNING)

    async def refresh_changelog_end_offsets(self) -> None:
        """Before each JoinGroup: the end offsets the assignor needs for task lags if this member leads
        (not once the thread shuts down: its clients may be stopped, and a stopped one answers only
        after its request timeout, 40 s, while the whole group waits for this join)."""
        if self._shutting_down:
            return
        if self._producer is not None and self._changelog_reader is not None:
            await self.assignor.refresh_end_offsets(self._producer.partitions_for, self._changelog_reader.end_offsets)

    def _request_probing_rebalance(self) -> None:
        """The leader's scheduled probing rebalance (KIP-441) is due: rejoin unless shutting down."""
        if self._consumer is not None and self.alive and not self._stopping:
            self._consumer.enforce_rebalance()

    def _task_states(self) -> TaskStates:
        tm = self.task_manager
        if tm is None:
            return TaskStates()
        sums = tm.local_state_offset_sums()
        return TaskStates(prev_active=tm.prev_active, with_local_state=frozenset(sums), offset_sums=sums)

    # -- helpers ------------------------------------------------------------------------------

    def _set_state(self, new: ThreadState) -> None:
        old, self.state = self.state, new
        if old is not new:
            log.info("%sstate %s -> %s", self.log_prefix, old.name, new.name)
            self._on_state_change(self, old, new)

    def _send_to_dead_letter_topic(self, record: RawRecord) -> None:
        """Forward a record that failed to deserialize, with its original bytes and where it came from."""
        assert self.collector is not None
        topic = self.config["errors.dead.letter.queue.topic.name"]
        self.collector.send(topic, record.key, record.value, record.timestamp, dead_letter_headers(record), None)
        self.dead_lettered_records += 1

    async def changelog_end_offsets(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        """End offsets of changelog partitions, asked with the restore consumer."""
        if not partitions or self._changelog_reader is None:
            return {}
        return await self._changelog_reader.end_offsets(partitions)

    def changelog_highwater(self, partition: TopicPartition) -> int | None:
        return None if self._changelog_reader is None else self._changelog_reader.highwater(partition)

    def input_position(self, task_id: TaskId) -> Mapping[TopicPartition, int]:
        task = None if self.task_manager is None else self.task_manager.tasks.get(task_id)
        return {} if task is None else task.consumed_offsets

    def _collectors(self) -> list[RecordCollectorImpl]:
        """The thread's collector and, under exactly-once, each task's own."""
        found = [self.collector] if self.collector is not None else []
        if self.task_manager is not None:
            found += [t.record_collector for t in self.task_manager.tasks.values() if t.record_collector not in found]
        return found

    # -- interactive queries ------------------------------------------------------------------

    def active_states(self) -> list[tuple[TaskId, ProcessorStateManager]]:
        """The state managers of the active tasks (for the thread's store provider)."""
        tm = self.task_manager
        return [] if tm is None else [(task_id, task.state_manager) for task_id, task in tm.tasks.items()]

    def standby_states(self) -> list[tuple[TaskId, ProcessorStateManager]]:
        tm = self.task_manager
        return [] if tm is None else [(task_id, task.state_manager) for task_id, task in tm.standby_tasks.items()]

    def readable_standby_states(self) -> list[tuple[TaskId, ProcessorStateManager]]:
        tm = self.task_manager
        return [] if tm is None else [(t, task.state_manager) for t, task in tm.standby_tasks.items() if task.caught_up]

    def metrics(self) -> dict[str, Any]:
        tm = self.task_manager
        return {
            "thread": self.name,
            "state": self.state.name,
            "tasks": sorted(str(t) for t in tm.tasks) if tm else [],
            "processed_records": tm.processed_records if tm else 0,
            "dropped_records": tm.dropped_records if tm else 0,
            "produced_records": sum(c.sent_records for c in self._collectors()),
            "production_dropped_records": sum(c.dropped_records for c in self._collectors()),
            "standby_tasks": sorted(str(t) for t in tm.standby_tasks) if tm else [],
            "restored_records": tm.restored_records if tm else 0,
            "pause_count": tm.pause_count if tm else 0,
            "resume_count": tm.resume_count if tm else 0,
            "commit_count": self.commit_count,
            "commit_latency_ms_avg": self.commit_latency_ms_total / self.commit_count if self.commit_count else 0.0,
            "poll_count": self.poll_count,
            "autostop": None if tm is None else self._run_mode.metrics(tm.tasks),
            "poll_latency_ms_total": self.poll_latency_ms_total,
            "process_latency_ms_total": self.process_latency_ms_total,
            "punctuate_count": self.punctuate_count,
            "dead_lettered_records": self.dead_lettered_records,
            "cache": {"hits": tm.cache.hits, "misses": tm.cache.misses, "evictions": tm.cache.evictions} if tm else None,
            "task_metrics": tm.task_metrics(self._consumer.highwater) if tm and self._consumer else {},
        }
