"""GlobalStreamThread: the global stores of one instance, fed from every partition of their topics.

Global tables and `add_global_store` stores are replicated whole on every instance (no group, no
partitioning). One global thread per instance assigns itself every partition of the global
topics, bootstraps the stores to the topics' current end before the stream threads start (so a
join never misses a key that was already there), then keeps them up to date. Records go through
the global sub-topology's processors (the source's serdes and the store's processor), also while
bootstrapping, so a custom global processor sees every record; the stores' state lives under
`state.dir/<application.id>/global/` with a `.checkpoint` of the topics' offsets, so a restart
only reads the tail. A failure after start ends the thread and is reported to `on_error` (the
client then closes to ERROR: a global thread cannot be replaced, as in Kafka Streams).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from streams_core import clients
from streams_core.common.store import StateStore
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.processor.internals.processor_node import SourceNode
from streams_core.processor.internals.stream_time import StreamTime
from streams_core.processor.internals.task_processor import TaskProcessor
from streams_core.processor.processor import Record
from streams_core.runtime.restore.standby_task import NoRecords
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.internals.thread_cache import ThreadCache

__all__ = ["GlobalStreamThread"]

log = logging.getLogger(__name__)

_Reader = tuple[Any, SourceNode]
GlobalThreadErrorCallback = Callable[["GlobalStreamThread", BaseException], None]


class GlobalStreamThread:
    """Bootstraps and then maintains the global stores of one KafkaStreams instance."""

    def __init__(
        self,
        metadata: TopologyMetadata,
        config: StreamsConfig,
        client_supplier: clients.KafkaClientSupplier,
        partition_counts: Mapping[str, int],
        on_error: GlobalThreadErrorCallback | None = None,
        *,
        cache_max_bytes: int | None = None,
        directory: str = "global",
    ) -> None:
        """`on_error` is called, on the event loop, with the exception that ended the thread after start;
        `cache_max_bytes` is the global stores' share of `statestore.cache.max.bytes` (all of it when None);
        `directory` is the stores' directory under the application's (a worker process has one of its own)."""
        self._config = config
        self._on_error = on_error
        self._clients = client_supplier
        self.name = f"{metadata.application_id}-GlobalStreamThread"
        self._log_prefix = f"global-stream-thread [{self.name}] "
        topology = metadata.builder.build_global_subtopology(config)
        if topology is None:
            raise ValueError("the topology has no global store")
        task_id = TaskId(topology.subtopology_id, 0)
        state_dir = Path(config["state.dir"]) / metadata.application_id / directory
        self._state = ProcessorStateManager(
            task_id,
            metadata.application_id,
            state_dir,
            default_key_serde=config["default.key.serde"],
            default_value_serde=config["default.value.serde"],
        )
        self.processor = TaskProcessor(task_id, topology, config, self._state, NoRecords(), global_task=True)
        self.cache = ThreadCache(config["statestore.cache.max.bytes"] if cache_max_bytes is None else cache_max_bytes)
        """The record cache of the global stores, resized with the stream threads' (KIP-663)."""
        self.processor.context.cache = self.cache
        self.partitions = sorted(
            TopicPartition(topic, p) for topic in metadata.global_topics for p in range(partition_counts[topic])
        )
        self._consumer: clients.Consumer | None = None
        self._readers: dict[str, _Reader] = {}
        self._offsets: dict[TopicPartition, int] = {}
        self._runner: asyncio.Task[None] | None = None
        self._stopping = False
        self.processed_records = 0

    @property
    def stores(self) -> dict[str, StateStore]:
        """The global stores by name (for tasks' state managers and queries)."""
        return self._state.stores

    async def start(self) -> None:
        """Open the stores, read every global partition up to its current end, then keep reading."""
        self.processor.init_state_stores()
        self.processor.init_processors()
        topics = {tp.topic for tp in self.partitions}
        self._readers = {
            topic: (self.processor.record_reader(topic, StreamTime(), extract_timestamps=False), self.processor.source_node(topic)) for topic in topics
        }
        consumer = self._consumer = self._clients.get_global_consumer(self._config)
        await consumer.start()
        consumer.assign(self.partitions)
        checkpoint = {TopicPartition(t, p): o for (t, p), o in self._state.checkpoint_file.read().items()}
        for tp in self.partitions:
            if tp in checkpoint:
                consumer.seek(tp, checkpoint[tp])
            else:
                await consumer.seek_to_beginning(tp)
        started = time.monotonic()
        await self._bootstrap(consumer)
        self._checkpoint()
        log.info(
            "%sbootstrapped %d partitions of %s (%d records in %.1f s)",
            self._log_prefix, len(self.partitions), sorted(topics), self.processed_records, time.monotonic() - started,
        )
        self._runner = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def _bootstrap(self, consumer: clients.Consumer) -> None:
        ends = await consumer.end_offsets(self.partitions)
        remaining = {tp for tp in self.partitions if ends[tp] > 0}
        while remaining:
            await self._poll(consumer, 200)
            for tp in list(remaining):
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)

    async def _poll(self, consumer: clients.Consumer, timeout_ms: int) -> None:
        try:
            batch = await consumer.getmany(timeout_ms=timeout_ms, max_records=10_000)
        except clients.OffsetOutOfRangeError as exc:
            log.warning("%s%r: reading the global topics from the beginning", self._log_prefix, exc)
            await consumer.seek_to_beginning(*self.partitions)
            return
        processor = self.processor
        for tp, records in batch.items():
            reader, source = self._readers[tp.topic]
            for raw in records:
                record: Record[Any, Any] | None = reader(raw)
                if record is not None:
                    processor.process_record(source, record, tp.topic, tp.partition, raw.offset)
            if records:
                self._offsets[tp] = records[-1].offset + 1
                self.processed_records += len(records)

    async def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        interval = self._config["commit.interval.ms"] / 1000
        last_checkpoint = time.monotonic()
        try:
            while not self._stopping:
                await self._poll(consumer, self._config["poll.ms"])
                if time.monotonic() - last_checkpoint >= interval:
                    self._checkpoint()
                    last_checkpoint = time.monotonic()
        except Exception as exc:
            log.error("%sdied: %r", self._log_prefix, exc, exc_info=exc)
            if self._on_error is not None:
                self._on_error(self, exc)

    def _checkpoint(self) -> None:
        """Flush the stores, then record how far they are in each global partition."""
        self._state.flush()
        if self._offsets:
            stored = {(tp.topic, tp.partition): o for tp, o in self._offsets.items()}
            self._state.checkpoint_file.write(self._state.checkpoint_file.read() | stored)

    async def stop(self) -> None:
        """Stop reading, checkpoint, close the stores and the consumer."""
        self._stopping = True
        if self._runner is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        try:
            if self.processor.state.name == "RUNNING":
                self._checkpoint()
        finally:
            try:
                self.processor.close()
            finally:
                if self._consumer is not None:
                    await self._consumer.stop()
        log.info("%sstopped", self._log_prefix)
