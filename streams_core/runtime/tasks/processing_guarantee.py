"""ProcessingGuarantee: what `processing.guarantee` changes in a stream thread, chosen once at start.

One interface, two implementations, so the thread and the task manager have no branches on the
guarantee:

- `AtLeastOnce`: every task writes through the thread's collector; a commit flushes the stores
  (the caller did), flushes the producer, commits the consumed offsets, then checkpoints.
- `ExactlyOnce`: each task has a transactional producer of its own (`transactional.id` =
  application id + task id: aiokafka has no KIP-447 fencing); a new task starts reading where
  the offsets committed before its producer fenced the previous owner say; a commit sends each
  task's output, changelog writes and consumed offsets in its transaction and commits it, then
  the task's SQLite stores commit their data with the changelog offsets it reflects (KIP-892/
  KIP-1035 in SQLite form): after a crash they restore only the changelog past those offsets.
  A task's `.checkpoint` is removed while it runs and written on a clean close; without one,
  what cannot say how far it is (stores that do not manage offsets) is wiped and restored.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from streams_core import clients
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.runtime.tasks.record_collector_impl import RecordCollectorImpl
from streams_core.runtime.tasks.stream_task import StreamTask
from streams_core.state.internals.processor_state_manager import ProcessorStateManager

__all__ = ["AtLeastOnce", "ExactlyOnce", "ProcessingGuarantee", "processing_guarantee"]

log = logging.getLogger(__name__)

_PRODUCER_START_TIMEOUT_S = 60.0
_PRODUCER_START_BACKOFF_S = 0.5

PreparedCommit = Sequence[tuple[StreamTask, dict[TopicPartition, OffsetAndMetadata]]]
"""Tasks whose stores were flushed, each with the consumed offsets to commit (and their partition times)."""


class ProcessingGuarantee(Protocol):
    """How a stream thread produces and commits under one `processing.guarantee`."""

    @property
    def checkpoint_on_commit(self) -> bool:
        """Whether an active task writes `.checkpoint` after every commit (else only on a clean close)."""
        ...

    def prepare_state(self, state_manager: ProcessorStateManager, *, active: bool) -> None:
        """Before a task's stores open: load, trust, or wipe what its directory holds."""
        ...

    async def task_collector(self, task_id: TaskId, sink_topics: Iterable[str]) -> RecordCollectorImpl:
        """The collector a new task writes through."""
        ...

    async def release_task_collector(self, collector: RecordCollectorImpl, *, clean: bool) -> None:
        """A task closed: release what `task_collector` made for it."""
        ...

    async def resume_positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """After `task_collector`: where a new task's partitions resume, if the consumer must be
        sought there (the offsets it was sought to); empty when its own start is right."""
        ...

    async def committed_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """The committed offsets of a new task's partitions with their metadata, read once its stores
        are restored (after `resume_positions`); a partition without one is left out."""
        ...

    async def send_pending(self, tasks: Iterable[StreamTask]) -> None:
        """Hand every queued output record to its producer (between batches)."""
        ...

    async def commit(self, prepared: PreparedCommit) -> bool:
        """Deliver output and commit consumed offsets; False when the group took the commit away."""
        ...


class _GroupOffsets:
    """What both guarantees read of the group's committed offsets through the main consumer."""

    _consumer: clients.Consumer

    async def committed_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        return await self._consumer.committed_with_metadata(partitions)


class AtLeastOnce(_GroupOffsets):
    """One producer per thread; offsets committed after the producer flushed."""

    checkpoint_on_commit = True

    def __init__(self, collector: RecordCollectorImpl, consumer: clients.Consumer, *, log_prefix: str = "") -> None:
        self._collector = collector
        self._consumer = consumer
        self._log_prefix = log_prefix

    def prepare_state(self, state_manager: ProcessorStateManager, *, active: bool) -> None:
        state_manager.load_checkpoint()

    async def task_collector(self, task_id: TaskId, sink_topics: Iterable[str]) -> RecordCollectorImpl:
        await self._collector.prefetch_partition_counts(set(sink_topics))
        return self._collector

    async def release_task_collector(self, collector: RecordCollectorImpl, *, clean: bool) -> None:
        return None

    async def resume_positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {}

    async def send_pending(self, tasks: Iterable[StreamTask]) -> None:
        await self._collector.send_pending()

    async def commit(self, prepared: PreparedCommit) -> bool:
        """1. flush the producer; 2. commit the offsets; 3. each task notes its changelog offsets and checkpoints."""
        await self._collector.flush()
        offsets = {tp: o for _, task_offsets in prepared for tp, o in task_offsets.items()}
        if offsets:
            try:
                await self._consumer.commit(offsets)
            except (clients.CommitFailedError, clients.RebalanceInProgressError, clients.IllegalStateError) as exc:
                log.warning(
                    "%scommit failed (a rebalance is under way; records will be reprocessed): %r", self._log_prefix, exc
                )
                return False
        produced = self._collector.offsets
        for task, _ in prepared:
            task.post_commit(produced)
        return True


