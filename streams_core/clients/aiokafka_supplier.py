"""AioKafkaClientSupplier: the client ports over aiokafka, the default `KafkaClientSupplier`.

Each adapter is a thin wrapper that converts between the runtime's `TopicPartition` and
aiokafka's at the boundary (once per batch or call, never per record) and passes the rest on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from streams_core.clients.admin import InternalTopicManager, NewTopicSpec
from streams_core.clients.client_config import default_client_id
from streams_core.clients.kafka_clients import (
    AIOKafkaAdminClient,
    AIOKafkaConsumer,
    AIOKafkaProducer,
    ConsumerRebalanceListener,
    KafkaConnectionError,
    KafkaTopicPartition,
    create_admin,
    create_global_consumer,
    create_main_consumer,
    create_producer,
    create_restore_consumer,
)
from streams_core.clients.ports import (
    GroupAssignor,
    OutgoingRecord,
    ProducerBatch,
    RawRecord,
    RebalanceListener,
    RecordMetadata,
)
from streams_core.clients.stable_offsets import fetch_stable_offsets, read_committed_stably
from streams_core.clients.streams_assignor_adapter import StreamsAssignorAdapter
from streams_core.clients.streams_group_channel import OwnedStreamsGroupChannel
from streams_core.clients.streams_group_consumer import StreamsGroupConsumer, streams_group_consumer
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig

__all__ = ["AioKafkaAdmin", "AioKafkaClientSupplier", "AioKafkaConsumer", "AioKafkaProducer"]


_NO_HEADERS: list[tuple[str, bytes]] = []
"""Shared by every record without headers: aiokafka's batch builder wants a list and only reads it."""


def _kafka(tp: TopicPartition) -> KafkaTopicPartition:
    return KafkaTopicPartition(tp.topic, tp.partition)


