"""The client ports: the small interfaces the runtime uses to talk to Kafka, and their supplier.

The runtime (stream threads, tasks, the changelog reader, the collector, KafkaStreams) sees
Kafka only through these protocols, with the runtime's own `TopicPartition`. A
`KafkaClientSupplier` (Kafka Streams' name) creates the clients: `AioKafkaClientSupplier` for a
real broker, `streams_core.testing.FakeKafkaClientSupplier` for broker-free unit tests. Each
protocol lists only the methods the runtime calls.

Errors stay aiokafka's classes, re-exported by `streams_core.clients` (`CommitFailedError`,
`RebalanceInProgressError`, `IllegalStateError`, `OffsetOutOfRangeError`, `ProducerFenced`...),
so an implementation raises the same types the runtime catches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeAlias, TypeVar

from streams_core.common.headers import Headers
from streams_core.common.record_metadata import RecordMetadata

if TYPE_CHECKING:
    from streams_core.clients.admin import NewTopicSpec
    from streams_core.clients.streams_group_membership import MemberInfo
    from streams_core.clients.streams_group_protocol import EndpointPartitions, GroupStatus, TaskAssignment
    from streams_core.common.offset_and_metadata import OffsetAndMetadata
    from streams_core.common.task_id import TaskId
    from streams_core.common.topic_partition import TopicPartition
    from streams_core.config import StreamsConfig

__all__ = [
    "Admin",
    "Consumer",
    "EncodedInfo",
    "GroupAssignor",
    "KafkaClientSupplier",
    "MemberAssignment",
    "OutgoingRecord",
    "Producer",
    "ProducerBatch",
    "RawRecord",
    "RebalanceListener",
    "RecordMetadata",
    "StreamsGroupAssignor",
]


OutgoingRecord: TypeAlias = "tuple[str, bytes | None, bytes | None, int, Headers, int | None]"
"""A serialized record to produce, as the record collector queues it: (topic, key, value,
timestamp, headers, partition or None)."""


class RawRecord(RecordMetadata, Protocol):
    """A fetched record as the consumer returns it: bytes, not yet deserialized."""

    @property
    def timestamp(self) -> int: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def headers(self) -> Sequence[tuple[str, bytes]]: ...


class EncodedInfo(Protocol):
    """What the leader tells a member beside its partitions (the runtime's `AssignmentInfo`)."""

    def encode(self) -> bytes: ...


InfoT = TypeVar("InfoT", bound=EncodedInfo)


@dataclass(slots=True, frozen=True)
class MemberAssignment(Generic[InfoT]):
    """One member's share of a group assignment: the partitions it consumes and the leader's
    information for it, sent encoded as the member's user data."""

    partitions: frozenset[TopicPartition]
    info: InfoT

    @property
    def user_data(self) -> bytes:
        return self.info.encode()


class GroupAssignor(Protocol):
    """The assignor a main consumer joins its group with (`StreamsPartitionAssignor`).

    `subscription()` is this member's user data; the leader's `assign()` gets every member's and
    the partition counts of the subscribed topics; every member then gets `on_assignment()` with
    its own user data, before the rebalance listener's `on_partitions_assigned`.
    """

    def subscription(self) -> bytes: ...

    def assign(
        self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, bytes]
    ) -> Mapping[str, MemberAssignment[Any]]: ...

    def on_assignment(self, user_data: bytes) -> None: ...


class StreamsGroupAssignor(GroupAssignor, Protocol):
    """The thread's assignor as a streams group member (`group.protocol=streams`, KIP-1071) uses it:
    the broker assigns, the assignor says what the member joins with and keeps what it is given in
    the form `on_assignment` keeps the classic leader's assignment."""

    def streams_group_member_info(self) -> MemberInfo: ...

    def streams_group_partitions(self, tasks: Iterable[TaskId]) -> frozenset[TopicPartition]:
        """The partitions the main consumer reads for these active tasks."""
        ...

    def on_streams_group_assignment(
        self, tasks: TaskAssignment, endpoints: Sequence[EndpointPartitions], statuses: Sequence[GroupStatus] = ()
    ) -> None: ...


class RebalanceListener(Protocol):
    """Called by the main consumer around a rebalance.

    Classic protocol: eager, everything is revoked each time. Streams protocol: only the partitions
    of the tasks the broker takes away are revoked (before any is assigned); `on_partitions_assigned`
    gets the whole new assignment; a member fenced by the broker calls `on_partitions_lost` when the
    listener has it (Kafka's `onPartitionsLost`: close without committing), else `on_partitions_revoked`.
    """

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None: ...

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None: ...


