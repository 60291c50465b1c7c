"""Versioned tables on Spark's task stage: the store of versions carried as its changelog, against the driver.

A stream-table join reads a versioned table as of each order's timestamp; the price updates come
out of order (resolved by timestamp), one older than the history retention (not stored), and
orders older than the retention find nothing. Without Spark (`run_task_batch` over micro-batches
of three records, the task rebuilt from Spark state for each or kept live) and on Spark (two
`available_now` runs from one checkpoint), the output equals the `TopologyTestDriver`'s.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from streams_core import Joined, Materialized, Serdes, Stores, StreamsBuilder, Topology, TopologyTestDriver
from streams_core.spark import SparkRunner, task_batch
from streams_core.spark.subtopology_executor import InputRow, kafka_order
from streams_core.spark.task_batch import run_task_batch
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import BASE_TS

CONFIG = {"application.id": "versioned", "bootstrap.servers": "127.0.0.1:9"}
HISTORY_MS = 200

#: (topic, key, value, time) in batches of three, each run in Kafka Streams' order (the lowest
#: timestamp head first): prices out of order, one too old to keep, orders as of their own time.
INPUT: list[tuple[str, str, str | None, int]] = [
    ("prices", "p1", "10", 1000), ("prices", "p2", "5", 1000), ("orders", "p1", "o1", 1100),  # o1: 10
    # 30 then 20 (out of order: valid 1200..1300); o3: 5
    ("prices", "p1", "30", 1300), ("prices", "p1", "20", 1200), ("orders", "p2", "o3", 1310),
    # 7 first: older than 1300 - 200 with later versions, not stored; o2 (out of order): 20, not 30; o5: 10, not 7
    ("orders", "p1", "o2", 1250), ("prices", "p1", "7", 1050), ("orders", "p1", "o5", 1150),
    # o4 first: older than the history retention, no price (dropped); p2 deleted; o6: no price (dropped)
    ("orders", "p1", "o4", 1060), ("prices", "p2", None, 1400), ("orders", "p2", "o6", 1410),
    ("orders", "p2", "o7", 1350), ("orders", "p1", "o8", 1450), ("prices", "p2", "8", 1460),  # o7: 5 (before the delete), o8: 30
    # o9, o10: 30; with a grace period of 100 older than the join's buffer time (1450) - 100: joined at once, in order
    ("orders", "p1", "o9", 1340), ("orders", "p1", "o10", 1330), ("orders", "p1", "o11", 1700),
]


def topology(prices: str = "prices", orders: str = "orders", out: str = "out", grace_ms: int | None = None) -> Topology:
    builder = StreamsBuilder()
    store = Stores.persistent_versioned_key_value_store("price-versions", HISTORY_MS)
    table = builder.table(prices, Materialized.as_(store).with_key_serde(Serdes.String()).with_value_serde(Serdes.String()))
    joined = Joined.with_(Serdes.String(), Serdes.String(), Serdes.String(), grace_period=grace_ms)
    (builder.stream(orders, key_serde=Serdes.String(), value_serde=Serdes.String())
     .join(table, lambda order, price: f"{order}@{price}", joined)
     .to(out, key_serde=Serdes.String(), value_serde=Serdes.String()))
    return builder.build()


Input = tuple[str, str, str | None, int]


def as_rows(records: list[Input], shift: int = 0) -> list[InputRow]:
    """The records as one partition per topic would hold them, timestamps shifted by `shift`."""
    offsets = {"prices": 0, "orders": 0}
    rows = []
    for topic, key, value, timestamp in records:
        rows.append(InputRow(topic, 0, offsets[topic], shift + timestamp, key.encode(), None if value is None else value.encode(), ()))
        offsets[topic] += 1
    return rows


def in_kafka_order(rows: list[InputRow]) -> list[Input]:
    """The rows as a task reads them (PartitionGroup: the head with the lowest timestamp first)."""
    return [(r.topic, (r.key or b"").decode(), None if r.value is None else r.value.decode(), r.timestamp)
            for r in kafka_order(rows)]  # fmt: skip


def driver_output(top: Topology, records: list[Input], names: dict[str, str]) -> list[tuple[str, str]]:
    """The driver's output records, `records` piped in the given order."""
    with TopologyTestDriver(top, {**CONFIG, "application.id": "versioned-driver"}) as driver:
        inputs = {t: driver.create_input_topic(names[t], Serdes.String(), Serdes.String()) for t in ("prices", "orders")}
        for topic, key, value, timestamp in records:
            inputs[topic].pipe_input(key, value, timestamp)
        return [(r.key, r.value) for r in driver.create_output_topic(names["out"], Serdes.String(), Serdes.String())
                .read_records_to_list()]


