"""The issue's two outputs in one topology: a reduce beside another sink stays native.

`orders.filter(...).to(big-orders)` and `orders.group_by_key().reduce(sum).to_stream().to(totals)`:
the reduce runs in the native fold query, the other output in a fused side pass of the same
query; the tables equal `KafkaStreams`' and the totals are one record per key and micro-batch
(the issue's run wrote one per order: 20,000 for 500 customers).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from streams_core import Serdes, StreamsBuilder, Topology
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import BASE_TS, long_be, read_table, run_asyncio_to_end, utf8

CUSTOMERS, ORDERS = 25, 400


async def test_a_reduce_beside_another_output_is_native_and_exact(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    suffix = unique_topic("side")
    orders = f"orders-{suffix}"
    outputs = {engine: (f"{engine}-big-{suffix}", f"{engine}-totals-{suffix}") for engine in ("spark", "asyncio")}
    for topic in (orders, *outputs["spark"], *outputs["asyncio"]):
        await create_topic(bootstrap_servers, topic, partitions=2)
    await produce(bootstrap_servers, orders, [
        Rec(f"c{i % CUSTOMERS}".encode(), ((i * 37) % 200).to_bytes(8, "big"), timestamp_ms=BASE_TS + i) for i in range(ORDERS)
    ])

    def build(engine: str) -> Topology:
        big, totals = outputs[engine]
        builder = StreamsBuilder()
        stream = builder.stream(orders, key_serde=Serdes.String(), value_serde=Serdes.Long())
        stream.filter(lambda customer, amount: amount > 150).to(big)
        stream.group_by_key().reduce(lambda a, b: a + b).to_stream().to(totals)
        return builder.build()

    runner = SparkRunner(build("spark"), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark)
    (query,) = runner.plan().queries
    assert query.stage == "native" and query.native is not None and query.native.side_sinks
    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    await run_asyncio_to_end(build("asyncio"), f"asyncio-{suffix}", bootstrap_servers, tmp_path / "state")

    amounts = [(f"c{i % CUSTOMERS}", (i * 37) % 200) for i in range(ORDERS)]
    expected_totals = {c: sum(a for k, a in amounts if k == c) for c in {k for k, _ in amounts}}
    expected_big = sorted((k, a) for k, a in amounts if a > 150)
    for engine in ("spark", "asyncio"):
        big, totals = outputs[engine]
        assert sorted((utf8(r.key or b""), long_be(r.value or b"")) for r in await read_all(bootstrap_servers, big)) == expected_big
        assert await read_table(bootstrap_servers, totals, utf8, long_be) == expected_totals, engine
    batches = len([p for p in runner.progress[query.subtopology_id] if p["numInputRows"]])
    assert len(await read_all(bootstrap_servers, outputs["spark"][1])) <= CUSTOMERS * batches, "one record per key and micro-batch"