class Consumer(Protocol):
    """A consumer: subscribed in a group (the main consumer) or assigned by hand (restore, global).

    Paused partitions are forgotten across a rebalance; `getmany` skips them. "Caught up" is
    `position(tp) >= end_offsets()[tp]`: transaction markers take offsets but are never returned.
    """

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None: ...

    def assign(self, partitions: Iterable[TopicPartition]) -> None: ...

    def assignment(self) -> frozenset[TopicPartition]: ...

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> Mapping[TopicPartition, Sequence[RawRecord]]: ...

    def pause(self, *partitions: TopicPartition) -> None: ...

    def resume(self, *partitions: TopicPartition) -> None: ...

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None: ...

    async def position(self, partition: TopicPartition) -> int: ...

    async def committed(self, partition: TopicPartition) -> int | None:
        """The group's committed offset of `partition`, asked of the broker now (KIP-447's stable read)."""
        ...

    async def committed_with_metadata(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets of `partitions` with their metadata, asked of the broker now
        (stable, as `committed`); a partition without one is left out (Kafka's `committed(Set)`)."""
        ...

    def highwater(self, partition: TopicPartition) -> int | None:
        """The partition's end offset as of the last fetch (None before one); for the records-lag metric."""
        ...

    def current_lag(self, partition: TopicPartition) -> int | None:
        """Records between the position and the end offset (the last stable offset under
        read_committed) as of the last fetch response; None before one, or while the position is
        unknown (Kafka's `Consumer.currentLag`; `max.task.idle.ms` waits for a lag above 0)."""
        ...

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None: ...

    def enforce_rebalance(self) -> None:
        """Rejoin the group at the next poll (Kafka's `Consumer.enforceRebalance`): tasks migrated."""
        ...


class ProducerBatch(Protocol):
    """A batch of records for one partition, filled by `append` and sent whole."""

    def append(
        self, *, timestamp: int | None, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]
    ) -> object | None:
        """Add a record; None when the batch is full (send it and start another)."""
        ...

    def close(self) -> None: ...

    def record_count(self) -> int: ...


class Producer(Protocol):
    """A producer, transactional when created with a `transactional.id`."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def create_batch(self) -> ProducerBatch: ...

    def fill_batch(self, batch: ProducerBatch, records: Sequence[OutgoingRecord], start: int) -> int:
        """Append `records[start:]` to `batch` until it is full (then closed); the index of the first
        record left out. One call per batch instead of one `append` per record."""
        ...

    async def send_batch(
        self, batch: ProducerBatch, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]: ...

    async def flush(self) -> None: ...

    async def partitions_for(self, topic: str) -> set[int]: ...

    async def begin_transaction(self) -> None: ...

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group_id: str
    ) -> None: ...

    async def commit_transaction(self) -> None: ...

    async def abort_transaction(self) -> None: ...


class Admin(Protocol):
    """Topic administration as the runtime needs it: counts, creating internal topics, deleting."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def partition_counts(self, topics: Iterable[str]) -> dict[str, int | None]:
        """Partition count per topic; None for a topic that does not exist."""
        ...

    async def ensure_topics(self, specs: Sequence[NewTopicSpec]) -> list[str]:
        """Create the topics that do not exist; error if one exists with another partition count."""
        ...

    async def delete_topics(self, topics: Iterable[str]) -> None: ...

    async def list_topics(self) -> list[str]:
        """Every topic of the cluster (for pattern subscriptions)."""
        ...

    async def committed_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None where it has none), never older than
        a transaction that has committed (KIP-447's stable read)."""
        ...


class KafkaClientSupplier(Protocol):
    """Creates the clients of a KafkaStreams instance (Kafka Streams' `KafkaClientSupplier`).

    Factories are called with the event loop running; none connects: `await client.start()` does.
    """

    def get_main_consumer(
        self, config: StreamsConfig, *, assignor: GroupAssignor, thread_index: int = 1, client_id: str | None = None
    ) -> Consumer: ...

    def get_restore_consumer(self, config: StreamsConfig, *, thread_index: int = 1) -> Consumer: ...

    def get_global_consumer(self, config: StreamsConfig) -> Consumer: ...

    def get_producer(
        self, config: StreamsConfig, *, transactional_id: str | None = None, thread_index: int = 1
    ) -> Producer: ...

    def get_admin(self, config: StreamsConfig) -> Admin: ...