def test_a_versioned_table_runs_in_the_task_stage() -> None:
    (query,) = SparkRunner(topology(), CONFIG).plan().queries
    assert query.stage == "task"
    assert query.why.startswith("a versioned table (persistent_versioned_key_value_store) needs the whole task")
    assert "price-versions" in query.stores


@pytest.mark.parametrize("grace_ms", [None, 100])
@pytest.mark.parametrize("worker", ["rebuilt", "live"])
def test_the_task_stage_over_micro_batches_writes_what_the_driver_writes(worker: str, grace_ms: int | None) -> None:
    """Micro-batches of three records, the task rebuilt from its changelog for each ("rebuilt") or
    kept live; the driver is fed each batch in Kafka Streams' order (lowest timestamp head first)."""
    (query,) = SparkRunner(topology(grace_ms=grace_ms), CONFIG).plan().queries
    everything = as_rows(INPUT)
    batches = [everything[start:start + 3] for start in range(0, len(everything), 3)]
    ordered = [record for rows in batches for record in in_kafka_order(rows)]
    expected = driver_output(topology(grace_ms=grace_ms), ordered, {"prices": "prices", "orders": "orders", "out": "out"})
    changelog: dict[tuple[str, bytes], bytes] = {}
    task: bytes | None = None
    out: list[tuple[str, str]] = []
    for rows in batches:
        if worker == "rebuilt":
            task_batch.drop_live_tasks()
        batch = run_task_batch(query.spec, 0, rows, task, lambda: [(t, k, v) for (t, k), v in changelog.items()])
        task = batch.task
        for entry, changed in batch.changelog.items():
            if changed is None:
                changelog.pop(entry, None)
            else:
                changelog[entry] = changed
        out.extend((r.key.decode(), r.value.decode()) for r in batch.rows if r.key is not None and r.value is not None)
    task_batch.drop_live_tasks()
    assert out == expected
    if grace_ms is None:
        assert dict((v.split("@")[0], v.split("@")[1]) for _, v in expected) == {
            "o1": "10", "o3": "5", "o2": "20", "o5": "10", "o7": "5", "o8": "30",
            "o9": "30", "o10": "30", "o11": "30"}, "as of each order's time"


@pytest.mark.slow
async def test_spark_runs_a_versioned_table_join_as_the_driver_does(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    """Two `available_now` runs from one checkpoint (the input split between them), micro-batches of 4 records."""
    suffix = unique_topic("versioned")
    names = {"prices": f"prices-{suffix}", "orders": f"orders-{suffix}", "out": f"out-{suffix}"}
    for topic in names.values():
        await create_topic(bootstrap_servers, topic, partitions=1)
    top = topology(names["prices"], names["orders"], names["out"])
    runner = SparkRunner(top, {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers}, spark=spark,
                         source_options={"maxOffsetsPerTrigger": "4"}, progress=False)
    assert runner.plan().queries[0].stage == "task"
    half = 9
    for part in (INPUT[:half], INPUT[half:]):
        for topic, key, value, timestamp in part:  # one produce per record: the order across topics kept
            await produce(bootstrap_servers, names[topic], [
                Rec(key.encode(), None if value is None else value.encode(), timestamp_ms=BASE_TS + timestamp)])
        await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    records = await read_all(bootstrap_servers, names["out"])
    on_spark = [((r.key or b"").decode(), (r.value or b"").decode()) for r in records]
    # Spark's task waits for the topic behind: Kafka Streams' order over each run's input
    in_order = in_kafka_order(as_rows(INPUT[:half], BASE_TS)) + in_kafka_order(as_rows(INPUT[half:], BASE_TS))
    expected = driver_output(topology(names["prices"], names["orders"], names["out"]), in_order, names)
    assert on_spark == expected
    assert len(expected) >= 5
