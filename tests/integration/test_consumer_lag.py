"""The consumer port's `current_lag` over aiokafka, against the real broker (max.task.idle.ms reads it).

As the Java consumer's `currentLag`: unknown before a fetch response, then the last fetched high
watermark (the last stable offset under read_committed) minus the position; records fetched but
not yet returned by `getmany` count as lag.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaProducer

from streams_core import StreamsConfig
from streams_core.clients import AioKafkaClientSupplier
from streams_core.clients.ports import Consumer
from streams_core.common.topic_partition import TopicPartition
from tests.kafka_utils import create_topic, produce, unique_topic

pytestmark = pytest.mark.broker


async def lag_becomes(
    consumer: Consumer, tp: TopicPartition, expected: int, timeout: float = 15.0, *, poll: bool = False
) -> None:
    """Wait until a fetch response gave this lag; with `poll`, getmany (which must return nothing)
    is called meanwhile, as the runtime's rounds do."""
    deadline = time.monotonic() + timeout
    while consumer.current_lag(tp) != expected:
        assert time.monotonic() < deadline, f"lag {consumer.current_lag(tp)}, not {expected}"
        if poll:
            assert not await consumer.getmany(tp, timeout_ms=20)
        else:
            await asyncio.sleep(0.02)


async def take(consumer: Consumer, tp: TopicPartition, n: int) -> int:
    """Return `n` records of `tp` from `getmany`, asking for at most what is missing each time."""
    got, deadline = 0, time.monotonic() + 15
    while got < n:
        assert time.monotonic() < deadline, f"{got} of {n} records"
        got += len((await consumer.getmany(tp, timeout_ms=200, max_records=n - got)).get(tp, []))
    return got


def config(bootstrap_servers: str, **extra: object) -> StreamsConfig:
    return StreamsConfig({"application.id": unique_topic("lag"), "bootstrap.servers": bootstrap_servers} | extra)


async def test_current_lag_is_unknown_until_a_fetch_then_counts_what_getmany_has_not_returned(
    bootstrap_servers: str,
) -> None:
    topic = unique_topic("lag")
    await create_topic(bootstrap_servers, topic, 1)
    tp = TopicPartition(topic, 0)
    await produce(bootstrap_servers, topic, [(b"k", b"%d" % i) for i in range(10)])
    consumer = AioKafkaClientSupplier().get_restore_consumer(config(bootstrap_servers))
    await consumer.start()
    try:
        assert consumer.current_lag(tp) is None, "not assigned"
        consumer.assign([tp])
        assert consumer.current_lag(tp) is None, "no position, no fetch response yet"
        await consumer.seek_to_beginning(tp)
        assert await take(consumer, tp, 3) == 3
        await lag_becomes(consumer, tp, 7)  # fetched (or being fetched), not returned
        assert await take(consumer, tp, 7) == 7
        assert consumer.current_lag(tp) == 0
        await produce(bootstrap_servers, topic, [(b"k", b"more")] * 4)
        # aiokafka fetches a partition again only once getmany took what it fetched last (the
        # runtime's round polls every partition it has not paused): the lag stays as last fetched
        await asyncio.sleep(0.3)
        assert consumer.current_lag(tp) == 0
        assert await take(consumer, tp, 1) == 1
        await lag_becomes(consumer, tp, 3)
    finally:
        await consumer.stop()


async def test_under_read_committed_the_lag_ends_at_the_last_stable_offset(bootstrap_servers: str) -> None:
    """An open transaction's records are no lag (read_committed cannot return them yet); once it
    commits they are, with its marker, which the getmany after the last record steps over."""
    topic = unique_topic("lag-txn")
    await create_topic(bootstrap_servers, topic, 1)
    tp = TopicPartition(topic, 0)
    await produce(bootstrap_servers, topic, [(b"k", b"before")] * 2)
    consumer = AioKafkaClientSupplier().get_restore_consumer(
        config(bootstrap_servers, **{"processing.guarantee": "exactly_once_v2"})
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, transactional_id=unique_topic("txn"))
    await consumer.start()
    await producer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        assert await take(consumer, tp, 2) == 2
        await lag_becomes(consumer, tp, 0)
        await producer.begin_transaction()
        for _ in range(3):
            await producer.send_and_wait(topic, b"in-txn", key=b"k", partition=0)
        for _ in range(10):  # fetch responses meanwhile carry the old LSO
            assert not await consumer.getmany(tp, timeout_ms=50)
        assert consumer.current_lag(tp) == 0
        await producer.commit_transaction()
        assert await take(consumer, tp, 1) == 1
        assert consumer.current_lag(tp) == 3, "two records and the commit marker"
        assert await take(consumer, tp, 2) == 2
        await lag_becomes(consumer, tp, 0, poll=True)  # the next getmany steps over the marker
    finally:
        await producer.stop()
        await consumer.stop()
