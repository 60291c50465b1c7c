"""Global tables, global stores and pattern subscriptions in the Kafka runtime (issue 14), on the real broker.

The reference topic has another partition count than the stream (no co-partitioning needed):
every instance holds all of it, bootstrapped before its stream threads start.
"""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.server import serve
from streams_core import (
    KafkaStreams,
    Materialized,
    Processor,
    QueryableStoreTypes,
    Record,
    Serdes,
    State,
    Stores,
    StreamsBuilder,
    Topology,
)
from tests.integration.apps.counting_app import streams_config
from tests.integration.group_protocol import classic_only
from tests.integration.streams_testkit import wait_spread
from tests.kafka_utils import consume_until, create_topic, produce, unique_topic

pytestmark = pytest.mark.broker

S = Serdes.String()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
TIMEOUT = 60.0


async def start_all(instances: list[KafkaStreams]) -> None:
    await asyncio.gather(*(s.start() for s in instances))
    await asyncio.gather(*(s.wait_for_state(State.RUNNING, timeout=TIMEOUT) for s in instances))
    await wait_spread(instances)


@pytest.mark.parametrize("threads", [1, 2], ids=["inline", "2-workers"])
async def test_a_global_table_enriches_every_order_on_two_instances(bootstrap_servers: str, tmp_path: Path, threads: int) -> None:
    """With two threads each instance runs two worker processes, each with its own global thread."""
    bootstrap = bootstrap_servers
    app_id, orders, products, out = (unique_topic(p) for p in ("global-app", "orders", "products", "enriched"))
    await create_topic(bootstrap, orders, 4)
    await create_topic(bootstrap, products, 1)
    await create_topic(bootstrap, out, 4)
    await produce(bootstrap, products, [(f"p{i}".encode(), f"product-{i}".encode(), 0) for i in range(10)])

    def topology() -> Topology:
        builder = StreamsBuilder()
        table = builder.global_table(products, Materialized.as_("products"), key_serde=S, value_serde=S)
        (
            builder.stream(orders, key_serde=S, value_serde=S)
            .join(table, lambda order_id, product_id: product_id, lambda product_id, name: f"{product_id}={name}")
            .to(out, value_serde=S)
        )
        return builder.build()

    ports = [free_port(), free_port()]
    instances = [
        KafkaStreams(
            topology(),
            streams_config(
                bootstrap,
                app_id,
                tmp_path / f"i{n}",
                application_server=f"127.0.0.1:{port}",
                extra={"num.stream.threads": threads},
            ),
        )
        for n, port in enumerate(ports)
    ]
    servers = [await serve(streams, "127.0.0.1", port) for streams, port in zip(instances, ports, strict=True)]
    try:
        await start_all(instances)
        for streams in instances:
            products_store = streams.store("products", QueryableStoreTypes.key_value_store())
            assert products_store.get("p3") == "product-3", "bootstrapped before RUNNING, on every instance"
        async with httpx.AsyncClient(timeout=10) as client:
            for port in ports:
                answer = await client.get(f"http://127.0.0.1:{port}/state/keyvalue/products/p3")
                assert answer.status_code == 200 and answer.json() == {"key": "p3", "value": "product-3"}
                assert answer.headers["X-Served-By"] == f"127.0.0.1:{port}", "a global store answers locally"
                direct = await client.get(f"http://127.0.0.1:{port}/state/global/products/p3")
                assert direct.status_code == 200 and direct.json() == {"key": "p3", "value": "product-3"}
                page = await client.get(f"http://127.0.0.1:{port}/state/keyvalues/products/all", params={"limit": 3})
                assert [e["key"] for e in page.json()] == ["p0", "p1", "p2"] and page.headers["X-Next-After"] == "p2"
                bounded = await client.get(f"http://127.0.0.1:{port}/state/keyvalue/products/p3", params={"position": f"{products}:0:0"})
                assert bounded.status_code == 503 and bounded.json()["error"] == "position not reached", "a global copy has no position"
        await produce(bootstrap, orders, [(f"o{i}".encode(), f"p{i % 10}".encode(), i % 4) for i in range(80)])
        records = await consume_until(bootstrap, out, 80, timeout=TIMEOUT)
        assert sorted((r.key.decode(), r.value.decode()) for r in records) == sorted(
            (f"o{i}", f"p{i % 10}=product-{i % 10}") for i in range(80)
        )
        await produce(bootstrap, products, [(b"p1", b"renamed", 0)])
        await asyncio.sleep(1.0)
        await produce(bootstrap, orders, [(b"late", b"p1", 0)])
        late = await consume_until(bootstrap, out, 81, timeout=TIMEOUT)
        assert [r.value for r in late if r.key == b"late"] == [b"p1=renamed"], "updates reach every instance"
    finally:
        await asyncio.gather(*(s.close() for s in instances))
        for server in servers:
            await server.stop()


