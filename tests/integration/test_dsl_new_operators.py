"""The DSL operators of issue 13 on the real broker: cogroup, emit_strategy(on_window_close), a
foreign-key join run by two instances (subscription and response topics, through a rebalance) and a
grace-period stream-table join over a versioned table."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams_core import (
    Consumed,
    EmitStrategy,
    Joined,
    KafkaStreams,
    Materialized,
    QueryableStoreTypes,
    Serdes,
    Stores,
    StreamsBuilder,
    TimeWindows,
    Topology,
)
from tests.integration.test_dsl_integration import _settled, _wait_until
from tests.integration.test_dsl_integration import _start as start_instances
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

S = Serdes.String()


async def _start(topology_factory: Callable[[], Topology], app_id: str, bootstrap: str, tmp: Path, n: int,
                 **extra: Any) -> list[KafkaStreams]:  # fmt: skip
    """The DSL integration tests' start, with the cache off (exact outputs) unless `extra` says otherwise."""
    return await start_instances(topology_factory, app_id, bootstrap, tmp, n, 17100,
                                 **{"statestore.cache.max.bytes": 0, **extra})  # fmt: skip


def _cogroup_and_emit_topology(suffix: str) -> Topology:
    builder = StreamsBuilder()
    clicks = builder.stream(f"clicks-{suffix}", key_serde=S, value_serde=S).group_by_key()
    buys = builder.stream(f"buys-{suffix}", key_serde=S, value_serde=S).group_by_key()
    (clicks.cogroup(lambda k, v, agg: agg + "c").cogroup(buys, lambda k, v, agg: agg + "b")
     .aggregate(lambda: "", materialized=Materialized.as_("activity").with_value_serde(S))
     .to_stream().to(f"activity-{suffix}", value_serde=S))  # fmt: skip
    (clicks.windowed_by(TimeWindows.of_size_with_no_grace(1000)).emit_strategy(EmitStrategy.on_window_close())
     .count(Materialized.as_("final-counts")).to_stream(lambda windowed, count: f"{windowed.key}@{windowed.window.start}")
     .to(f"final-{suffix}", key_serde=S, value_serde=Serdes.Long()))  # fmt: skip
    return builder.build()


