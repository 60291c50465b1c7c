"""FakeKafkaClientSupplier: the client ports over a `FakeKafkaCluster`, for broker-free runtime tests.

`KafkaStreams(topology, config, client_supplier=FakeKafkaClientSupplier(cluster))` runs the real
runtime against in-memory topics. The clients behave as the aiokafka adapters do where the
runtime depends on it: `getmany` waits (without spinning) up to `timeout_ms`, honours
`max_records` and pauses and returns nothing for unassigned partitions; pauses are forgotten
across a rebalance; positions come from the group's committed offsets or `auto.offset.reset`;
`isolation.level` is read_committed under exactly-once; producers deliver batches on the next
loop iteration and `flush` waits for them. Errors are aiokafka's classes (`streams_core.clients`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from streams_core import clients
from streams_core.clients.admin import NewTopicSpec
from streams_core.clients.client_config import ClientKind
from streams_core.clients.ports import (
    Admin,
    Consumer,
    GroupAssignor,
    KafkaClientSupplier,
    Producer,
    RebalanceListener,
)
from streams_core.clients.streams_group_consumer import StreamsGroupConsumer, streams_group_consumer
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.testing.fake_kafka_cluster import (
    ClusterEvent,
    FakeKafkaCluster,
    FakeRecord,
    FakeRecordMetadata,
)
from streams_core.testing.fake_producer import FakeBatch, FakeProducer
from streams_core.testing.fake_streams_group import FakeStreamsGroupTransport

__all__ = [
    "ClusterEvent",
    "FakeAdmin",
    "FakeBatch",
    "FakeConsumer",
    "FakeKafkaClientSupplier",
    "FakeKafkaCluster",
    "FakeProducer",
    "FakeRecord",
    "FakeRecordMetadata",
]

log = logging.getLogger(__name__)

_member_ids = itertools.count(1)


class FakeConsumer:
    """The `Consumer` port: a group member (subscribe) or assigned by hand (restore, global)."""

    __slots__ = (
        "_assignment", "_fetched_ends", "_listener", "_manual", "_member", "_paused", "_positions", "_turn", "assignor",
        "auto_offset_reset", "client_id", "cluster", "generation", "group_id", "max_poll_records", "member_id",
        "read_committed", "started", "stopped", "topics",
    )

    def __init__(
        self,
        cluster: FakeKafkaCluster,
        *,
        client_id: str,
        group_id: str | None,
        assignor: GroupAssignor | None = None,
        read_committed: bool = False,
        auto_offset_reset: str = "earliest",
        max_poll_records: int = 1000,
    ) -> None:
        self.cluster = cluster
        self.client_id = client_id
        self.group_id = group_id
        self.member_id = f"{client_id}-{next(_member_ids)}"
        self.assignor = assignor
        self.read_committed = read_committed
        self.auto_offset_reset = auto_offset_reset
        self.max_poll_records = max_poll_records
        self.topics: tuple[str, ...] = ()
        self._listener: RebalanceListener | None = None
        self._manual = False
        self._assignment: frozenset[TopicPartition] = frozenset()
        self._positions: dict[TopicPartition, int | None] = {}
        self._fetched_ends: dict[TopicPartition, int] = {}
        """The end offset each partition had at its last fetch (`current_lag`), as a fetch response's high watermark."""
        self._paused: set[TopicPartition] = set()
        self.generation = 0
        self._member = False
        self.started = False
        self.stopped = False
        self._turn = 0

    def __repr__(self) -> str:
        return f"FakeConsumer({self.client_id}, assignment={sorted(self._assignment)})"

    async def start(self) -> None:
        self._raise_fault("consumer_start")
        self.started = True
        if self.topics and self.group_id is not None:
            self._join()

    async def stop(self) -> None:
        """Leave the group (the others rebalance) and wake any waiting getmany."""
        if self.stopped:
            return
        self.stopped = True
        if self._member and self.group_id is not None:
            self._member = False
            self.cluster._leave(self.group_id, self.member_id)
        self._assignment = frozenset()
        self._positions.clear()
        self._fetched_ends.clear()
        self._paused.clear()
        self.cluster.notify()

    def _join(self) -> None:
        assert self.group_id is not None
        self._member = True
        self.cluster._join(self.group_id, self)

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None:
        if self._manual:
            raise clients.IllegalStateError("subscribe() after assign(): they are mutually exclusive")
        if self.group_id is None:
            raise clients.IllegalStateError("subscribe() needs a group id")
        self.topics = tuple(sorted(topics))
        self._listener = listener
        if self.started and not self.stopped:
            self._join()

    def enforce_rebalance(self) -> None:
        """Ask the group to rebalance (every member is revoked and reassigned)."""
        if self.group_id is not None and self._member:
            self.cluster._request_rebalance(self.cluster._group(self.group_id))

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        if self.topics:
            raise clients.IllegalStateError("assign() after subscribe(): they are mutually exclusive")
        self._manual = True
        self._assignment = frozenset(partitions)
        self._positions = {tp: None for tp in self._assignment}
        self._fetched_ends.clear()
        self._paused &= self._assignment

    def assignment(self) -> frozenset[TopicPartition]:
        return self._assignment

    def paused(self) -> frozenset[TopicPartition]:
        return frozenset(self._paused)

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._assignment:
            raise clients.IllegalStateError(f"No current assignment for partition {tp}")

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._check_assigned(tp)
        self._paused.update(partitions)
        self.cluster.log_event("pause", self.client_id, partitions=sorted(partitions))

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._check_assigned(tp)
        self._paused.difference_update(partitions)
        self.cluster.log_event("resume", self.client_id, partitions=sorted(partitions))
        self.cluster.notify()

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._check_assigned(partition)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self._positions[partition] = offset

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._assignment):
            self._check_assigned(tp)
            self._positions[tp] = self.cluster._log_start(tp)

    async def position(self, partition: TopicPartition) -> int:
        self._check_assigned(partition)
        return self._resolve(partition)

    def _resolve(self, tp: TopicPartition) -> int:
        """The fetch position; a missing one comes from the committed offset or auto.offset.reset."""
        position = self._positions.get(tp)
        if position is not None:
            return position
        committed = self.cluster.committed(self.group_id).get(tp) if self.group_id is not None else None
        if committed is not None:
            position = committed
        else:
            position = self._reset(tp, f"no committed offset for {tp}")
        self._positions[tp] = position
        return position

    def _reset(self, tp: TopicPartition, why: str) -> int:
        if self.auto_offset_reset == "earliest":
            return self.cluster._log_start(tp)
        if self.auto_offset_reset == "latest":
            return self.cluster._end_offset(tp, self.read_committed)
        raise clients.IllegalStateError(f"{why} and auto.offset.reset is none")

    def highwater(self, partition: TopicPartition) -> int | None:
        return int(self.cluster._end_offset(partition, self.read_committed))

    def current_lag(self, partition: TopicPartition) -> int | None:
        """The end offset as of the partition's last fetch (`getmany`) minus the position; None
        before a fetch, as the aiokafka adapter before a fetch response."""
        end = self._fetched_ends.get(partition)
        position = self._positions.get(partition)
        return None if end is None or position is None else max(end - position, 0)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark, or under read_committed the last stable offset."""
        self._raise_fault("end_offsets")
        return {tp: self.cluster._end_offset(tp, self.read_committed) for tp in partitions}

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]) -> None:
        self._raise_fault("commit")
        if self.group_id is None:
            raise clients.IllegalStateError("commit() needs a group id")
        if self.stopped:
            raise clients.ConsumerStoppedError()
        self.cluster._check_commit(self.group_id, self.member_id, self.generation)
        self.cluster._commit(self.group_id, offsets, self.client_id)

    async def committed(self, partition: TopicPartition) -> int | None:
        return self.cluster.committed(self.group_id).get(partition) if self.group_id is not None else None

    async def committed_with_metadata(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        if self.group_id is None:
            raise clients.IllegalStateError("committed offsets need a group id")
        committed = self.cluster.committed_with_metadata(self.group_id)
        return {tp: committed[tp] for tp in partitions if tp in committed}

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[FakeRecord]]:
        """Records of the assigned, unpaused partitions, waiting up to `timeout_ms` for some."""
        if self.stopped:
            raise clients.ConsumerStoppedError()
        self._raise_fault("getmany")
        if self._member and self.group_id is not None and not self.cluster.is_member(self.group_id, self.member_id):
            self._join()  # the session expired: rejoin, as aiokafka does on UnknownMemberId
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        limit = max_records or self.max_poll_records
        while True:
            batch = self._fetch(partitions, limit)
            remaining = deadline - loop.time()
            if batch or remaining <= 0 or self.stopped:
                return batch
            await self.cluster._wait_for_change(remaining)

    def _fetch(self, partitions: Sequence[TopicPartition], limit: int) -> dict[TopicPartition, list[FakeRecord]]:
        wanted = [tp for tp in (partitions or sorted(self._assignment)) if tp in self._assignment and tp not in self._paused]
        if not wanted:
            return {}
        self._turn = (self._turn + 1) % len(wanted)
        wanted = wanted[self._turn:] + wanted[: self._turn]
        out: dict[TopicPartition, list[FakeRecord]] = {}
        for tp in wanted:
            if limit <= 0:
                break
            fault = self.cluster._fetch_fault(tp)
            if fault is not None:
                raise fault
            if not self.cluster.has_partition(tp):
                continue
            position = self._resolve(tp)
            self._fetched_ends[tp] = self.cluster._end_offset(tp, self.read_committed)
            try:
                records, self._positions[tp] = self.cluster._read(tp, position, self.read_committed, limit)
            except clients.OffsetOutOfRangeError:
                if self.auto_offset_reset == "none":
                    raise
                self._positions[tp] = self._reset(tp, f"offset {position} out of range")
                continue
            if records:
                out[tp] = records
                limit -= len(records)
        return out

    # -- the group protocol (called by the cluster's coordinator) ------------------------------

    async def _revoke_for_rebalance(self) -> None:
        revoked = self._assignment
        if self._listener is not None and not self.stopped:
            try:
                await self._listener.on_partitions_revoked(revoked)
            except Exception:
                log.exception("%s: on_partitions_revoked failed", self.client_id)
        self._assignment = frozenset()
        self._positions.clear()
        self._fetched_ends.clear()
        self._paused.clear()

    async def _receive_assignment(
        self, generation: int, partitions: frozenset[TopicPartition], user_data: bytes | None
    ) -> None:
        if self.stopped:
            return
        self.generation = generation
        self._assignment = partitions
        self._positions = {tp: None for tp in partitions}
        self._fetched_ends.clear()
        self._paused.clear()
        if self.assignor is not None and user_data is not None:
            self.assignor.on_assignment(user_data)
        self.cluster.notify()
        if self._listener is not None:
            try:
                await self._listener.on_partitions_assigned(partitions)
            except Exception:
                log.exception("%s: on_partitions_assigned failed", self.client_id)

    def _raise_fault(self, operation: str) -> None:
        fault = self.cluster._fault(operation, self.client_id, self.member_id)
        if fault is not None:
            raise fault


class FakeAdmin:
    """The `Admin` port over the cluster's topics."""

    __slots__ = ("cluster",)

    def __init__(self, cluster: FakeKafkaCluster) -> None:
        self.cluster = cluster

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def partition_counts(self, topics: Iterable[str]) -> dict[str, int | None]:
        return {t: self.cluster.partition_count(t) for t in topics}

    async def ensure_topics(self, specs: Sequence[NewTopicSpec]) -> list[str]:
        fault = self.cluster._fault("ensure_topics", "admin")
        if fault is not None:
            raise fault
        wrong = [
            f"{s.name} (expected {s.partitions}, found {self.cluster.partition_count(s.name)})"
            for s in specs
            if self.cluster.partition_count(s.name) not in (None, s.partitions)
        ]
        if wrong:
            raise clients.InternalTopicError(f"internal topics with the wrong number of partitions: {'; '.join(wrong)}")
        created = []
        for spec in specs:
            if self.cluster.partition_count(spec.name) is None:
                self.cluster.create_topic(spec.name, spec.partitions, spec.config)
                created.append(spec.name)
        return created

    async def delete_topics(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self.cluster.delete_topic(topic)

    async def list_topics(self) -> list[str]:
        return sorted(self.cluster.topics())

    async def committed_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition; None where it has none."""
        committed = self.cluster.committed(group_id)
        return {tp: committed.get(tp) for tp in partitions}


class FakeKafkaClientSupplier:
    """The `KafkaClientSupplier` for a `FakeKafkaCluster`; keeps every client it made, for tests."""

    __slots__ = ("cluster", "consumers", "producers")

    def __init__(self, cluster: FakeKafkaCluster) -> None:
        self.cluster = cluster
        self.consumers: list[FakeConsumer] = []
        self.producers: list[FakeProducer] = []

    def _consumer(
        self, config: StreamsConfig, kind: ClientKind, *, group: bool, client_id: str | None,
        thread_index: int, assignor: GroupAssignor | None = None,
    ) -> FakeConsumer:
        overrides = config.client_overrides(kind)
        consumer = FakeConsumer(
            self.cluster,
            client_id=client_id or clients.default_client_id(config, kind, thread_index),
            group_id=config["application.id"] if group else None,
            assignor=assignor,
            read_committed=config.exactly_once or overrides.get("isolation.level") == "read_committed",
            auto_offset_reset=str(overrides.get("auto.offset.reset", "earliest")) if group else "none",
            max_poll_records=int(overrides.get("max.poll.records", 1000)),
        )
        self.consumers.append(consumer)
        return consumer

    def get_main_consumer(
        self, config: StreamsConfig, *, assignor: GroupAssignor, thread_index: int = 1, client_id: str | None = None
    ) -> FakeConsumer | StreamsGroupConsumer:
        """A classic group member, or under `group.protocol=streams` a streams group member of the
        cluster's fake coordinator over a consumer assigned by hand (`fake_streams_group.py`)."""
        if config["group.protocol"] != "streams":
            return self._consumer(
                config, "main.consumer", group=True, client_id=client_id, thread_index=thread_index, assignor=assignor
            )
        consumer = self._consumer(config, "main.consumer", group=True, client_id=client_id, thread_index=thread_index)
        transport = FakeStreamsGroupTransport(self.cluster, config["application.id"], consumer.client_id)
        return streams_group_consumer(config, assignor, consumer, transport, client_id=consumer.client_id)

    def get_restore_consumer(self, config: StreamsConfig, *, thread_index: int = 1) -> FakeConsumer:
        return self._consumer(config, "restore.consumer", group=False, client_id=None, thread_index=thread_index)

    def get_global_consumer(self, config: StreamsConfig) -> FakeConsumer:
        return self._consumer(config, "global.consumer", group=False, client_id=None, thread_index=1)

    def get_producer(
        self, config: StreamsConfig, *, transactional_id: str | None = None, thread_index: int = 1
    ) -> FakeProducer:
        overrides = config.client_overrides("producer")
        transactional = config.exactly_once or transactional_id is not None
        producer = FakeProducer(
            self.cluster,
            client_id=clients.default_client_id(config, "producer", thread_index)
            + (f"-{transactional_id}" if transactional_id else ""),
            transactional_id=transactional_id,
            transaction_timeout_ms=int(overrides.get("transaction.timeout.ms", 10_000 if transactional else 60_000)),
            batch_size=int(overrides.get("batch.size", overrides.get("max.batch.size", 16_384))),
        )
        self.producers.append(producer)
        return producer

    def get_admin(self, config: StreamsConfig) -> FakeAdmin:
        return FakeAdmin(self.cluster)

    @property
    def main_consumers(self) -> list[FakeConsumer]:
        return [c for c in self.consumers if c.group_id is not None]

    @property
    def restore_consumers(self) -> list[FakeConsumer]:
        return [c for c in self.consumers if c.group_id is None]


if TYPE_CHECKING:  # mypy checks here that the fakes implement the ports
    _cluster = FakeKafkaCluster()
    _supplier: KafkaClientSupplier = FakeKafkaClientSupplier(_cluster)
    _consumer: Consumer = FakeConsumer(_cluster, client_id="c", group_id=None)
    _producer: Producer = FakeProducer(_cluster, client_id="p")
    _admin: Admin = FakeAdmin(_cluster)
