"""The aiokafka consumer adapter's `highwater`: None while unknown, never aiokafka's assertion."""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as KafkaTopicPartition

from streams_core.clients.aiokafka_supplier import AioKafkaConsumer
from streams_core.common.topic_partition import TopicPartition


async def test_the_highwater_of_a_partition_not_assigned_is_unknown_not_an_assertion() -> None:
    """A stale query asks for a standby's changelog end while the standby is promoted (its changelog
    partition already unassigned from the restore consumer): found on the broker as a REST 500."""
    consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1")  # never started: no connection
    try:
        consumer.assign([KafkaTopicPartition("changelog", 0)])
        adapter = AioKafkaConsumer(consumer)
        assert adapter.highwater(TopicPartition("changelog", 0)) is None  # assigned, nothing fetched yet
        assert adapter.highwater(TopicPartition("changelog", 1)) is None  # aiokafka: AssertionError
    finally:
        await consumer.stop()