@pytest.mark.slow
async def test_cogroup_and_emit_on_window_close(bootstrap_servers: str, tmp_path: Path) -> None:
    suffix = unique_topic("cg")
    for topic in (f"clicks-{suffix}", f"buys-{suffix}", f"activity-{suffix}", f"final-{suffix}"):
        await create_topic(bootstrap_servers, topic, partitions=2)
    base = (int(time.time() * 1000) // 1000) * 1000 - 60_000
    instances = await _start(lambda: _cogroup_and_emit_topology(suffix), f"cg-{suffix}", bootstrap_servers, tmp_path, 1)
    try:
        # one key, in order: clicks at +0 and +500 and a buy at +600 (window [base, base+1000)),
        # then a click at +2500 that closes the first window
        for topic, value, offset in ((f"clicks-{suffix}", "c1", 0), (f"clicks-{suffix}", "c2", 500),
                                     (f"buys-{suffix}", "b1", 600), (f"clicks-{suffix}", "c3", 2500)):  # fmt: skip
            await produce(bootstrap_servers, topic, [Rec(b"user", value.encode(), partition=0, timestamp_ms=base + offset)])

        seen: list[Any] = []

        async def cogrouped() -> bool:
            out = await read_all(bootstrap_servers, f"activity-{suffix}")
            seen[:] = [r.value for r in out]
            return seen == [b"c", b"cc", b"ccb", b"ccbc"]

        await _wait_until(cogrouped, 60, f"the cogrouped aggregate of both streams (seen {seen})")
        store = instances[0].store("activity", QueryableStoreTypes.key_value_store())
        assert store.get("user") == "ccbc"

        async def final_counts() -> bool:
            out = await read_all(bootstrap_servers, f"final-{suffix}")
            return [(r.key, int.from_bytes(r.value, "big")) for r in out] == [(f"user@{base}".encode(), 2)]

        await _wait_until(final_counts, 60, "one final count for the closed window, none for the open one")
    finally:
        for streams in instances:
            await streams.close()


def _fk_topology(suffix: str) -> Topology:
    builder = StreamsBuilder()
    orders = builder.table(f"orders-{suffix}", key_serde=S, value_serde=S)  # "<product>|<quantity>"
    products = builder.table(f"products-{suffix}", key_serde=S, value_serde=S)
    (orders.join(products, lambda order: order.split("|")[0], lambda order, product: f"{order}:{product}",
                 materialized=Materialized.as_("order-details").with_value_serde(S))
     .to_stream().to(f"details-{suffix}", value_serde=S))  # fmt: skip
    return builder.build()


@pytest.mark.slow
async def test_foreign_key_join_with_two_instances_and_a_rebalance(bootstrap_servers: str, tmp_path: Path) -> None:
    suffix = unique_topic("fk")
    await create_topic(bootstrap_servers, f"orders-{suffix}", partitions=3)
    await create_topic(bootstrap_servers, f"products-{suffix}", partitions=2)  # not co-partitioned: an FK join needs not
    await create_topic(bootstrap_servers, f"details-{suffix}", partitions=3)
    products = {f"p{i}": f"product-{i}" for i in range(6)}
    await produce(bootstrap_servers, f"products-{suffix}", [(k.encode(), v.encode()) for k, v in products.items()])
    orders = {f"o{i}": f"p{i % 6}|{i}" for i in range(30)}
    await produce(bootstrap_servers, f"orders-{suffix}", [(k.encode(), v.encode()) for k, v in orders.items()])
    app_id = f"fk-{suffix}"
    instances = await _start(lambda: _fk_topology(suffix), app_id, bootstrap_servers, tmp_path, 2)
    second: KafkaStreams | None = instances[1]
    try:
        internal = instances[0].topology.internal_topology_builder.internal_topics
        assert any(t.endswith("-SUBSCRIPTION-REGISTRATION-0000000006-topic") for t in internal)
        assert any(t.endswith("-SUBSCRIPTION-RESPONSE-0000000014-topic") for t in internal)

        def expected() -> dict[str, str]:
            return {k: f"{v}:{products[v.split('|')[0]]}" for k, v in orders.items()}

        async def joined() -> bool:
            latest = {r.key.decode(): r.value.decode() for r in await read_all(bootstrap_servers, f"details-{suffix}")
                      if r.value is not None}  # fmt: skip
            return latest == expected()

        await _wait_until(joined, 90, "every order joined with its product")
        await second.close()
        second = None
        await _settled(instances[:1])
        # after the rebalance the remaining instance owns every task: right-side and left-side changes
        products["p1"] = "product-1-renamed"
        orders["o0"] = "p1|0"
        await produce(bootstrap_servers, f"products-{suffix}", [(b"p1", b"product-1-renamed")])
        await produce(bootstrap_servers, f"orders-{suffix}", [(b"o0", b"p1|0")])
        await _wait_until(joined, 90, "the joins updated by the one instance left")
        store = instances[0].store("order-details", QueryableStoreTypes.key_value_store())
        assert store.get("o7") == f"{orders['o7']}:product-1-renamed"
    finally:
        if second is not None:
            await second.close()
        await instances[0].close()


def _versioned_join_topology(suffix: str) -> Topology:
    builder = StreamsBuilder()
    prices = builder.table(f"prices-{suffix}", Consumed.with_(S, S),
                           Materialized.as_(Stores.persistent_versioned_key_value_store("prices", 60_000)))  # fmt: skip
    (builder.stream(f"trades-{suffix}", Consumed.with_(S, S))
     .join(prices, lambda trade, price: f"{trade}@{price}", Joined.as_("priced").with_grace_period(1000))
     .to(f"priced-{suffix}"))  # fmt: skip
    return builder.build()


@pytest.mark.slow
async def test_stream_table_join_with_a_grace_period_reads_the_versioned_table_as_of_each_trade(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    suffix = unique_topic("vj")
    for topic in (f"prices-{suffix}", f"trades-{suffix}", f"priced-{suffix}"):
        await create_topic(bootstrap_servers, topic, partitions=2)
    base = int(time.time() * 1000) - 60_000
    # prices and trades are in the topics before the application starts; it takes records by
    # timestamp across the two co-partitioned topics (waiting for both: max.task.idle.ms)
    await produce(bootstrap_servers, f"prices-{suffix}", [Rec(b"ACME", b"v1", partition=0, timestamp_ms=base),
                                                         Rec(b"ACME", b"v2", partition=0, timestamp_ms=base + 100)])  # fmt: skip
    trades = [(b"t50", 50), (b"t150", 150), (b"flush", 2000)]
    await produce(bootstrap_servers, f"trades-{suffix}",
                  [Rec(b"ACME", value, partition=0, timestamp_ms=base + offset) for value, offset in trades])  # fmt: skip
    instances = await _start(lambda: _versioned_join_topology(suffix), f"vj-{suffix}", bootstrap_servers, tmp_path, 1,
                             **{"default.key.serde": S, "default.value.serde": S, "max.task.idle.ms": 5000})  # fmt: skip
    try:
        async def priced() -> bool:
            out = await read_all(bootstrap_servers, f"priced-{suffix}")
            return [(r.value, r.timestamp) for r in out] == [(b"t50@v1", base + 50), (b"t150@v2", base + 150)]

        await _wait_until(priced, 60, "two trades priced as of their time, the last one still in the grace period")
    finally:
        for streams in instances:
            await streams.close()
