"""A stream-table join over two topics already full, at the default settings (issue 35, item 6).

The customers (the table) are written before the orders and with earlier timestamps, all before
the application starts. With `max.task.idle.ms=0` (the default) a task must not process an order
while the customers partition of its task still has records on the broker that were not fetched
yet (KIP-695): every order finds its customer, on every run. Before this was kept, a run lost
a hundred or so joins whenever a customers queue drained between two fetches.
"""

from __future__ import annotations

import time
from collections import Counter
from functools import partial
from pathlib import Path

import pytest

from streams_core import Serdes, StreamsBuilder, Topology
from tests.integration.streams_testkit import StreamsApp, metric_total, wait_until
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

CUSTOMERS = 6000
ORDERS = 20_000
RUNS = 10
PROCESS_MODE = {"num.stream.threads": 2, "stream.threads.mode": "process"}
TIERS = ("bronze", "silver", "gold")


def join_topology(customers: str, orders: str, joined: dict[str, int] | None = None, sink: str | None = None) -> Topology:
    """orders ⋈ customers → the customer's tier: counted per tier in `joined` (in this process),
    or written to `sink`."""
    s = Serdes.String()
    builder = StreamsBuilder()
    table = builder.table(customers, key_serde=s, value_serde=s)
    tiers = builder.stream(orders, key_serde=s, value_serde=s).join(table, lambda order, tier: tier)
    if joined is not None:
        counts = joined

        def count(key: str, tier: str) -> None:
            counts[tier] = counts.get(tier, 0) + 1

        tiers.peek(count)
    if sink is not None:
        tiers.to(sink, key_serde=s, value_serde=s)
    return builder.build()


async def backlog(bootstrap_servers: str) -> tuple[str, str, dict[str, int]]:
    """The two topics, full, the customers written first with earlier timestamps; the tiers expected."""
    customers, orders = unique_topic("customers"), unique_topic("orders")
    for topic in (customers, orders):
        await create_topic(bootstrap_servers, topic, 2)
    t0 = int(time.time() * 1000) - 600_000
    await produce(
        bootstrap_servers,
        customers,
        (Rec(b"c%05d" % i, TIERS[i % 3].encode(), None, t0 + i) for i in range(CUSTOMERS)),
    )
    await produce(
        bootstrap_servers,
        orders,
        (Rec(b"c%05d" % (i * 7919 % CUSTOMERS), b"o%d" % i, None, t0 + CUSTOMERS + i) for i in range(ORDERS)),
    )
    expected = dict.fromkeys(TIERS, 0)
    for i in range(ORDERS):
        expected[TIERS[i * 7919 % CUSTOMERS % 3]] += 1
    return customers, orders, expected


@pytest.mark.slow
async def test_every_order_of_a_backlog_finds_its_customer_at_the_default_idle(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """Ten runs of a new application each (inline stream thread): every order joined, every time."""
    customers, orders, expected = await backlog(bootstrap_servers)
    for run in range(RUNS):
        joined = await join_once(bootstrap_servers, tmp_path / f"run-{run}", customers, orders)
        assert joined == expected, f"run {run}: {sum(joined.values())} of {ORDERS} orders joined"


async def join_once(bootstrap_servers: str, tmp_path: Path, customers: str, orders: str) -> dict[str, int]:
    """One run of a new application over both topics; its joins counted per tier."""
    joined: dict[str, int] = {}
    async with StreamsApp(bootstrap_servers, tmp_path, lambda: join_topology(customers, orders, joined)) as app:
        streams = await app.start(0)
        await wait_until(
            lambda: metric_total(streams, "processed_records") == CUSTOMERS + ORDERS,
            60,
            message=lambda: f"{metric_total(streams, 'processed_records')} records processed",
        )
    return joined


async def test_worker_processes_keep_the_backlog_join_exact(bootstrap_servers: str, tmp_path: Path) -> None:
    """The same with two stream threads as worker processes (their tasks are the same StreamTask)."""
    customers, orders, expected = await backlog(bootstrap_servers)
    sink = unique_topic("tiers")
    await create_topic(bootstrap_servers, sink, 2)
    topology = partial(join_topology, customers, orders, sink=sink)
    async with StreamsApp(bootstrap_servers, tmp_path, topology, config=PROCESS_MODE) as app:
        streams = await app.start(0)
        await wait_until(
            lambda: metric_total(streams, "processed_records") == CUSTOMERS + ORDERS,
            60,
            message=lambda: f"{metric_total(streams, 'processed_records')} records processed",
        )
    joined = Counter((r.value or b"").decode() for r in await read_all(bootstrap_servers, sink))
    assert joined == expected, f"{sum(joined.values())} of {ORDERS} orders joined"
