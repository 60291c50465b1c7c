"""RecordCollectorImpl: the runtime's RecordCollector over an aiokafka producer.

Sinks run inside synchronous processing, so `send` only queues the record; the stream thread
hands the queue to the producer (`send_pending`, awaited between batches) and waits for every
delivery at commit (`flush`). Records go to aiokafka as closed batches per partition (partition
chosen with murmur2 as Java's producer does), which costs a third of a `send()` per record and
does not wait out `linger.ms`; each batch is filled in one `fill_batch` call of the producer port
(aiokafka's C batch builder without its per-record Python wrapper). Delivery errors follow `default.production.exception.handler`:
`fail` raises at the next flush, `continue` logs and counts the lost record.

Under exactly-once each task has its own collector over a transactional producer
(`transactional.id` = application id + task id): the first send opens a transaction, and
`commit_transaction` adds the consumed offsets to it and commits, so changelog writes, output
and offsets become visible together or not at all.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from streams_core import clients
from streams_core.clients.ports import OutgoingRecord
from streams_core.common.headers import Headers
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.partitioner import murmur2
from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import ConfigError, StreamsError

__all__ = ["ProductionError", "RecordCollectorImpl"]

log = logging.getLogger(__name__)


class ProductionError(StreamsError):
    """A record could not be delivered to Kafka and the production handler says fail."""


ProductionHandler = Callable[[BaseException], bool]
"""Decides about records the producer could not deliver: True drops them (counted), False fails."""


def resolve_production_handler(setting: Any) -> ProductionHandler:
    """The handler for a `default.production.exception.handler` value, resolved once.

    `fail` (the default) fails the thread at the next flush, `continue` logs and drops; an object
    with a `handle(error) -> bool` method or such a callable decides itself.
    """
    if setting in (None, "fail"):
        return lambda error: False
    if setting == "continue":
        return lambda error: True
    handle = getattr(setting, "handle", setting)
    if callable(handle):
        return lambda error: bool(handle(error))
    raise ConfigError("default.production.exception.handler", f"expected fail, continue or a handler, got {setting!r}")


class RecordCollectorImpl:
    """Queues the records of a thread's tasks (or of one task under exactly-once) for one producer."""

    def __init__(
        self,
        producer: clients.Producer,
        *,
        production_handler: Any = "fail",
        log_prefix: str = "",
        transactional: bool = False,
    ) -> None:
        self.producer = producer
        self.transactional = transactional
        self._in_transaction = False
        self.sent_records = 0
        self.dropped_records = 0
        self._handler = resolve_production_handler(production_handler)
        self._pending: list[OutgoingRecord] = []
        self._partition_counts: dict[str, int] = {}
        self._round_robin: dict[str, int] = {}
        self.offsets: dict[TopicPartition, int] = {}
        """Offset of the last record delivered per partition (the changelog offsets to checkpoint)."""
        self._error: BaseException | None = None
        self._log_prefix = log_prefix

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None:
        self._pending.append((topic, key, value, timestamp, headers, partition))

    def partitions_for(self, topic: str) -> int:
        try:
            return self._partition_counts[topic]
        except KeyError:
            raise StreamsError(
                f"partition count of topic {topic!r} unknown: sinks with a custom partitioner need "
                "their topic to exist when the task starts"
            ) from None

    async def prefetch_partition_counts(self, topics: Mapping[str, Any] | set[str] | frozenset[str]) -> None:
        """Learn the partition counts of sink topics (for custom partitioners) before processing."""
        for topic in topics:
            if topic not in self._partition_counts:
                partitions = await self.producer.partitions_for(topic)
                if partitions:
                    self._partition_counts[topic] = len(partitions)

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def send_pending(self) -> None:
        """Hand the queued records to the producer (does not wait for their delivery)."""
        self._raise_error()
        if not self._pending:
            return
        if self.transactional and not self._in_transaction:
            await self._begin()
        pending, self._pending = self._pending, []
        counts = self._partition_counts
        by_partition: dict[tuple[str, int], list[OutgoingRecord]] = {}
        for record in pending:
            topic, key, _, _, _, partition = record
            if partition is None:
                count = counts.get(topic) or await self._learn_partition_count(topic)
                if key is not None:
                    partition = (murmur2(key) & 0x7FFFFFFF) % count
                else:
                    partition = self._round_robin_partition(topic, count)
            records = by_partition.get((topic, partition))
            if records is None:
                records = by_partition[topic, partition] = []
            records.append(record)
        producer = self.producer
        fill = producer.fill_batch
        # A batch of each partition in turn: aiokafka queues one batch per partition, and a produce
        # request takes the queued batch of every partition. Partition after partition, a second
        # batch waited for a request that carried only the batches queued before it.
        turns = deque((topic, partition, records, 0) for (topic, partition), records in by_partition.items())
        while turns:
            topic, partition, records, index = turns.popleft()
            builder = producer.create_batch()
            filled = fill(builder, records, index)
            if filled == index:
                raise ProductionError(f"{self._log_prefix}a record for {topic} is larger than a whole batch")
            await self._send_batch(builder, topic, partition)
            if filled < len(records):
                turns.append((topic, partition, records, filled))
        self.sent_records += len(pending)

    async def _send_batch(self, builder: clients.ProducerBatch, topic: str, partition: int) -> None:
        """Close a filled batch (so it does not wait out linger.ms) and queue it for its partition."""
        builder.close()
        future = await self.producer.send_batch(builder, topic, partition=partition)
        future.add_done_callback(functools.partial(self._on_delivery, builder.record_count()))

    def _round_robin_partition(self, topic: str, count: int) -> int:
        """Keyless records go round-robin; keyed ones by murmur2 as Java's producer (send_pending)."""
        turn = self._round_robin.get(topic, -1) + 1
        self._round_robin[topic] = turn
        return turn % count

    async def _learn_partition_count(self, topic: str) -> int:
        partitions = await self.producer.partitions_for(topic)
        if not partitions:
            raise ProductionError(f"{self._log_prefix}topic {topic!r} has no partitions (does it exist?)")
        self._partition_counts[topic] = len(partitions)
        return len(partitions)

    async def flush(self) -> None:
        """Send what is queued and wait until the producer has delivered everything."""
        await self.send_pending()
        await self.producer.flush()
        self._raise_error()

    async def _begin(self) -> None:
        await self.producer.begin_transaction()
        self._in_transaction = True

    async def commit_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group_id: str) -> None:
        """Send what is queued, add the consumed `offsets` to the transaction, and commit it."""
        if not self._pending and not offsets and not self._in_transaction:
            return
        if not self._in_transaction:
            await self._begin()
        await self.flush()
        if offsets:
            await self.producer.send_offsets_to_transaction(offsets, group_id)
        await self.producer.commit_transaction()
        self._in_transaction = False

    async def close(self, *, clean: bool) -> None:
        """Stop a task's own producer; an unclean close aborts the open transaction."""
        self._pending.clear()
        if self._in_transaction and not clean:
            try:
                await self.producer.abort_transaction()
            except Exception as exc:
                log.warning("%saborting the transaction failed: %r", self._log_prefix, exc)
            self._in_transaction = False
        await self.producer.stop()

    def clear_pending(self) -> None:
        """Forget queued records (their task is closed without commit; they will be reprocessed)."""
        self._pending.clear()

    def _on_delivery(self, records: int, future: asyncio.Future[Any]) -> None:
        """A batch of `records` was delivered (note its last offset) or failed (apply the handler)."""
        if future.cancelled():
            return
        error = future.exception()
        if error is None:
            metadata = future.result()
            self.offsets[TopicPartition(metadata.topic, metadata.partition)] = metadata.offset + records - 1
            return
        if not isinstance(error, clients.ProducerFenced) and self._handler(error):  # fenced: the task migrated
            self.dropped_records += records
            log.warning("%sdropping %d records the producer could not deliver: %r", self._log_prefix, records, error)
            return
        if self._error is None:
            self._error = error

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            if isinstance(error, clients.ProducerFenced):
                raise error  # the thread closes its tasks dirty and rejoins (Kafka Streams' TaskMigratedException)
            raise ProductionError(f"{self._log_prefix}failed to deliver a record: {error!r}") from error
