"""Foreign-key table-table joins on Spark: two task-stage queries, the response topic read back round by round.

The left table (orders: `customer:amount`) sends subscriptions to the right table's sub-topology
(customers), whose responses come back to the left one: a cycle of topics that `available_now`
runs round by round until the writers of the response topic read nothing new. Without Spark
(`run_task_batch`, micro-batches of three records, tasks rebuilt or live, the topics passed
between the two sub-topologies by hand) and on Spark (two partitions, two `available_now` runs
from one checkpoint), the final table equals the `TopologyTestDriver`'s, for the inner and the
left join.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from streams_core import Serdes, StreamsBuilder, Topology, TopologyTestDriver
from streams_core.spark import SparkRunner, task_batch
from streams_core.spark.subtopology_executor import InputRow
from streams_core.spark.task_batch import run_task_batch
from tests.kafka_utils import Rec, create_topic, produce, unique_topic
from tests.spark.engines import BASE_TS, read_table, utf8

CONFIG = {"application.id": "fk", "bootstrap.servers": "127.0.0.1:9"}

#: (topic, key, value, time): orders change customer, are deleted, name customers that come later
#: or never; customers are renamed and deleted.
INPUT: list[tuple[str, str, str | None, int]] = [
    ("customers", "c1", "Ann", 1000), ("customers", "c2", "Bob", 1001),
    ("orders", "o1", "c1:10", 1002), ("orders", "o2", "c2:20", 1003), ("orders", "o3", "c3:30", 1004),
    ("orders", "o4", "c9:40", 1005),                                    # a customer that never comes
    ("customers", "c1", "Anna", 1006),                                  # renamed: o1 again
    ("orders", "o2", "c1:21", 1007),                                    # o2 moves from c2 to c1
    ("customers", "c3", "Cy", 1008),                                    # after its order
    ("orders", "o5", "c2:50", 1009), ("customers", "c2", None, 1010),   # c2 deleted: o5 loses it
    ("orders", "o1", None, 1011),                                       # o1 deleted
    ("orders", "o6", "c3:60", 1012), ("customers", "c3", "Cyd", 1013),
    ("orders", "o3", "c3:31", 1014), ("customers", "c4", "Dee", 1015), ("orders", "o7", "c4:70", 1016),
    ("orders", "o2", "c4:22", 1017), ("customers", "c1", "Annie", 1018),
]


def topology(kind: str, orders: str = "orders", customers: str = "customers", out: str = "out") -> Topology:
    builder = StreamsBuilder()
    left = builder.table(orders, key_serde=Serdes.String(), value_serde=Serdes.String())
    right = builder.table(customers, key_serde=Serdes.String(), value_serde=Serdes.String())
    join = left.join if kind == "inner" else left.left_join
    (join(right, lambda order: order.split(":")[0], lambda order, name: f"{order}/{name}")
     .to_stream()
     .to(out, key_serde=Serdes.String(), value_serde=Serdes.String()))
    return builder.build()


def final(records: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    table: dict[str, str] = {}
    for key, value in records:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table


def driver_table(top: Topology, names: dict[str, str] | None = None) -> dict[str, str]:
    names = names or {"orders": "orders", "customers": "customers", "out": "out"}
    with TopologyTestDriver(top, {**CONFIG, "application.id": "fk-driver"}) as driver:
        inputs = {t: driver.create_input_topic(names[t], Serdes.String(), Serdes.String()) for t in ("orders", "customers")}
        for topic, key, value, timestamp in INPUT:
            inputs[topic].pipe_input(key, value, timestamp)
        output = driver.create_output_topic(names["out"], Serdes.String(), Serdes.String())
        return final((r.key, r.value) for r in output.read_records_to_list())


EXPECTED = {
    "inner": {"o2": "c4:22/Dee", "o3": "c3:31/Cyd", "o6": "c3:60/Cyd", "o7": "c4:70/Dee"},
    "left": {"o2": "c4:22/Dee", "o3": "c3:31/Cyd", "o4": "c9:40/None", "o5": "c2:50/None", "o6": "c3:60/Cyd",
             "o7": "c4:70/Dee"},
}


def test_a_foreign_key_join_is_two_task_queries_run_round_by_round() -> None:
    plan = SparkRunner(topology("inner"), CONFIG).plan()
    left, right = plan.queries
    assert [q.stage for q in plan.queries] == ["task", "task"]
    assert left.why.startswith("KTable.join/left_join with a foreign-key extractor needs the whole task")
    (response,) = left.feedback_topics
    assert "SUBSCRIPTION-RESPONSE" in response and response in right.sink_topics
    assert left.feedback == (1,) and left.after == () and right.after == (0,)
    assert plan.rounds == plan.queries
    assert "Query 0: sub-topology 0; again after 1 until no new records" in plan.describe()
    assert response in right.partitioned_sinks, "a response goes back to the partition its subscription came from"


@pytest.mark.parametrize("worker", ["rebuilt", "live"])
@pytest.mark.parametrize("kind", ["inner", "left"])
def test_the_task_stage_round_by_round_gives_the_drivers_table(kind: str, worker: str) -> None:
    """One partition; each round runs the left query, then the right one, on what reached their
    topics, in micro-batches of three records, until no topic between them has records."""
    expected = driver_table(topology(kind))
    assert expected == EXPECTED[kind]
    left, right = SparkRunner(topology(kind), {**CONFIG, "statestore.cache.max.bytes": 0}).plan().queries
    right = replace(right, spec=replace(right.spec, sink_partitions=dict.fromkeys(right.partitioned_sinks, 1)))
    pending: dict[str, list[InputRow]] = {}
    offsets: dict[str, int] = {}

    def send(topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Any = ()) -> None:
        offset = offsets.get(topic, 0)
        offsets[topic] = offset + 1
        pending.setdefault(topic, []).append(InputRow(topic, 0, offset, timestamp, key, value, tuple(headers)))

    for topic, key, value, timestamp in INPUT:
        send(topic, key.encode(), None if value is None else value.encode(), timestamp)
    state: dict[int, tuple[bytes | None, dict[tuple[str, bytes], bytes]]] = {0: (None, {}), 1: (None, {})}
    out: list[tuple[str, str | None]] = []
    rounds = 0
    while any(pending.values()):
        rounds += 1
        for query in (left, right):
            rows = [row for topic in query.source_topics for row in pending.pop(topic, [])]
            rows.sort(key=lambda r: (r.timestamp, r.topic, r.offset))
            for start in range(0, len(rows), 3):
                if worker == "rebuilt":
                    task_batch.drop_live_tasks()
                task, changelog = state[query.subtopology_id]
                batch = run_task_batch(query.spec, 0, rows[start:start + 3], task,
                                       lambda changelog=changelog: [(t, k, v) for (t, k), v in changelog.items()])  # type: ignore[misc]
                for entry, changed in batch.changelog.items():
                    if changed is None:
                        changelog.pop(entry, None)
                    else:
                        changelog[entry] = changed
                state[query.subtopology_id] = (batch.task, changelog)
                for row in batch.rows:
                    if row.topic == "out":
                        out.append(((row.key or b"").decode(), None if row.value is None else row.value.decode()))
                    else:
                        assert row.partition in (None, 0)
                        send(row.topic, row.key, row.value, 0, row.headers)  # the time rides in the runner's header
    task_batch.drop_live_tasks()
    assert rounds == 2, "subscriptions and responses in the first round, the responses joined in the second"
    assert final(out) == expected


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["inner", "left"])
async def test_spark_gives_the_drivers_table(kind: str, bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    """Two partitions, micro-batches of at most 6 records, the input split over two `available_now`
    runs from one checkpoint (the second run starts with subscriptions already registered)."""
    suffix = unique_topic(f"fk-{kind}")
    names = {"orders": f"orders-{suffix}", "customers": f"customers-{suffix}", "out": f"out-{suffix}"}
    for topic in names.values():
        await create_topic(bootstrap_servers, topic, partitions=2)
    runner = SparkRunner(topology(kind, names["orders"], names["customers"], names["out"]),
                         {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers}, spark=spark,
                         source_options={"maxOffsetsPerTrigger": "6"}, progress=False)
    half = 10
    for part in (INPUT[:half], INPUT[half:]):
        for topic, key, value, timestamp in part:
            await produce(bootstrap_servers, names[topic], [
                Rec(key.encode(), None if value is None else value.encode(), timestamp_ms=BASE_TS + timestamp)])
        await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    on_spark = await read_table(bootstrap_servers, names["out"], utf8, utf8)
    assert on_spark == driver_table(topology(kind, names["orders"], names["customers"], names["out"]), names)
    assert on_spark == EXPECTED[kind]
    # each run: the left query, the right one, then both again (the left one joins the responses, the
    # right one reads nothing: the last round); `progress` holds the last run's rounds (a start each)
    rounds: dict[int, list[int]] = {0: [], 1: []}
    for sid, reports in rounds.items():
        read: dict[Any, int] = {}
        for report in runner.progress[sid]:
            read[report["runId"]] = read.get(report["runId"], 0) + int(report["numInputRows"])
        reports.extend(read.values())
    assert len(rounds[0]) == 2 and all(rounds[0]), f"the left query read in two rounds: {rounds}"
    assert [n for n in rounds[1] if n] == rounds[1][:1], f"the right query read in the first round only: {rounds}"


@pytest.mark.slow
async def test_a_continuous_run_passes_the_responses_between_running_queries(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    """Both queries run together; each response reaches the left query in a later micro-batch of it."""
    suffix = unique_topic("fk-continuous")
    names = {"orders": f"orders-{suffix}", "customers": f"customers-{suffix}", "out": f"out-{suffix}"}
    for topic in names.values():
        await create_topic(bootstrap_servers, topic, partitions=2)
    for topic, key, value, timestamp in INPUT:
        await produce(bootstrap_servers, names[topic], [
            Rec(key.encode(), None if value is None else value.encode(), timestamp_ms=BASE_TS + timestamp)])
    runner = SparkRunner(topology("left", names["orders"], names["customers"], names["out"]),
                         {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers}, spark=spark,
                         source_options={"maxOffsetsPerTrigger": "6"}, progress=False)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            runner.run("continuous", tmp_path / "checkpoints")
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 180
        table: dict[str, str] = {}
        while table != EXPECTED["left"]:
            assert not errors, errors
            assert time.monotonic() < deadline, f"the table did not converge: {table}"
            await asyncio.sleep(2)
            table = await read_table(bootstrap_servers, names["out"], utf8, utf8)
    finally:
        runner.stop()
        await asyncio.to_thread(thread.join, 60)
    assert not thread.is_alive() and not errors, errors
