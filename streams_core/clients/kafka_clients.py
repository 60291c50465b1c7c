"""Factories of the aiokafka clients a Kafka Streams instance uses, and the aiokafka names it needs.

The runtime builds its clients here from a `StreamsConfig` and never imports aiokafka itself:
the assignor base class, the rebalance listener, the structs and the errors it has to catch are
re-exported from this module. Each factory must be called with an event loop running (aiokafka
binds to it in its constructors); none of them connects: `await client.start()` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aiokafka import (
    AIOKafkaConsumer,
    AIOKafkaProducer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    OffsetAndMetadata,
)
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.errors import (
    CommitFailedError,
    ConsumerStoppedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    ProducerFenced,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

from streams_core.clients.client_config import admin_kwargs, consumer_kwargs, producer_kwargs
from streams_core.config import StreamsConfig

if TYPE_CHECKING:
    from streams_core.common.topic_partition import TopicPartition

__all__ = [
    "AIOKafkaAdminClient",
    "AIOKafkaConsumer",
    "AIOKafkaProducer",
    "AbstractPartitionAssignor",
    "ClusterMetadata",
    "CommitFailedError",
    "ConsumerProtocolMemberAssignment",
    "ConsumerProtocolMemberMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerStoppedError",
    "IllegalStateError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "KafkaTopicPartition",
    "OffsetAndMetadata",
    "OffsetOutOfRangeError",
    "ProducerFenced",
    "RebalanceInProgressError",
    "UnknownMemberIdError",
    "create_admin",
    "create_global_consumer",
    "create_main_consumer",
    "create_producer",
    "create_restore_consumer",
    "from_aiokafka",
    "from_aiokafka_offsets",
    "to_aiokafka",
    "to_aiokafka_offsets",
    "to_aiokafka_partitions",
]


def create_main_consumer(
    config: StreamsConfig,
    *,
    assignor: AbstractPartitionAssignor,
    group_id: str | None = None,
    thread_index: int = 1,
    client_id: str | None = None,
    topics: Sequence[str] | None = None,
    rebalance_listener: ConsumerRebalanceListener | None = None,
) -> AIOKafkaConsumer:
    """The consumer of one stream thread: joins the group `application.id` with `assignor` only.

    Exactly one assignor is passed because aiokafka sends one JoinGroup per assignor. `topics`
    subscribes at once (with `rebalance_listener`); leave it out to subscribe later, after the
    internal topics exist (the assignor's `assign()` is synchronous and cannot create them).
    """
    if rebalance_listener is not None and not topics:
        raise ValueError("rebalance_listener needs topics: it is installed by subscribe()")
    kwargs = consumer_kwargs(
        config, "main.consumer", group_id=group_id, client_id=client_id, thread_index=thread_index
    )
    consumer = AIOKafkaConsumer(partition_assignment_strategy=(assignor,), **kwargs)
    if topics:
        consumer.subscribe(list(topics), listener=rebalance_listener)
    return consumer


def create_restore_consumer(
    config: StreamsConfig, *, thread_index: int = 1, client_id: str | None = None
) -> AIOKafkaConsumer:
    """A consumer without a group for changelogs: partitions are assigned and sought by hand.

    `auto.offset.reset` is `none`, so an offset that fell out of the changelog raises
    `OffsetOutOfRangeError` instead of silently skipping data; the caller then restores from
    the beginning.
    """
    kwargs = consumer_kwargs(config, "restore.consumer", client_id=client_id, thread_index=thread_index)
    return AIOKafkaConsumer(**kwargs)


def create_global_consumer(config: StreamsConfig, *, client_id: str | None = None) -> AIOKafkaConsumer:
    """A consumer without a group for global tables (`global.consumer.` settings)."""
    return AIOKafkaConsumer(**consumer_kwargs(config, "global.consumer", client_id=client_id))


def create_producer(
    config: StreamsConfig,
    *,
    transactional_id: str | None = None,
    thread_index: int = 1,
    client_id: str | None = None,
) -> AIOKafkaProducer:
    """A producer; with `transactional_id` (application id + task id under exactly-once) a transactional one."""
    return AIOKafkaProducer(
        **producer_kwargs(config, transactional_id=transactional_id, client_id=client_id, thread_index=thread_index)
    )


def create_admin(config: StreamsConfig, *, client_id: str | None = None) -> AIOKafkaAdminClient:
    """An admin client for internal topics (see `InternalTopicManager`)."""
    return AIOKafkaAdminClient(**admin_kwargs(config, client_id=client_id))


def to_aiokafka(tp: Any) -> KafkaTopicPartition:
    """aiokafka's TopicPartition for anything with `.topic` and `.partition`."""
    if type(tp) is KafkaTopicPartition:
        return tp
    return KafkaTopicPartition(tp.topic, tp.partition)


def from_aiokafka(tp: Any) -> TopicPartition:
    """The runtime's TopicPartition for aiokafka's (or anything with `.topic` and `.partition`).

    Imported on use: the runtime imports this package, so a module-level import could cycle.
    """
    from streams_core.common.topic_partition import TopicPartition

    if type(tp) is TopicPartition:
        return tp
    return TopicPartition(tp.topic, tp.partition)


def to_aiokafka_offsets(offsets: Mapping[Any, int]) -> dict[KafkaTopicPartition, int]:
    """Offsets keyed by the runtime's partitions, keyed by aiokafka's (for commit and seek)."""
    return {to_aiokafka(tp): offset for tp, offset in offsets.items()}


def from_aiokafka_offsets(offsets: Mapping[Any, Any]) -> dict[TopicPartition, Any]:
    """Values keyed by aiokafka's partitions (end offsets, records), keyed by the runtime's."""
    return {from_aiokafka(tp): value for tp, value in offsets.items()}


def to_aiokafka_partitions(partitions: Iterable[Any]) -> list[KafkaTopicPartition]:
    """aiokafka's TopicPartitions for `assign`, `pause`, `seek_to_beginning`, `end_offsets`."""
    return [to_aiokafka(tp) for tp in partitions]
