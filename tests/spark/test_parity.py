"""Parity on the same input: a stream-table join and a repartition-then-aggregate, Spark vs asyncio runtime.

Each test runs the topology once on Spark (`available_now`) and once on `KafkaStreams` (to the
end of its input), each writing its own output topic, and compares the final tables.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from streams_core import Branched, Materialized, Named, Processor, Record, Serdes, StreamsBuilder, Topology
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import BASE_TS, ENGINES, both_engines, run_asyncio_to_end, run_both_engines


async def test_stream_table_join_gives_the_same_table(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    suffix = unique_topic("join")
    users, clicks = f"users-{suffix}", f"clicks-{suffix}"
    outputs = (f"spark-enriched-{suffix}", f"asyncio-enriched-{suffix}")
    for topic in (users, clicks, *outputs):
        await create_topic(bootstrap_servers, topic, partitions=2)
    await produce(bootstrap_servers, users, [
        *(Rec(f"u{i}".encode(), f"name-{i}".encode(), timestamp_ms=BASE_TS + 100 + i) for i in range(6)),
        Rec(b"u3", None, timestamp_ms=BASE_TS + 500),                     # deleted before any click
        Rec(b"u1", b"renamed-1", timestamp_ms=BASE_TS + 1_051),           # renamed between u1's clicks (no tie)
    ])
    await produce(bootstrap_servers, clicks, [
        Rec(f"u{i % 8}".encode(), f"click-{i}".encode(), timestamp_ms=BASE_TS + 1_000 + 2 * i) for i in range(60)
    ])

    def build(output: str) -> Topology:
        builder = StreamsBuilder()
        table = builder.table(users, key_serde=Serdes.String(), value_serde=Serdes.String())
        stream = builder.stream(clicks, key_serde=Serdes.String(), value_serde=Serdes.String())
        (stream.left_join(table, lambda user, click, name: f"{user}:{name}:{click}")
         .map(lambda user, enriched: (enriched.rsplit(":", 1)[1], enriched))
         .to(output))
        return builder.build()

    on_spark, on_asyncio = await both_engines(build, bootstrap_servers, spark, tmp_path, suffix, outputs,
                                              **{"max.task.idle.ms": 2_000})
    assert on_spark == on_asyncio
    assert len(on_spark) == 60
    assert on_spark["click-3"] == "u3:None:click-3" and on_spark["click-7"] == "u7:None:click-7"
    assert on_spark["click-1"] == "u1:name-1:click-1", "before the rename (t=1002 < 1051)"
    assert on_spark["click-49"] == "u1:renamed-1:click-49", "after the rename"


@pytest.mark.slow
async def test_repartition_then_aggregate_gives_the_same_table(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    suffix = unique_topic("agg")
    orders = f"orders-{suffix}"
    outputs = (f"spark-totals-{suffix}", f"asyncio-totals-{suffix}")
    for topic in (orders, *outputs):
        await create_topic(bootstrap_servers, topic, partitions=3)
    await produce(bootstrap_servers, orders, [
        Rec(f"order-{i}".encode(), json.dumps({"customer": f"c{i % 9}", "amount": (i * 7) % 50}).encode(),
            timestamp_ms=BASE_TS + 1_000 + i)
        for i in range(200)
    ])

    def build(output: str) -> Topology:
        builder = StreamsBuilder()
        (builder.stream(orders, key_serde=Serdes.String(), value_serde=Serdes.Json())
         .select_key(lambda order, v: v["customer"])
         .repartition(name="by-customer")
         .group_by_key()
         .aggregate(lambda: {"orders": 0, "total": 0, "largest": 0},
                    lambda customer, v, agg: {"orders": agg["orders"] + 1, "total": agg["total"] + v["amount"],
                                              "largest": max(agg["largest"], v["amount"])},
                    Materialized.as_("totals").with_value_serde(Serdes.Json()))
         .to_stream()
         .map_values(json.dumps)
         .to(output, value_serde=Serdes.String()))
        return builder.build()

    on_spark, on_asyncio = await both_engines(build, bootstrap_servers, spark, tmp_path, suffix, outputs)
    assert on_spark == on_asyncio
    assert json.loads(on_spark["c0"]) == {"orders": 23, "total": sum((i * 7) % 50 for i in range(0, 200, 9)),
                                          "largest": max((i * 7) % 50 for i in range(0, 200, 9))}


async def test_a_stateless_chain_with_a_custom_processor_writes_the_same_records(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    """split/branch, merge, peek, flat_map, a custom Processor and a sink whose partitioner picks a
    partition for some keys (murmur2 for the others): the same records, bytes, headers, partitions."""
    suffix = unique_topic("chain")
    source = f"events-{suffix}"
    outputs = (f"spark-chain-{suffix}", f"asyncio-chain-{suffix}")
    for topic in (source, *outputs):
        await create_topic(bootstrap_servers, topic, partitions=3)
    await produce(bootstrap_servers, source, [
        Rec(f"k{i % 5}".encode(), f"{i}".encode(), timestamp_ms=BASE_TS + i, headers=[("origin", b"test")])
        for i in range(40)
    ])

    class Twice(Processor):
        """Forwards each record twice: as it is and with its value negated, under a new key."""

        def init(self, context: Any) -> None:
            self.context = context

        def process(self, record: Record[Any, Any]) -> None:
            self.context.forward(record)
            self.context.forward(Record(f"neg-{record.key}", -record.value, record.timestamp, record.headers))

    def build(output: str) -> Topology:
        builder = StreamsBuilder()
        numbers = builder.stream(source, key_serde=Serdes.String(), value_serde=Serdes.String()).map_values(int)
        branches = (numbers.split(Named.as_("parity-"))
                    .branch(lambda k, v: v % 3 == 0, Branched.as_("three"))
                    .branch(lambda k, v: v % 2 == 0, Branched.as_("even"))
                    .default_branch(Branched.as_("rest")))
        merged = branches["parity-three"].map_values(lambda v: v * 100).merge(branches["parity-rest"])
        (merged.peek(lambda k, v: None)
         .process(Twice)
         .flat_map(lambda k, v: [(k, v), (f"{k}-copy", v)] if v % 5 == 0 else [(k, v)])
         .map_values(str)
         .to(output, key_serde=Serdes.String(), value_serde=Serdes.String(),
             partitioner=lambda topic, key, value, n: n - 1 if key.startswith("neg-") else None))
        return builder.build()

    runner = SparkRunner(build(outputs[0]), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark)
    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    await run_asyncio_to_end(build(outputs[1]), f"asyncio-{suffix}", bootstrap_servers, tmp_path / "state")

    def records(topic_records: Any) -> list[Any]:
        # Tasks of different input partitions interleave in an output partition on both engines.
        return sorted((r.partition, r.key, r.value, tuple(r.headers)) for r in topic_records)

    on_spark = records(await read_all(bootstrap_servers, outputs[0]))
    on_asyncio = records(await read_all(bootstrap_servers, outputs[1]))
    assert on_spark == on_asyncio, "the same records in the same partitions, with the same headers"
    assert len(on_spark) > 40
    assert {partition for partition, key, _, _ in on_spark if key.startswith(b"neg-")} == {2}, "the partitioner's choice"
    assert len({partition for partition, key, _, _ in on_spark if not key.startswith(b"neg-")}) > 1, "murmur2's"


async def test_a_pattern_source_reads_the_topics_it_matches_at_start(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    """Both clicks topics (2 partitions each, so a user's clicks meet in one task), not the views."""
    suffix = unique_topic("pattern")
    matched = (f"clicks-web-{suffix}", f"clicks-app-{suffix}")
    other = f"views-web-{suffix}"
    outputs = {engine: (f"{engine}-per-user-{suffix}",) for engine in ENGINES}
    for topic in (*matched, other, *outputs["spark"], *outputs["asyncio"]):
        await create_topic(bootstrap_servers, topic, partitions=2)
    for index, topic in enumerate((*matched, other)):
        await produce(bootstrap_servers, topic, [
            Rec(f"u{i % 4}".encode(), f"{topic}-{i}".encode(), timestamp_ms=BASE_TS + 100 * index + i) for i in range(10)
        ])

    def build(engine: str) -> Topology:
        builder = StreamsBuilder()
        (builder.stream(re.compile(f"clicks-.*-{suffix}"), key_serde=Serdes.String(), value_serde=Serdes.String())
         .group_by_key()
         .count()
         .to_stream()
         .map_values(str)
         .to(outputs[engine][0], value_serde=Serdes.String()))
        return builder.build()

    tables, _ = await run_both_engines(build, bootstrap_servers, spark, tmp_path, suffix, outputs, pattern_topics=matched)
    assert tables["spark"] == tables["asyncio"]
    assert tables["spark"][0] == {"u0": "6", "u1": "6", "u2": "4", "u3": "4"}, "both clicks topics, not the views"


async def test_a_global_table_join_gives_the_same_table(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    """The global table as it stands when the run starts (KafkaStreams bootstraps it before processing)."""
    suffix = unique_topic("global")
    dims, events = f"dims-{suffix}", f"events-{suffix}"
    outputs = {engine: (f"{engine}-enriched-{suffix}",) for engine in ENGINES}
    await create_topic(bootstrap_servers, dims, partitions=1)
    for topic in (events, *outputs["spark"], *outputs["asyncio"]):
        await create_topic(bootstrap_servers, topic, partitions=2)
    await produce(bootstrap_servers, dims, [
        Rec(b"d1", b"one", timestamp_ms=BASE_TS), Rec(b"d2", b"two", timestamp_ms=BASE_TS + 1),
        Rec(b"d1", b"uno", timestamp_ms=BASE_TS + 2), Rec(b"d3", b"three", timestamp_ms=BASE_TS + 3),
        Rec(b"d3", None, timestamp_ms=BASE_TS + 4),
    ])
    await produce(bootstrap_servers, events, [
        Rec(f"e{i}".encode(), f"d{i % 4 + 1}".encode(), timestamp_ms=BASE_TS + 1_000 + i) for i in range(12)
    ])

    def build(engine: str) -> Topology:
        builder = StreamsBuilder()
        table = builder.global_table(dims, key_serde=Serdes.String(), value_serde=Serdes.String())
        (builder.stream(events, key_serde=Serdes.String(), value_serde=Serdes.String())
         .left_join(table, lambda event, dim: dim, lambda dim, name: f"{dim}={name}")
         .to(outputs[engine][0], value_serde=Serdes.String()))
        return builder.build()

    tables, _ = await run_both_engines(build, bootstrap_servers, spark, tmp_path, suffix, outputs)
    assert tables["spark"] == tables["asyncio"]
    assert tables["spark"][0] == {f"e{i}": f"d{i % 4 + 1}=" + ("uno", "two", "None", "None")[i % 4] for i in range(12)}
