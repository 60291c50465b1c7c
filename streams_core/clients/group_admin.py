"""Group and offset administration for the application reset tool, over aiokafka.

Kafka's `kafka-streams-application-reset` needs what the runtime never does: the members of a
group, every topic's name, earliest/latest/by-time offsets, and committing offsets for a group
that has no active member. These helpers keep aiokafka inside `streams_core.clients`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Self

from streams_core.clients.admin import InternalTopicManager
from streams_core.clients.client_config import admin_kwargs, consumer_kwargs
from streams_core.clients.kafka_clients import AIOKafkaAdminClient, AIOKafkaConsumer, KafkaTopicPartition
from streams_core.clients.streams_group_channel import StreamsGroupChannel
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig

__all__ = ["GroupAdmin"]


def _kafka(tp: TopicPartition) -> KafkaTopicPartition:
    return KafkaTopicPartition(tp.topic, tp.partition)


class GroupAdmin:
    """An admin client and a group-less consumer for one application's group (`application.id`)."""

    def __init__(self, config: StreamsConfig) -> None:
        self.group_id: str = config["application.id"]
        self._admin = AIOKafkaAdminClient(**admin_kwargs(config, client_id=f"{self.group_id}-reset-admin"))
        kwargs = consumer_kwargs(config, "restore.consumer", client_id=f"{self.group_id}-reset")
        kwargs["group_id"] = self.group_id
        self._consumer = AIOKafkaConsumer(**kwargs)

    async def __aenter__(self) -> Self:
        await self._admin.start()
        await self._consumer.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._consumer.stop()
        await self._admin.close()

    async def active_members(self) -> list[str]:
        """Client ids of the group's current members (empty when the group is empty or unknown): a
        classic group's, or a streams group's (`group.protocol=streams`, which DescribeGroups does not show)."""
        responses = await self._admin.describe_consumer_groups([self.group_id])
        members: list[str] = []
        for response in responses:
            for group in response.to_object()["groups"]:
                members += [f"{m['client_id']} ({m['client_host']}, member {m['member_id']})" for m in group["members"]]
        streams_group = await StreamsGroupChannel(self._admin, self.group_id).describe()
        if streams_group.error_code == 0:  # else GROUP_ID_NOT_FOUND: no streams group of that id
            members += [f"{m.client_id} ({m.client_host}, streams group member {m.member_id})" for m in streams_group.members]
        return members

    async def list_topics(self) -> list[str]:
        return sorted(await self._admin.list_topics())

    async def partitions(self, topics: Iterable[str]) -> list[TopicPartition]:
        """Every partition of the topics (a topic that does not exist has none)."""
        counts = await InternalTopicManager(self._admin).partition_counts(sorted(set(topics)))
        return [TopicPartition(topic, p) for topic, count in counts.items() for p in range(count or 0)]

    async def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = await self._consumer.beginning_offsets([_kafka(tp) for tp in partitions])
        return {TopicPartition(tp.topic, tp.partition): o for tp, o in found.items()}

    async def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = await self._consumer.end_offsets([_kafka(tp) for tp in partitions])
        return {TopicPartition(tp.topic, tp.partition): o for tp, o in found.items()}

    async def offsets_for_time(self, partitions: Iterable[TopicPartition], timestamp_ms: int) -> dict[TopicPartition, int]:
        """The first offset at or after `timestamp_ms` per partition; the end offset where there is none."""
        wanted = list(partitions)
        found: Mapping[Any, Any] = await self._consumer.offsets_for_times({_kafka(tp): timestamp_ms for tp in wanted})
        ends = await self.latest(wanted)
        out: dict[TopicPartition, int] = {}
        for tp in wanted:
            hit = found.get(_kafka(tp))
            out[tp] = hit.offset if hit is not None else ends[tp]
        return out

    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        found = await self._admin.list_consumer_group_offsets(self.group_id, partitions=[_kafka(tp) for tp in partitions])
        return {TopicPartition(tp.topic, tp.partition): (m.offset if m.offset >= 0 else None) for tp, m in found.items()}

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit offsets for the group (allowed while it has no active member)."""
        if not offsets:
            return
        self._consumer.assign([_kafka(tp) for tp in offsets])
        await self._consumer.commit({_kafka(tp): o for tp, o in offsets.items()})

    async def delete_topics(self, topics: Iterable[str]) -> None:
        names = sorted(topics)
        if names:
            await self._admin.delete_topics(names)
