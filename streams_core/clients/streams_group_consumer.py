"""StreamsGroupConsumer: the main consumer port under `group.protocol=streams` (KIP-1071).

The thread subscribes and polls as under the classic protocol; underneath, a consumer assigned by hand
reads the partitions of the tasks the broker gives, and a `StreamsGroupMember` runs the heartbeat loop
and calls the thread's rebalance listener. Offsets are committed as the member (OffsetCommit v9 with
its id and epoch). Both client suppliers build it with `streams_group_consumer`, from their own
manually assigned consumer and transport, so the runtime never knows which protocol runs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from streams_core.clients.kafka_clients import IllegalStateError
from streams_core.clients.ports import Consumer, GroupAssignor, RawRecord, RebalanceListener, StreamsGroupAssignor
from streams_core.clients.streams_group_member import StreamsGroupMember, StreamsGroupTransport
from streams_core.clients.streams_group_membership import StreamsGroupMembership
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import ConfigError

if TYPE_CHECKING:
    from streams_core.config import StreamsConfig

__all__ = ["StreamsGroupConsumer", "streams_group_consumer"]


class StreamsGroupConsumer:
    """The `Consumer` port of a streams group member: its consumer's reads, the member's group side."""

    __slots__ = ("_consumer", "member")

    def __init__(self, consumer: Consumer, member: StreamsGroupMember) -> None:
        self._consumer = consumer
        self.member = member

    async def start(self) -> None:
        await self._consumer.start()
        await self.member.start()

    async def stop(self) -> None:
        """Leave the group, then stop the consumer (both attempted)."""
        try:
            await self.member.stop()
        finally:
            await self._consumer.stop()

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None:
        """The topics are the topology's, which the member sends; the listener is what matters."""
        self.member.listener = listener

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        raise IllegalStateError("a streams group member's partitions come from the broker's task assignment")

    def assignment(self) -> frozenset[TopicPartition]:
        return self._consumer.assignment()

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> Mapping[TopicPartition, Sequence[RawRecord]]:
        """Records of the assigned partitions; raises the member's fatal error, if any. A poll resets
        the member's poll timer; none are returned while the member is out of the group as it expired."""
        member = self.member
        member.check()
        member.polled()
        if member.out_of_group or not self._consumer.assignment():  # joining, no tasks, or left: wait as a poll would
            if timeout_ms:
                await asyncio.sleep(timeout_ms / 1000)
            return {}
        return await self._consumer.getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records)

    def pause(self, *partitions: TopicPartition) -> None:
        self._consumer.pause(*partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._consumer.resume(*partitions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._consumer.seek(partition, offset)

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        await self._consumer.seek_to_beginning(*partitions)

    async def position(self, partition: TopicPartition) -> int:
        return await self._consumer.position(partition)

    async def committed(self, partition: TopicPartition) -> int | None:
        return await self._consumer.committed(partition)

    async def committed_with_metadata(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        return await self._consumer.committed_with_metadata(partitions)

    def highwater(self, partition: TopicPartition) -> int | None:
        return self._consumer.highwater(partition)

    def current_lag(self, partition: TopicPartition) -> int | None:
        return self._consumer.current_lag(partition)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._consumer.end_offsets(partitions)

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        await self.member.commit(offsets)

    def enforce_rebalance(self) -> None:
        """A task migrated (its producer was fenced) and the thread closed every task: the broker
        decides who owns what, so the member installs its tasks again from their committed offsets
        (a task that truly moved is revoked, or the member fenced, at the next heartbeat)."""
        self.member.request_reinstall()


def streams_group_consumer(
    config: StreamsConfig,
    assignor: GroupAssignor,
    consumer: Consumer,
    transport: StreamsGroupTransport,
    *,
    client_id: str,
) -> StreamsGroupConsumer:
    """A thread's main consumer as a member of the streams group `application.id`, over `consumer`
    (assigned by hand, in the group for its committed offsets) and `transport`.

    The member id is generated here (KIP-1082) and kept for the member's lifetime."""
    if not all(hasattr(assignor, name) for name in ("streams_group_member_info", "on_streams_group_assignment")):
        raise ConfigError("group.protocol", f"streams needs an assignor that speaks it, not {type(assignor).__name__}")
    streams_assignor: StreamsGroupAssignor = assignor  # type: ignore[assignment]  # checked just above
    overrides = config.client_overrides("main.consumer")
    membership = StreamsGroupMembership(config["application.id"], str(uuid.uuid4()), streams_assignor.streams_group_member_info())
    member = StreamsGroupMember(
        membership,
        transport,
        consumer,
        streams_assignor,
        request_timeout_ms=int(overrides.get("request.timeout.ms", 30_000)),
        retry_backoff_ms=int(overrides.get("retry.backoff.ms", 100)),
        max_poll_interval_ms=int(overrides.get("max.poll.interval.ms", 300_000)),
        log_prefix=f"[{client_id}] ",
    )
    return StreamsGroupConsumer(consumer, member)