class ExactlyOnce(_GroupOffsets):
    """A transactional producer per task; output, changelog writes and offsets commit together."""

    checkpoint_on_commit = False

    def __init__(
        self,
        collector: RecordCollectorImpl,
        new_producer: Callable[[str], clients.Producer],
        config: StreamsConfig,
        consumer: clients.Consumer,
        *,
        log_prefix: str = "",
    ) -> None:
        self._collector = collector
        self._new_producer = new_producer
        self._consumer = consumer
        self._application_id: str = config["application.id"]
        self._production_handler = config["default.production.exception.handler"]
        self._log_prefix = log_prefix

    def prepare_state(self, state_manager: ProcessorStateManager, *, active: bool) -> None:
        """Stores that manage their offsets become transactional; without a checkpoint the others
        may hold writes of aborted transactions: wipe them (SQLite store files stay: their offsets
        say how far their committed data is).

        An active task also removes its checkpoint while it runs; a standby keeps writing one.
        """
        state_manager.use_transactional_stores()
        if not state_manager.has_checkpoint:
            state_manager.wipe(keep_store_files=True)
        state_manager.load_checkpoint()
        if active:
            state_manager.delete_checkpoint()

    async def task_collector(self, task_id: TaskId, sink_topics: Iterable[str]) -> RecordCollectorImpl:
        producer = await self._start_producer(f"{self._application_id}-{task_id}")
        collector = RecordCollectorImpl(
            producer,
            production_handler=self._production_handler,
            log_prefix=f"{self._log_prefix}task [{task_id}] ",
            transactional=True,
        )
        try:
            await collector.prefetch_partition_counts(set(sink_topics))
        except BaseException:
            await collector.close(clean=False)
            raise
        return collector

    async def _start_producer(self, transactional_id: str) -> clients.Producer:
        """A started transactional producer; a start that fails for want of a broker (right after
        a broker stall its metadata may list none for a moment) is retried with a fresh producer
        for up to a minute, as Kafka Streams retries task initialisation, instead of failing the thread."""
        deadline = time.monotonic() + _PRODUCER_START_TIMEOUT_S
        while True:
            producer = self._new_producer(transactional_id)
            try:
                await producer.start()
                return producer
            except (clients.KafkaConnectionError, clients.KafkaTimeoutError) as exc:
                try:
                    await producer.stop()
                except Exception as stop_error:
                    log.debug("%sstopping a producer that did not start: %r", self._log_prefix, stop_error)
                if time.monotonic() > deadline:
                    raise
                log.warning("%sproducer %s did not start (%r); trying again", self._log_prefix, transactional_id, exc)
                await asyncio.sleep(_PRODUCER_START_BACKOFF_S)

    async def release_task_collector(self, collector: RecordCollectorImpl, *, clean: bool) -> None:
        await collector.close(clean=clean)

    async def resume_positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The committed offsets read again, now that the task's producer fenced the previous owner.

        The consumer read them when the partitions were assigned, before the fence: the previous
        owner (dropped from the group while it still processed) could commit a transaction after
        that read, and its output and changelog writes stand. Its producer is fenced now, so the
        offsets cannot move; the consumer is sought to them (Kafka Streams needs no second read:
        KIP-447's TxnOffsetCommit carries the group generation, which aiokafka's does not).
        """
        resume: dict[TopicPartition, int] = {}
        for tp in partitions:
            offset = await self._consumer.committed(tp)
            if offset is not None:
                self._consumer.seek(tp, offset)
                resume[tp] = offset
        return resume

    async def send_pending(self, tasks: Iterable[StreamTask]) -> None:
        await self._collector.send_pending()
        for task in tasks:
            await task.record_collector.send_pending()

    async def commit(self, prepared: PreparedCommit) -> bool:
        """Per task: 1. its output, changelog writes and offsets in its transaction, committed; 2. the
        state manager notes the changelog offsets; 3. its transactional stores commit their data with
        them (a crash between 1 and 3 leaves the stores behind, which a restart's restore covers).
        Then the thread's output."""
        for task, offsets in prepared:
            collector = task.record_collector
            await collector.commit_transaction(offsets, self._application_id)
            task.post_commit(collector.offsets)
            task.state_manager.commit_stores()
        await self._collector.flush()
        return True


def processing_guarantee(
    config: StreamsConfig,
    collector: RecordCollectorImpl,
    consumer: clients.Consumer,
    new_producer: Callable[[str], clients.Producer],
    *,
    log_prefix: str = "",
) -> ProcessingGuarantee:
    """The implementation for `processing.guarantee`."""
    if config.exactly_once:
        return ExactlyOnce(collector, new_producer, config, consumer, log_prefix=log_prefix)
    return AtLeastOnce(collector, consumer, log_prefix=log_prefix)
