"""Queries that see what was written, and queries that write nothing (issue 14), on the real broker.

- Read-your-writes: a client produces a record, then asks any instance for the key with
  `?position=<topic>:<partition>:<offset>`; the answer waits until the key's copy processed that
  offset, so the new count is seen every time, through the owner or forwarded.
- Reads never write: with the record cache on and a long commit interval, a burst of REST
  `all`/`range`/`get` queries and a punctuation that scans the store every 50 ms move neither
  the output topic's nor the changelog's end offsets; the answers include the writes still in
  the cache. Closing the instance then flushes them (the test's control).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from api.server import serve
from streams_core import KafkaStreams, Materialized, Processor, PunctuationType, Record, Serdes, State, StreamsBuilder, Topology
from streams_core.common.partitioner import default_partition
from tests.integration.apps.counting_app import streams_config
from tests.integration.rest_cluster import free_port
from tests.integration.streams_testkit import wait_spread
from tests.kafka_utils import create_topic, produce, topic_partitions, unique_topic

pytestmark = pytest.mark.broker

S = Serdes.String()
STORE = "counts"
TIMEOUT = 60.0


def count_topology(source: str, sink: str, scan: bool = False) -> Topology:
    builder = StreamsBuilder()
    stream = builder.stream(source, key_serde=S, value_serde=S)
    stream.group_by_key().count(Materialized.as_(STORE)).to_stream().to(sink, key_serde=S, value_serde=Serdes.Long())
    if scan:
        stream.process(ScanningProcessor, STORE)
    return builder.build()


class ScanningProcessor(Processor[str, str, None, None]):
    """Scans the count store every 50 ms of wall-clock time (and forwards nothing)."""

    scans = 0

    def init(self, context: Any) -> None:
        self.store = context.get_state_store(STORE)
        context.schedule(50, PunctuationType.WALL_CLOCK_TIME, self.scan)

    def scan(self, timestamp: int) -> None:
        sum(1 for _ in self.store.all())
        type(self).scans += 1

    def process(self, record: Record[str, str]) -> None:
        return None


def keys_over_partitions(partitions: int, per_partition: int) -> list[str]:
    """Keys spread over every partition, so that every instance owns some of them, whatever the assignment."""
    found: dict[int, list[str]] = {p: [] for p in range(partitions)}
    n = 0
    while any(len(keys) < per_partition for keys in found.values()):
        key = f"k{n}"
        n += 1
        bucket = found[default_partition(key.encode(), partitions)]
        if len(bucket) < per_partition:
            bucket.append(key)
    return [key for keys in zip(*found.values(), strict=True) for key in keys]


KEYS = keys_over_partitions(4, 2)


async def end_offsets(bootstrap: str, topics: list[str]) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [tp for topic in topics for tp in await topic_partitions(bootstrap, topic)]
        return dict(await consumer.end_offsets(partitions))
    finally:
        await consumer.stop()


async def test_read_your_writes_through_the_owner_and_through_forwarding(bootstrap_servers: str, tmp_path: Path) -> None:
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("ryw-app"), unique_topic("ryw-in"), unique_topic("ryw-out")
    await create_topic(bootstrap, source, 4)
    await create_topic(bootstrap, sink, 4)
    ports = [free_port(), free_port()]
    instances = [
        KafkaStreams(
            count_topology(source, sink),
            streams_config(bootstrap, app_id, tmp_path / f"i{n}", application_server=f"127.0.0.1:{port}"),
        )
        for n, port in enumerate(ports)
    ]
    servers = [await serve(streams, "127.0.0.1", port) for streams, port in zip(instances, ports, strict=True)]
    try:
        await asyncio.gather(*(s.start() for s in instances))
        await asyncio.gather(*(s.wait_for_state(State.RUNNING, timeout=TIMEOUT) for s in instances))
        await wait_spread(instances)
        truth: Counter[str] = Counter()
        served_by: Counter[str] = Counter()
        async with httpx.AsyncClient(timeout=10) as client:
            for round_ in range(24):
                key = KEYS[round_ % len(KEYS)]
                [meta] = await produce(bootstrap, source, [(key.encode(), b"x")])
                truth[key] += 1
                port = ports[round_ % 2]
                answer = await client.get(
                    f"http://127.0.0.1:{port}/state/keyvalue/{STORE}/{quote(key)}",
                    params={"position": f"{source}:{meta.partition}:{meta.offset}", "timeoutMs": "10000"},
                )
                assert answer.status_code == 200, answer.text
                assert answer.json()["value"] == truth[key], f"round {round_}: read-your-writes of {key}"
                topic, partition, offset = answer.headers["X-Streams-Position"].split(":")
                assert (topic, int(partition)) == (source, meta.partition) and int(offset) >= meta.offset
                served_by[answer.headers["X-Served-By"]] += 1
        assert len(served_by) == 2, f"answers came from both instances (owners and forwards): {served_by}"
    finally:
        await asyncio.gather(*(s.close() for s in instances))
        for server in servers:
            await server.stop()


async def test_queries_and_a_punctuation_scan_emit_nothing_and_log_nothing(bootstrap_servers: str, tmp_path: Path) -> None:
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("rnw-app"), unique_topic("rnw-in"), unique_topic("rnw-out")
    changelog = f"{app_id}-{STORE}-changelog"
    await create_topic(bootstrap, source, 2)
    await create_topic(bootstrap, sink, 2)
    port = free_port()
    config = streams_config(
        bootstrap, app_id, tmp_path / "i0", application_server=f"127.0.0.1:{port}",
        extra={"commit.interval.ms": 600_000, "statestore.cache.max.bytes": 10 * 1024 * 1024},
    )  # fmt: skip
    streams = KafkaStreams(count_topology(source, sink, scan=True), config)
    server = await serve(streams, "127.0.0.1", port)
    try:
        await streams.start()
        await streams.wait_for_state(State.RUNNING, timeout=TIMEOUT)
        words = [f"w{i % 7}" for i in range(70)]
        await produce(bootstrap, source, [(w.encode(), b"x") for w in words])
        truth = Counter(words)
        base = f"http://127.0.0.1:{port}/state"
        async with httpx.AsyncClient(timeout=10) as client:
            for _ in range(200):  # until processed: the answers come from the cache
                answer = await client.get(f"{base}/keyvalues/{STORE}/all")
                if answer.status_code == 200 and {e["key"]: e["value"] for e in answer.json()} == truth:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"never counted: {answer.status_code} {answer.text[:200]}")
            before = await end_offsets(bootstrap, [sink, changelog])
            scans = ScanningProcessor.scans
            for _ in range(20):
                assert {e["key"]: e["value"] for e in (await client.get(f"{base}/keyvalues/{STORE}/all")).json()} == truth
                assert len((await client.get(f"{base}/keyvalues/{STORE}/range/w1/w4")).json()) == 4
                assert (await client.get(f"{base}/keyvalue/{STORE}/w3")).json()["value"] == truth["w3"]
                assert len((await client.get(f"{base}/keyvalues/{STORE}/all", params={"limit": "3"})).json()) == 3
            await asyncio.sleep(0.5)
            assert ScanningProcessor.scans > scans, "the punctuation scanned meanwhile"
            after = await end_offsets(bootstrap, [sink, changelog])
            assert after == before, "reads wrote nothing downstream or to the changelog"
            assert sum(before.values()) == 0, "everything is still in the record cache (nothing committed yet)"
    finally:
        await streams.close()
        await server.stop()
    flushed = await end_offsets(bootstrap, [sink, changelog])
    assert sum(flushed.values()) > 0, "closing flushed the cache: the writes were pending all along"
