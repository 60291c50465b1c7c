"""Stable committed offsets on the real broker: a transaction's offsets are read once it committed, never the older ones."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams_core.clients.aiokafka_supplier import AioKafkaConsumer
from streams_core.clients.stable_offsets import fetch_stable_offsets
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.topic_partition import TopicPartition
from tests.kafka_utils import create_topic, produce, unique_topic

pytestmark = pytest.mark.broker


@pytest.fixture
async def producer(bootstrap_servers: str) -> AsyncIterator[AIOKafkaProducer]:
    client = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, transactional_id=f"stable-{uuid.uuid4().hex[:8]}")
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


async def test_each_committed_transaction_is_read_at_once(
    bootstrap_servers: str, admin: AIOKafkaAdminClient, producer: AIOKafkaProducer
) -> None:
    topic, group = unique_topic("stable-in"), unique_topic("stable-group")
    await create_topic(bootstrap_servers, topic, 2)
    tps = [TopicPartition(topic, p) for p in range(2)]
    assert await fetch_stable_offsets(admin, group, tps) == {tps[0]: None, tps[1]: None}
    for n in range(1, 11):
        async with producer.transaction():
            await producer.send_offsets_to_transaction({KafkaTopicPartition(topic, 0): n, KafkaTopicPartition(topic, 1): 10 * n}, group)
        assert await fetch_stable_offsets(admin, group, tps) == {tps[0]: n, tps[1]: 10 * n}, f"transaction {n}"


@pytest.mark.parametrize("outcome", ["commit", "abort"])
async def test_a_pending_transaction_is_waited_for(
    bootstrap_servers: str, admin: AIOKafkaAdminClient, producer: AIOKafkaProducer, outcome: str
) -> None:
    topic, group = unique_topic("stable-in"), unique_topic("stable-group")
    await create_topic(bootstrap_servers, topic, 1)
    tp = TopicPartition(topic, 0)
    async with producer.transaction():
        await producer.send_offsets_to_transaction({KafkaTopicPartition(topic, 0): 3}, group)
    await producer.begin_transaction()
    await producer.send_offsets_to_transaction({KafkaTopicPartition(topic, 0): 7}, group)
    fetch = asyncio.create_task(fetch_stable_offsets(admin, group, [tp]))
    await asyncio.sleep(0.5)
    assert not fetch.done(), f"answered {fetch.result() if not fetch.cancelled() else None} while the commit was pending"
    if outcome == "commit":
        await producer.commit_transaction()
    else:
        await producer.abort_transaction()
    assert await asyncio.wait_for(fetch, 10) == {tp: 7 if outcome == "commit" else 3}


async def test_plain_commits_and_unknown_groups(bootstrap_servers: str, admin: AIOKafkaAdminClient) -> None:
    topic, group = unique_topic("stable-in"), unique_topic("stable-group")
    await create_topic(bootstrap_servers, topic, 3)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([KafkaTopicPartition(topic, 1)])
        await consumer.commit({KafkaTopicPartition(topic, 1): 42})
    finally:
        await consumer.stop()
    tps = [TopicPartition(topic, p) for p in range(3)]
    assert await fetch_stable_offsets(admin, group, tps) == {tps[0]: None, tps[1]: 42, tps[2]: None}
    assert await fetch_stable_offsets(admin, unique_topic("nobody"), tps[:1]) == {tps[0]: None}
    assert await fetch_stable_offsets(admin, group, []) == {}


class _Listener:
    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        return None


@pytest.mark.parametrize("join", ["assign", "subscribe before start"])
async def test_a_group_consumer_starts_after_the_pending_transaction(
    bootstrap_servers: str, producer: AIOKafkaProducer, join: str
) -> None:
    """Where a new owner starts: aiokafka reads the committed offset by itself; it must wait for the
    commit. A stream thread subscribes before it starts its consumer, and a restarted instance's
    first assignment is where it takes tasks over, so that read must be stable too."""
    topic, group = unique_topic("stable-in"), unique_topic("stable-group")
    await create_topic(bootstrap_servers, topic, 1)
    await produce(bootstrap_servers, topic, [(None, b"x", 0)] * 10)
    tp = TopicPartition(topic, 0)
    async with producer.transaction():
        await producer.send_offsets_to_transaction({KafkaTopicPartition(topic, 0): 3}, group)
    await producer.begin_transaction()
    await producer.send_offsets_to_transaction({KafkaTopicPartition(topic, 0): 7}, group)
    consumer = AioKafkaConsumer(AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=group, enable_auto_commit=False))
    if join != "assign":
        consumer.subscribe([topic], _Listener())
    await consumer.start()
    try:
        if join == "assign":
            consumer.assign([tp])
        deadline = asyncio.get_running_loop().time() + 20
        while tp not in consumer.assignment():
            assert asyncio.get_running_loop().time() < deadline, "no assignment"
            await asyncio.sleep(0.05)
        position = asyncio.create_task(consumer.position(tp))
        await asyncio.sleep(0.5)
        assert not position.done(), f"started at {position.result() if not position.cancelled() else None} while the commit was pending"
        await producer.commit_transaction()
        assert await asyncio.wait_for(position, 10) == 7
    finally:
        await consumer.stop()


async def test_the_consumer_port_commits_and_reads_offsets_with_their_metadata(
    bootstrap_servers: str, producer: AIOKafkaProducer
) -> None:
    """What a task's commit writes and a new task reads (its partition time): the metadata goes
    with the offset both ways, a transaction's too, and is read stably (after the pending commit)."""
    topic, group = unique_topic("stable-in"), unique_topic("stable-group")
    await create_topic(bootstrap_servers, topic, 2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = AioKafkaConsumer(AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=group, enable_auto_commit=False))
    await consumer.start()
    try:
        consumer.assign([tp0, tp1])
        assert await consumer.committed_with_metadata([tp0, tp1]) == {}
        await consumer.commit({tp0: OffsetAndMetadata(5, "AgAAAAAAAABk"), tp1: OffsetAndMetadata(2)})
        assert await consumer.committed_with_metadata([tp0, tp1]) == {
            tp0: OffsetAndMetadata(5, "AgAAAAAAAABk"), tp1: OffsetAndMetadata(2, ""),
        }
        await producer.begin_transaction()
        await producer.send_offsets_to_transaction({KafkaTopicPartition(topic, 0): (7, "AgAAAAAAAADI")}, group)
        read = asyncio.create_task(consumer.committed_with_metadata([tp0]))
        await asyncio.sleep(0.5)
        assert not read.done(), f"answered {read.result() if not read.cancelled() else None} while the commit was pending"
        await producer.commit_transaction()
        assert await asyncio.wait_for(read, 10) == {tp0: OffsetAndMetadata(7, "AgAAAAAAAADI")}
    finally:
        await consumer.stop()
