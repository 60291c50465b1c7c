"""A stream-table join whose table arrives over several micro-batches (`maxOffsetsPerTrigger`).

The issue's back-fill: orders joined with customers, then counted per tier. Every customer record
is older than every order, so Kafka Streams joins every order (its task waits for the customers'
partition while that has unread data); on Spark, with a small `maxOffsetsPerTrigger`, the
customers topic comes over several micro-batches, and the task stage must hold the orders until
their customers are read (partition_group.take_ready).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from streams_core import Materialized, Serdes, StreamsBuilder, Topology
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, unique_topic
from tests.spark.engines import BASE_TS, read_table, run_asyncio_to_end, utf8

CUSTOMERS, ORDERS = 60, 300
TIERS = ("gold", "silver", "bronze")


def tier_of(customer: int) -> str:
    return TIERS[customer % 3]


async def test_orders_meet_customers_read_in_later_micro_batches(
    bootstrap_servers: str, spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="streams_core.spark.progress_reporter")
    suffix = unique_topic("mbjoin")
    customers, orders = f"customers-{suffix}", f"orders-{suffix}"
    joined = {engine: f"{engine}-joined-{suffix}" for engine in ("spark", "asyncio")}
    per_tier = {engine: f"{engine}-tiers-{suffix}" for engine in ("spark", "asyncio")}
    for topic in (customers, orders, *joined.values(), *per_tier.values()):
        await create_topic(bootstrap_servers, topic, partitions=2)
    # Orders first on the broker; every customer's timestamp is older than every order's.
    await produce(bootstrap_servers, orders, [
        Rec(f"c{i % CUSTOMERS}".encode(), json.dumps({"order": i, "amount": i % 7}).encode(), timestamp_ms=BASE_TS + 10_000 + i)
        for i in range(ORDERS)
    ])
    await produce(bootstrap_servers, customers, [
        Rec(f"c{i}".encode(), json.dumps({"tier": tier_of(i)}).encode(), timestamp_ms=BASE_TS + i) for i in range(CUSTOMERS)
    ])

    def build(engine: str) -> Topology:
        builder = StreamsBuilder()
        table = builder.table(customers, key_serde=Serdes.String(), value_serde=Serdes.Json())
        enriched = (builder.stream(orders, key_serde=Serdes.String(), value_serde=Serdes.Json())
                    .join(table, lambda order, customer: {**order, "tier": customer["tier"]}))
        enriched.map(lambda c, o: (str(o["order"]), f"{c}:{o['tier']}")).to(joined[engine], value_serde=Serdes.String())
        (enriched.group_by(lambda c, o: o["tier"], key_serde=Serdes.String(), value_serde=Serdes.Json())
         .count(Materialized.as_("orders-per-tier"))
         .to_stream().map_values(str).to(per_tier[engine], value_serde=Serdes.String()))
        return builder.build()

    runner = SparkRunner(build("spark"), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark, source_options={"maxOffsetsPerTrigger": "40"})
    join_query = next(q for q in runner.plan().queries if customers in q.source_topics)
    assert join_query.stage == "task"
    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")

    batches_with_customers = [
        p for p in runner.progress[join_query.subtopology_id]
        if any(customers in json.dumps(s.get("endOffset")) and p["numInputRows"] for s in p["sources"])
    ]
    assert len(runner.progress[join_query.subtopology_id]) >= 5, "the input came over several micro-batches"
    assert len(batches_with_customers) >= 3
    done = [r.getMessage() for r in caplog.records if f"subtopology-{join_query.subtopology_id}: " in r.getMessage()]
    assert done[-1].endswith("(done)") and f"{CUSTOMERS + ORDERS} records" in done[-1], "run() reports each query's progress"

    expected_joined = {str(i): f"c{i % CUSTOMERS}:{tier_of(i % CUSTOMERS)}" for i in range(ORDERS)}
    expected_tiers = {tier: str(sum(1 for i in range(ORDERS) if tier_of(i % CUSTOMERS) == tier)) for tier in TIERS}
    assert await read_table(bootstrap_servers, joined["spark"], utf8, utf8) == expected_joined, "no order lost"
    assert await read_table(bootstrap_servers, per_tier["spark"], utf8, utf8) == expected_tiers

    await run_asyncio_to_end(build("asyncio"), f"asyncio-{suffix}", bootstrap_servers, tmp_path / "state",
                             config={"max.task.idle.ms": 2_000})
    assert await read_table(bootstrap_servers, joined["asyncio"], utf8, utf8) == expected_joined
    assert await read_table(bootstrap_servers, per_tier["asyncio"], utf8, utf8) == expected_tiers
