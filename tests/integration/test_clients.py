"""streams_core.clients against the real local broker: internal topics and the client factories."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from streams_core import StreamsConfig
from streams_core.clients import (
    AIOKafkaAdminClient,
    AioKafkaClientSupplier,
    InternalTopicError,
    InternalTopicManager,
    NewTopicSpec,
    create_admin,
    create_producer,
    create_restore_consumer,
    to_aiokafka,
    to_aiokafka_partitions,
)
from streams_core.common.topic_partition import TopicPartition
from tests.kafka_utils import create_topic, unique_topic

pytestmark = pytest.mark.broker


def streams_config(bootstrap_servers: str, **extra: object) -> StreamsConfig:
    return StreamsConfig({"application.id": unique_topic("app"), "bootstrap.servers": bootstrap_servers} | extra)


@pytest.fixture
async def admin(bootstrap_servers: str) -> AsyncIterator[AIOKafkaAdminClient]:
    client = create_admin(streams_config(bootstrap_servers))
    await client.start()
    try:
        yield client
    finally:
        await client.close()


async def test_ensure_topics_creates_checks_and_deletes(admin: AIOKafkaAdminClient) -> None:
    manager = InternalTopicManager(admin, timeout_ms=30_000)
    changelog, repartition = unique_topic("changelog"), unique_topic("repartition")
    specs = [
        NewTopicSpec(changelog, 3, {"cleanup.policy": "compact"}),
        NewTopicSpec(repartition, 2, {"cleanup.policy": "delete", "retention.ms": "-1"}),
    ]

    assert sorted(await manager.ensure_topics(specs)) == sorted([changelog, repartition])
    assert await manager.partition_counts([changelog, repartition]) == {changelog: 3, repartition: 2}
    assert await manager.ensure_topics(specs) == []

    with pytest.raises(InternalTopicError, match=rf"{changelog} \(expected 4, found 3\)"):
        await manager.ensure_topics([NewTopicSpec(changelog, 4)])

    await manager.delete_topics([changelog, repartition, unique_topic("never-existed")])
    assert await manager.partition_counts([changelog, repartition]) == {changelog: None, repartition: None}


async def test_partition_counts_do_not_create_topics(admin: AIOKafkaAdminClient) -> None:
    manager = InternalTopicManager(admin)
    missing = unique_topic("missing")
    assert await manager.partition_counts([missing]) == {missing: None}
    assert missing not in await admin.list_topics()


async def test_producer_and_restore_consumer_from_config(bootstrap_servers: str) -> None:
    topic = unique_topic("clients")
    await create_topic(bootstrap_servers, topic, partitions=2)
    config = streams_config(bootstrap_servers, **{"producer.linger.ms": "0"})

    producer = create_producer(config)
    await producer.start()
    try:
        for i in range(5):
            await producer.send(topic, value=str(i).encode(), partition=1)
        await producer.flush()
    finally:
        await producer.stop()

    tp = TopicPartition(topic, 1)
    consumer = create_restore_consumer(config)
    await consumer.start()
    try:
        consumer.assign(to_aiokafka_partitions([tp]))
        await consumer.seek_to_beginning(to_aiokafka(tp))
        values: list[bytes] = []
        while len(values) < 5:
            batches = await consumer.getmany(timeout_ms=5_000)
            assert batches, "no records within 5 s"
            values += [r.value for records in batches.values() for r in records if r.value is not None]
        assert values == [str(i).encode() for i in range(5)]
    finally:
        await consumer.stop()


async def test_transactional_producer_under_exactly_once(bootstrap_servers: str) -> None:
    topic = unique_topic("eos")
    await create_topic(bootstrap_servers, topic)
    config = streams_config(bootstrap_servers, **{"processing.guarantee": "exactly_once_v2"})

    producer = create_producer(config, transactional_id=f"{config['application.id']}-0_0")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send(topic, value=b"committed")
    finally:
        await producer.stop()

    consumer = create_restore_consumer(config)
    await consumer.start()
    try:
        tp = to_aiokafka(TopicPartition(topic, 0))
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        batches = await consumer.getmany(tp, timeout_ms=10_000)
        assert [r.value for r in batches.get(tp, [])] == [b"committed"]
    finally:
        await consumer.stop()


async def test_a_paused_partition_keeps_what_was_fetched(bootstrap_servers: str) -> None:
    """The consumer port's pause is the Java consumer's: records fetched before or during a pause
    are returned right after the resume, in order, none lost, with no new fetch to wait for."""
    topic = unique_topic("soft-pause")
    await create_topic(bootstrap_servers, topic, partitions=2)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    producer = create_producer(streams_config(bootstrap_servers))
    await producer.start()
    try:
        for i in range(5):
            for tp in (p0, p1):
                await producer.send(topic, value=f"{tp.partition}-{i}".encode(), partition=tp.partition)
        await producer.flush()
    finally:
        await producer.stop()

    consumer = AioKafkaClientSupplier().get_restore_consumer(streams_config(bootstrap_servers))
    await consumer.start()
    try:
        consumer.assign([p0, p1])
        await consumer.seek_to_beginning(p0, p1)
        consumer.pause(p0)
        seen: list[bytes] = []
        while len(seen) < 5:  # one fetch asks for both partitions; only p1's records come back
            batch = await consumer.getmany(timeout_ms=5_000)
            assert set(batch) <= {p1}, "a paused partition returned records"
            assert batch, "no records within 5 s"
            seen += [r.value for r in batch[p1] if r.value is not None]
        assert await consumer.getmany(timeout_ms=200) == {}
        consumer.resume(p0)
        batch = await consumer.getmany(timeout_ms=0)  # already fetched: no wait for a fetch
        assert [r.value for r in batch.get(p0, [])] == [f"0-{i}".encode() for i in range(5)]
    finally:
        await consumer.stop()
