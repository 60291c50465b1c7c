"""DSL topologies on the real broker with two instances: word count and a stream-table enrichment join."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from app.wordcount import STORE, WINDOWED_STORE, build_topology
from streams_core import (
    InvalidStateStoreError,
    KafkaStreams,
    Materialized,
    QueryableStoreTypes,
    Serdes,
    State,
    StreamsBuilder,
    Topology,
)
from tests.integration.group_protocol import UNDER_STREAMS
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "commit.interval.ms": 100}
LINES = [
    "the quick brown fox",
    "jumps over the lazy dog",
    "The dog barks",
    "a fox is quick and the dog is lazy",
]


async def _wait_until(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():  # checked at least once (timeout 0: now or never)
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.2)


async def _start(topology_factory: Callable[[], Topology], app_id: str, bootstrap: str, tmp: Path, n: int,
                 port_base: int = 17000, **extra: Any) -> list[KafkaStreams]:  # fmt: skip
    """Start `n` instances (config: FAST_GROUP and `extra`) and wait until they are RUNNING."""
    instances = []
    for i in range(n):
        config = {
            "application.id": app_id,
            "bootstrap.servers": bootstrap,
            "state.dir": str(tmp / f"instance-{i}"),
            "application.server": f"127.0.0.1:{port_base + i}",
            **FAST_GROUP,
            **extra,
        }
        streams = KafkaStreams(topology_factory(), config)
        await streams.start()
        instances.append(streams)
    for streams in instances:
        await streams.wait_for_state(State.RUNNING, timeout=60)
    return instances


async def _settled(instances: list[KafkaStreams]) -> None:
    async def all_running() -> bool:
        return all(s.state is State.RUNNING for s in instances)

    await _wait_until(all_running, 60, "all instances RUNNING")


@pytest.mark.slow
async def test_word_count_with_two_instances_equals_an_independent_count(bootstrap_servers: str, tmp_path: Path) -> None:
    suffix = unique_topic("wc")
    app_id = f"wordcount-{suffix}"
    input_topic, output_topic = f"lines-{suffix}", f"counts-{suffix}"
    await create_topic(bootstrap_servers, input_topic, partitions=4)
    await create_topic(bootstrap_servers, output_topic, partitions=4)
    truth: Counter[str] = Counter()
    now = int(time.time() * 1000)
    lines = [LINES[i % len(LINES)] + f" w{i % 7}" for i in range(200)]
    await produce(bootstrap_servers, input_topic, [Rec(f"line-{i}".encode(), line.encode(), timestamp_ms=now) for i, line in enumerate(lines)])
    truth.update(word for line in lines for word in line.lower().split())

    instances = await _start(lambda: build_topology(input_topic, output_topic), app_id, bootstrap_servers, tmp_path, 2)
    try:
        async def both_have_tasks() -> bool:  # at once under the classic protocol; at a heartbeat under streams
            return all(s.state is State.RUNNING and s.threads[0].task_manager.tasks for s in instances)

        await _wait_until(both_have_tasks, 30 if UNDER_STREAMS else 0, "both instances got tasks")

        def local_counts() -> dict[str, int]:
            counts: dict[str, int] = {}
            for streams in instances:
                counts.update(dict(streams.store(STORE, QueryableStoreTypes.key_value_store()).all()))
            return counts

        async def counted() -> bool:
            try:
                return local_counts() == dict(truth)
            except Exception:
                return False

        await _wait_until(counted, 60, "store counts to equal the independent count")
        await _settled(instances)

        new_words = Counter(word for line in lines for word in line.lower().split())

        def windowed_counts() -> Counter[str]:
            windowed: Counter[str] = Counter()
            for streams in instances:
                for kv in streams.store(WINDOWED_STORE, QueryableStoreTypes.window_store()).fetch_all(0, now + 1):
                    assert kv.key.window.start <= now < kv.key.window.end
                    windowed[kv.key.key] += kv.value
            return windowed

        async def windowed_counted() -> bool:
            try:
                return windowed_counts() == new_words
            except InvalidStateStoreError:  # a rebalance moved a task meanwhile
                return False

        await _wait_until(windowed_counted, 30, "the windowed counts of the lines' window")
        assert windowed_counts() == new_words

        async def output_caught_up() -> bool:
            latest = {r.key.decode(): int.from_bytes(r.value, "big", signed=True) for r in await read_all(bootstrap_servers, output_topic)}
            return all(latest.get(word) == n for word, n in truth.items())

        await _wait_until(output_caught_up, 60, "the output topic's latest counts")

        async def owners_known() -> bool:  # under streams: the broker's endpoint map, at a heartbeat
            owners = [streams.metadata_for_key(STORE, w, Serdes.String()) for streams in instances for w in ("the", "dog", "w3")]
            return all(owner.host_info.port in (17000, 17001) for owner in owners)

        await _wait_until(owners_known, 15 if UNDER_STREAMS else 0, "every instance knows the owner of 'the', 'dog', 'w3'")
    finally:
        for streams in instances:
            await streams.close()


def _enrichment_topology() -> Topology:
    builder = StreamsBuilder()
    customers = builder.table("customers", Materialized.as_("customers"), key_serde=Serdes.String(), value_serde=Serdes.Json())
    orders = builder.stream("orders", key_serde=Serdes.String(), value_serde=Serdes.Json())
    (
        orders.select_key(lambda order_id, order: order["customer"])
        .join(customers, lambda order, customer: {**order, "customer_name": customer["name"]})
        .to("enriched-orders", key_serde=Serdes.String(), value_serde=Serdes.Json())
    )
    return builder.build()


@pytest.mark.slow
async def test_stream_table_enrichment_join_with_two_instances(bootstrap_servers: str, tmp_path: Path) -> None:
    for topic in ("customers", "orders", "enriched-orders"):
        await create_topic(bootstrap_servers, topic, partitions=3)
    await produce(bootstrap_servers, "customers", [])
    customers = {f"c{i}": {"name": f"Customer {i}"} for i in range(10)}
    await produce(
        bootstrap_servers, "customers", [(k.encode(), json.dumps(v).encode()) for k, v in customers.items()]
    )
    app_id = f"enrich-{unique_topic('e')}"
    instances = await _start(_enrichment_topology, app_id, bootstrap_servers, tmp_path, 2)
    try:
        async def table_loaded() -> bool:
            try:
                loaded: dict[str, Any] = {}
                for streams in instances:
                    loaded.update(dict(streams.store("customers").all()))
                return loaded == customers
            except Exception:
                return False

        await _wait_until(table_loaded, 60, "the customers table")
        orders = [(f"o{i}", {"customer": f"c{i % 10}", "amount": i}) for i in range(60)]
        await produce(bootstrap_servers, "orders", [(k.encode(), json.dumps(v).encode()) for k, v in orders])

        expected = {(o["customer"], o["amount"], customers[o["customer"]]["name"]) for _, o in orders}

        async def all_enriched() -> bool:
            out = await read_all(bootstrap_servers, "enriched-orders")
            got = {(r.key.decode(), json.loads(r.value)["amount"], json.loads(r.value)["customer_name"]) for r in out}
            return got == expected and len(out) == len(orders)

        await _wait_until(all_enriched, 60, "every order enriched exactly once")
    finally:
        for streams in instances:
            await streams.close()