class CopyToStore(Processor[str, str, None, None]):
    """The global store's processor: keeps the upper-cased value."""

    def init(self, context: Any) -> None:
        self.store = context.get_state_store("reference")

    def process(self, record: Record[str, str]) -> None:
        self.store.put(record.key, record.value.upper())


class Lookup(Processor[str, str, str, str]):
    def init(self, context: Any) -> None:
        self.context, self.store = context, context.get_state_store("reference")

    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_value(self.store.get(record.value)))


async def test_a_global_store_with_a_custom_processor_restarts_from_its_checkpoint(bootstrap_servers: str, tmp_path: Path) -> None:
    bootstrap = bootstrap_servers
    app_id, events, reference, out = (unique_topic(p) for p in ("global-store", "events", "reference", "looked-up"))
    await create_topic(bootstrap, events, 2)
    await create_topic(bootstrap, reference, 3)
    await create_topic(bootstrap, out, 2)
    await produce(bootstrap, reference, [(f"r{i}".encode(), f"value-{i}".encode(), i % 3) for i in range(30)])

    def topology() -> Topology:
        store = Stores.key_value_store_builder(Stores.persistent_key_value_store("reference"), S, S).with_logging_disabled()
        return (
            Topology()
            .add_global_store(store, "G-SOURCE", reference, "G-UPDATE", CopyToStore, key_serde=S, value_serde=S)
            .add_source("SOURCE", events, key_serde=S, value_serde=S)
            .add_processor("LOOKUP", Lookup, "SOURCE")
            .connect_processor_and_state_stores("LOOKUP", "reference")
            .add_sink("SINK", out, "LOOKUP", key_serde=S, value_serde=S)
        )

    config = streams_config(bootstrap, app_id, tmp_path)
    streams = KafkaStreams(topology(), config)
    try:
        await start_all([streams])
        await produce(bootstrap, events, [(b"e1", b"r7", 0), (b"e2", b"r29", 1)])
        records = await consume_until(bootstrap, out, 2, timeout=TIMEOUT)
        assert sorted((r.key, r.value) for r in records) == [(b"e1", b"VALUE-7"), (b"e2", b"VALUE-29")]
    finally:
        await streams.close()
    checkpoint = (tmp_path / app_id / "global" / ".checkpoint").read_text().split()
    assert sorted(checkpoint[2:][2::3]) == ["10", "10", "10"], "the global checkpoint holds each partition's end"

    await produce(bootstrap, reference, [(b"r7", b"changed", 1)])
    again = KafkaStreams(topology(), config)
    try:
        await start_all([again])
        assert again.metrics()["global_thread"]["processed_records"] == 1, "only the tail past the checkpoint"
        assert again.store("reference").get("r7") == "CHANGED"
        assert again.store("reference").get("r0") == "VALUE-0", "kept from before the restart"
    finally:
        await again.close()


@classic_only(
    "a streams group member sends its topology with its topics, so a pattern subscription does not pick up a topic "
    "created later (docs/streams-groups.md, 'Differences from Kafka Streams')"
)
async def test_a_pattern_subscription_picks_up_a_topic_created_after_start(bootstrap_servers: str, tmp_path: Path) -> None:
    """Issue 14, item 2: `builder.stream(re.compile(...))`; a matching topic made later joins on the next refresh."""
    bootstrap = bootstrap_servers
    prefix = unique_topic("pattern")
    app_id, out = unique_topic("pattern-app"), unique_topic("pattern-out")
    await create_topic(bootstrap, f"{prefix}-a", 2)
    await create_topic(bootstrap, out, 2)
    builder = StreamsBuilder()
    builder.stream(re.compile(re.escape(prefix) + r"-.*"), key_serde=S, value_serde=S).map_values(str.upper).to(out)
    config = streams_config(bootstrap, app_id, tmp_path, extra={"metadata.max.age.ms": 1000})
    streams = KafkaStreams(builder.build(), config)
    try:
        await start_all([streams])
        await produce(bootstrap, f"{prefix}-a", [(b"k1", b"from a", 0)])
        await consume_until(bootstrap, out, 1, timeout=TIMEOUT)
        await create_topic(bootstrap, f"{prefix}-b", 3)
        await produce(bootstrap, f"{prefix}-b", [(b"k2", b"from b", 2)])
        records = await consume_until(bootstrap, out, 2, timeout=TIMEOUT)
        assert sorted(r.value for r in records) == [b"FROM A", b"FROM B"]
        assert streams.metadata.subtopologies[0] == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        await streams.close()