def _ours(tp: Any) -> TopicPartition:
    return TopicPartition(tp.topic, tp.partition)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka is untyped
    def __init__(self, listener: RebalanceListener, paused: set[TopicPartition]) -> None:
        self._listener = listener
        self._paused = paused

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self._paused.clear()  # eager protocol: everything is revoked, and a pause does not outlive its assignment
        await self._listener.on_partitions_revoked(frozenset(_ours(tp) for tp in revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self._listener.on_partitions_assigned(frozenset(_ours(tp) for tp in assigned))


class AioKafkaConsumer:
    """The `Consumer` port over an `AIOKafkaConsumer`.

    `pause` keeps what was already fetched, as the Java consumer does: a paused partition is left
    out of `getmany` rather than paused in aiokafka, whose pause drops the partition's fetched
    records and leaves it out of the next fetch, so that a resumed partition waits for a fetch held
    up to `fetch.max.wait.ms` by the others. aiokafka keeps at most one fetch response per
    partition it has not returned, which bounds the memory a paused partition holds.
    """

    __slots__ = ("_consumer", "_paused", "_started", "_subscription")

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self._consumer = consumer
        self._paused: set[TopicPartition] = set()
        self._started = False
        self._subscription: tuple[list[str], _Listener] | None = None

    async def start(self) -> None:
        """Start, make committed-offset reads stable, then subscribe (a subscription made before the
        start joins the group only now: aiokafka's start would join, and read the first
        assignment's offsets, before its coordinator could be made stable)."""
        await self._consumer.start()
        read_committed_stably(self._consumer)
        self._started = True
        if self._subscription is not None:
            topics, listener = self._subscription
            self._subscription = None
            self._consumer.subscribe(topics, listener=listener)

    async def stop(self) -> None:
        await self._consumer.stop()

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None:
        wrapped = _Listener(listener, self._paused)
        if not self._started:
            self._subscription = (list(topics), wrapped)
            return
        self._consumer.subscribe(list(topics), listener=wrapped)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        assigned = list(partitions)
        self._paused.intersection_update(assigned)
        self._consumer.assign([_kafka(tp) for tp in assigned])

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(_ours(tp) for tp in self._consumer.assignment())

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> Mapping[TopicPartition, Sequence[RawRecord]]:
        paused = self._paused
        if paused:
            wanted = partitions or self.assignment()
            partitions = tuple(tp for tp in wanted if tp not in paused)
            if not partitions:  # everything asked is paused: nothing to return, as aiokafka would after the timeout
                if timeout_ms:
                    await asyncio.sleep(timeout_ms / 1000)
                return {}
        batch = await self._consumer.getmany(
            *(_kafka(tp) for tp in partitions), timeout_ms=timeout_ms, max_records=max_records
        )
        return {TopicPartition(tp.topic, tp.partition): records for tp, records in batch.items()}

    def pause(self, *partitions: TopicPartition) -> None:
        self._paused.update(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._paused.difference_update(partitions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._consumer.seek(_kafka(partition), offset)

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        await self._consumer.seek_to_beginning(*(_kafka(tp) for tp in partitions))

    async def position(self, partition: TopicPartition) -> int:
        return int(await self._consumer.position(_kafka(partition)))

    async def committed(self, partition: TopicPartition) -> int | None:
        offset = await self._consumer.committed(_kafka(partition))
        return None if offset is None else int(offset)

    async def committed_with_metadata(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """aiokafka's `committed()` drops the metadata: its group coordinator's fetch (the one
        `committed()` makes, made stable by `read_committed_stably`) keeps it."""
        found = await self._consumer._coordinator.fetch_committed_offsets([_kafka(tp) for tp in partitions])
        return {
            _ours(tp): OffsetAndMetadata(int(committed.offset), committed.metadata or "")
            for tp, committed in found.items()
            if committed.offset >= 0
        }

    def highwater(self, partition: TopicPartition) -> int | None:
        """None while unknown, also for a partition not assigned (aiokafka asserts): a stale query can ask
        for a standby's changelog while the standby is being promoted or closed."""
        kafka_partition = _kafka(partition)
        if kafka_partition not in self._consumer.assignment():
            return None
        value = self._consumer.highwater(kafka_partition)
        return None if value is None else int(value)

    def current_lag(self, partition: TopicPartition) -> int | None:
        """aiokafka's partition state, read as the Java consumer's `currentLag`: the high watermark
        (the last stable offset under read_committed) of the last fetch response minus the
        position, which counts records fetched but not yet returned by `getmany` as lag."""
        consumer = self._consumer
        subscription = consumer._subscription.subscription
        assignment = None if subscription is None else subscription.assignment
        state = None if assignment is None else assignment.state_value(_kafka(partition))
        if state is None or not state.has_valid_position:
            return None
        end = state.lso if consumer._isolation_level == "read_committed" else state.highwater
        return None if end is None or end < 0 else max(int(end) - int(state.position), 0)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        ends = await self._consumer.end_offsets([_kafka(tp) for tp in partitions])
        return {_ours(tp): offset for tp, offset in ends.items()}

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        await self._consumer.commit({_kafka(tp): tuple(committed) for tp, committed in offsets.items()})

    def enforce_rebalance(self) -> None:
        """aiokafka has no public call for it: ask its group coordinator to rejoin (as a failed heartbeat would)."""
        coordinator = getattr(self._consumer, "_coordinator", None)
        if coordinator is not None:
            coordinator.request_rejoin()


class AioKafkaProducer:
    """The `Producer` port over an `AIOKafkaProducer` (batches are aiokafka's BatchBuilder)."""

    __slots__ = ("_producer",)

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer

    async def start(self) -> None:
        try:
            await self._producer.start()
        except AssertionError as exc:  # aiokafka asserts when its metadata lists no broker to ask
            raise KafkaConnectionError(f"no broker known to start the producer: {exc}") from exc

    async def stop(self) -> None:
        await self._producer.stop()

    def create_batch(self) -> ProducerBatch:
        batch: ProducerBatch = self._producer.create_batch()
        return batch

    def fill_batch(self, batch: ProducerBatch, records: Sequence[OutgoingRecord], start: int) -> int:
        """aiokafka's `BatchBuilder.append` is a Python wrapper (keyword arguments, a `_serialize`
        call) around its C builder: the C builder's own `append` here, the batch's count kept."""
        builder: Any = batch
        append = builder._builder.append
        offset = builder._relative_offset
        no_headers = _NO_HEADERS
        end = len(records)
        index = start
        while index < end:
            _, key, value, timestamp, headers, _ = records[index]
            if append(offset, timestamp, key, value, list(headers) if headers else no_headers) is None:
                batch.close()
                break
            offset += 1
            index += 1
        builder._relative_offset = offset
        return index

    async def send_batch(self, batch: ProducerBatch, topic: str, *, partition: int) -> asyncio.Future[RecordMetadata]:
        future: asyncio.Future[RecordMetadata] = await self._producer.send_batch(batch, topic, partition=partition)
        return future

    async def flush(self) -> None:
        await self._producer.flush()

    async def partitions_for(self, topic: str) -> set[int]:
        return set(await self._producer.partitions_for(topic) or ())

    async def begin_transaction(self) -> None:
        await self._producer.begin_transaction()

    async def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group_id: str) -> None:
        await self._producer.send_offsets_to_transaction({_kafka(tp): tuple(o) for tp, o in offsets.items()}, group_id)

    async def commit_transaction(self) -> None:
        await self._producer.commit_transaction()

    async def abort_transaction(self) -> None:
        await self._producer.abort_transaction()


class AioKafkaAdmin:
    """The `Admin` port: an aiokafka admin client behind an `InternalTopicManager`."""

    __slots__ = ("_admin", "_manager")

    def __init__(self, admin: AIOKafkaAdminClient, *, replication_factor: int) -> None:
        self._admin = admin
        self._manager = InternalTopicManager(admin, replication_factor=replication_factor)

    async def start(self) -> None:
        await self._admin.start()

    async def close(self) -> None:
        await self._admin.close()

    async def partition_counts(self, topics: Iterable[str]) -> dict[str, int | None]:
        return await self._manager.partition_counts(topics)

    async def ensure_topics(self, specs: Sequence[NewTopicSpec]) -> list[str]:
        return await self._manager.ensure_topics(specs)

    async def delete_topics(self, topics: Iterable[str]) -> None:
        await self._manager.delete_topics(topics)

    async def list_topics(self) -> list[str]:
        return sorted(await self._admin.list_topics())

    async def committed_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        return await fetch_stable_offsets(self._admin, group_id, partitions)


class AioKafkaClientSupplier:
    """Creates aiokafka clients from a `StreamsConfig` (the default supplier of KafkaStreams)."""

    def get_main_consumer(
        self, config: StreamsConfig, *, assignor: GroupAssignor, thread_index: int = 1, client_id: str | None = None
    ) -> AioKafkaConsumer | StreamsGroupConsumer:
        """The thread's consumer in the group `application.id`: a classic group member with our
        assignor, or under `group.protocol=streams` a streams group member (KIP-1071) over a consumer
        assigned by hand, with the heartbeats sent through its own admin client."""
        consumer = AioKafkaConsumer(
            create_main_consumer(config, assignor=StreamsAssignorAdapter(assignor), thread_index=thread_index, client_id=client_id)
        )
        if config["group.protocol"] != "streams":
            return consumer
        client_id = client_id or default_client_id(config, "main.consumer", thread_index)
        channel = OwnedStreamsGroupChannel(create_admin(config, client_id=f"{client_id}-streams-group"), config["application.id"])
        return streams_group_consumer(config, assignor, consumer, channel, client_id=client_id)

    def get_restore_consumer(self, config: StreamsConfig, *, thread_index: int = 1) -> AioKafkaConsumer:
        return AioKafkaConsumer(create_restore_consumer(config, thread_index=thread_index))

    def get_global_consumer(self, config: StreamsConfig) -> AioKafkaConsumer:
        return AioKafkaConsumer(create_global_consumer(config))

    def get_producer(
        self, config: StreamsConfig, *, transactional_id: str | None = None, thread_index: int = 1
    ) -> AioKafkaProducer:
        return AioKafkaProducer(create_producer(config, transactional_id=transactional_id, thread_index=thread_index))

    def get_admin(self, config: StreamsConfig) -> AioKafkaAdmin:
        return AioKafkaAdmin(create_admin(config), replication_factor=config["replication.factor"])
