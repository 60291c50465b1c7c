"""Stream-stream joins (inner, left, outer) compiled to one native query (native_stream_join.py).

The per-task step alone (no Spark, a fake state handle) against the `TopologyTestDriver` fed the
same records in the same order, over micro-batches with the task kept live or restored from Spark
state: out-of-order records within grace are joined, late ones dropped as the window stores drop
them, unmatched records emitted when stream time closes their window. Then an inner join on Spark
against `KafkaStreams` on the same input, over several micro-batches and two runs from one checkpoint.
An outer join killed with SIGKILL mid-run and rerun: tests/spark/test_killed_runs.py.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streams_core import JoinWindows, Serdes, StreamJoined, StreamsBuilder, Topology
from streams_core.spark import SparkRunner
from streams_core.spark.subtopology_executor import InputRow, kafka_order
from streams_core.testing.topology_test_driver import TopologyTestDriver
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import BASE_TS, ENGINES, run_asyncio_to_end
from tests.spark.test_native_join_count import _Handle

S = Serdes.String()
CONFIG = {"application.id": "stream-join", "bootstrap.servers": "127.0.0.1:9"}
HOUR = 3_600_000


def joined(left: str, right: str, output: str, windows: JoinWindows, chained: bool = False, kind: str = "join") -> Topology:
    """left ⋈ right within `windows` (`kind`: join, left_join or outer_join), value "left+right";
    `chained`: stateless operators on both sides and after the join, Long values on the right (the
    record-by-record path)."""
    builder = StreamsBuilder()
    if not chained:
        other = builder.stream(right, key_serde=S, value_serde=S)
        this = builder.stream(left, key_serde=S, value_serde=S)
        (getattr(this, kind)(other, lambda a, b: f"{a}+{b}", windows, StreamJoined.with_(S, S, S))
         .to(output, key_serde=S, value_serde=S))
        return builder.build()
    long = Serdes.Long()
    other = builder.stream(right, key_serde=S, value_serde=S).map_values(
        lambda v: None if v is None else int(v[1:].rstrip("x")))  # type: ignore[arg-type, return-value]
    this = builder.stream(left, key_serde=S, value_serde=S).filter(lambda k, v: v is None or not v.endswith("x"))
    (getattr(this, kind)(other, lambda a, b: f"{a}+{b}", windows, StreamJoined.with_(S, S, long))
     .map(lambda k, v: (f"{k}/{v}", v.upper())).to(output, key_serde=S, value_serde=S))
    return builder.build()


def _records(rnd: random.Random, n: int) -> list[InputRow]:
    """Both sides' records of partition 0, mostly in time order, some out of order (within grace or
    late), a few with a None key or value."""
    rows = []
    for topic in ("left", "right"):
        ts = 1_000
        for offset in range(n):
            ts += rnd.randrange(0, 40)
            at = ts - rnd.choice([0, 0, 0, 0, 30, 120, 400])  # late by up to 400 ms
            value = f"{topic[0]}{offset}{'x' if rnd.random() < 0.1 else ''}"
            headers = (("n", str(offset).encode()),) if offset % 5 == 0 else ()
            key = None if offset % 17 == 16 else f"k{rnd.randrange(4)}".encode()
            rows.append(InputRow(topic, 0, offset, at, key, None if offset % 19 == 18 else value.encode(), headers))
    return rows


def _frame(rows: list[InputRow]) -> Any:
    import pandas as pd  # type: ignore[import-untyped]  # no stubs in the venv

    return pd.DataFrame({"topic": [r.topic for r in rows], "partition": [r.partition for r in rows],
                         "offset": [r.offset for r in rows], "timestamp": [r.timestamp for r in rows],
                         "key": [r.key for r in rows], "value": [r.value for r in rows],
                         "headers": [[{"key": k, "value": v} for k, v in r.headers] for r in rows]})  # fmt: skip


@pytest.mark.parametrize(("kind", "chained", "keep_live"), [
    ("join", False, True), ("join", False, False), ("join", True, False),
    ("left_join", False, False), ("left_join", True, True), ("outer_join", False, True), ("outer_join", True, False),
])  # fmt: skip
def test_the_task_step_joins_what_the_test_driver_joins(kind: str, chained: bool, keep_live: bool) -> None:
    from streams_core.spark.native_count import CountKeys
    from streams_core.spark.native_stream_join import StreamJoinTask, _live

    windows = JoinWindows.of_time_difference_and_grace(50, 150).after(20)  # before 50 ms, after 20 ms
    (query,) = SparkRunner(joined("left", "right", "out", windows, chained, kind), CONFIG).plan().queries
    assert query.stage == "native" and query.native is not None and query.native.kind == "stream-join"
    rnd = random.Random(7 + chained)
    rows = _records(rnd, 120)
    cuts = [0, *sorted(rnd.sample(range(1, 120), 6)), 120]  # micro-batches: offset ranges of both partitions
    batches = [[r for r in rows if lo <= r.offset < hi] for lo, hi in itertools.pairwise(cuts)]
    task = StreamJoinTask(CountKeys(query.spec.topology, query.spec.props, query.native), {})
    task.init(_Handle())  # type: ignore[arg-type]  # the fake has the calls the task makes
    ours: list[tuple[bytes, bytes, tuple[tuple[str, bytes], ...]]] = []
    ordered: list[InputRow] = []
    for batch in batches:
        if not keep_live:
            _live.clear()
        for out in task.handleInputRows((0,), iter([_frame(batch)]), None):
            headers = [tuple((h["key"], h["value"]) for h in hs) for hs in out["headers"]]
            ours.extend(zip(out["key"], out["value"], headers, strict=True))
        ordered.extend(kafka_order(batch))
    with TopologyTestDriver(joined("left", "right", "out", windows, chained, kind), {"application.id": "driver"}) as driver:
        inputs = {t: driver.create_input_topic(t, Serdes.Bytes(), Serdes.Bytes()) for t in ("left", "right")}
        for row in ordered:
            inputs[row.topic].pipe_input(row.key, row.value, row.timestamp, row.headers)
        expected = [(None if r.key is None else r.key.encode(), r.value.encode(), tuple(r.headers))
                    for r in driver.create_output_topic("out", S, S).read_records_to_list()]  # fmt: skip
    assert ours == expected
    assert 50 < len(expected) < 120 * 120, "pairs joined, not every pair"
    assert any(headers for *_, headers in expected), "the probing record's headers go with the joined record"
    unmatched = Counter(value.upper().split(b"+").index(b"NONE") for _, value, _ in expected if b"NONE" in value.upper())
    assert set(unmatched) == {"join": set(), "left_join": {1}, "outer_join": {0, 1}}[kind], "unmatched records emitted"


def test_plan_names_the_native_join_and_leaves_a_rekeyed_join_to_the_task_stage() -> None:
    windows = JoinWindows.of_time_difference_and_grace(1_000, 2_000)
    plan = SparkRunner(joined("left", "right", "out", windows), CONFIG).plan()
    text = plan.describe()
    assert "transformWithStateInPandas (the stream-stream join per task over columns" in text
    assert "KSTREAM-JOINTHIS-0000000004: vectorized: each new record joined" in text
    (query,) = SparkRunner(joined("left", "right", "out", windows, kind="left_join"), CONFIG).plan().queries
    assert query.native is not None and query.native.kind == "stream-join"
    builder = StreamsBuilder()  # re-keyed after the join: its repartition topic needs the runner's headers
    other = builder.stream("right", key_serde=S, value_serde=S)
    (builder.stream("left", key_serde=S, value_serde=S).join(other, lambda a, b: a + b, windows)
     .group_by(lambda k, v: v[:1], key_serde=S, value_serde=S).count().to_stream().to("counts"))
    stages = [q.stage for q in SparkRunner(builder.build(), CONFIG).plan().queries]
    assert stages[0] == "task" and len(stages) == 2


def _sides(first: int, n: int) -> dict[str, list[Rec]]:
    """Both sides' records `first` to `first + n` of each of two partitions (keys a<p>, b<p> in
    partition p): left timestamps even, right odd (no ties across sides); every 7th record 1.5 s out
    of order (joined), every 11th two hours late on both sides with the same key (within each
    other's window, but below their stores' retention: never stored, never joined). With the
    retention above the input's time span, any interleaving of the topics joins the same pairs (not
    so for a left or outer join: whether a record meets its partner before stream time passed its
    window depends on the interleaving, in Kafka Streams itself; the driver test checks those)."""
    records: dict[str, list[Rec]] = {"left": [], "right": []}
    for partition in (0, 1):
        for topic_side, parity in (("left", 0), ("right", 1)):
            rnd = random.Random(partition * 2 + parity)
            ts = 0
            for i in range(first + n):
                ts += 2 * rnd.randrange(50, 200)
                late, ooo = i % 11 == 10, i % 7 == 6
                key = f"late{partition}" if late else f"{'ab'[rnd.randrange(2)]}{partition}"
                at = ts - (2 * HOUR if late else 1_500 if ooo else 0)
                if i >= first:
                    value = f"{topic_side[0]}{partition}.{i}{'late' if late else 'ooo' if ooo else ''}"
                    records[topic_side].append(Rec(key.encode(), value.encode(), partition=partition,
                                                   timestamp_ms=BASE_TS + at + parity))  # fmt: skip
    return records


async def test_parity_with_kafka_streams_over_micro_batches_and_two_runs(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    suffix = unique_topic("stream-join")
    left, right = f"left-{suffix}", f"right-{suffix}"
    outputs = {engine: f"{engine}-joined-{suffix}" for engine in ENGINES}
    for topic in (left, right, *outputs.values()):
        await create_topic(bootstrap_servers, topic, partitions=2)
    windows = JoinWindows.of_time_difference_and_grace(1_000, HOUR)
    runner = SparkRunner(joined(left, right, outputs["spark"], windows),
                         {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark, source_options={"maxOffsetsPerTrigger": "40"})  # fmt: skip
    (query,) = runner.plan().queries
    assert query.native is not None and query.native.kind == "stream-join"
    for first, n in ((0, 32), (32, 24)):  # the second run starts with late records
        rows = _sides(first, n)
        await produce(bootstrap_servers, left, rows["left"])
        await produce(bootstrap_servers, right, rows["right"])
        await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
        await run_asyncio_to_end(joined(left, right, outputs["asyncio"], windows), f"asyncio-{suffix}", bootstrap_servers,
                                 tmp_path / "state", config={"max.task.idle.ms": 2_000})  # fmt: skip
        written = {engine: Counter((r.key, r.value) for r in await read_all(bootstrap_servers, topic))
                   for engine, topic in outputs.items()}  # fmt: skip
        assert written["spark"] == written["asyncio"], f"run from record {first}"
        values = [value.decode() for _, value in written["spark"] if value is not None]
        assert values and not any("late" in v for v in values), "late records are dropped"
        assert any("ooo" in v for v in values), "out-of-order records within grace are joined"
    assert len([p for p in runner.progress[query.subtopology_id] if p["numInputRows"]]) >= 3, "several micro-batches"


def test_ready_order_takes_and_holds_what_take_ready_does() -> None:
    """The task's order over columns against `partition_group.take_ready` over rows (distinct timestamps,
    records held while a partition with unread data is empty), across micro-batches."""
    import pandas as pd

    from streams_core.spark.partition_group import take_ready
    from streams_core.spark.stream_join_arrays import ready_order

    rnd = random.Random(3)
    stamps = rnd.sample(range(10_000), 90)
    rows = [InputRow(topic, 0, offset, stamps[i * 30 + offset], b"k", b"v", ())
            for i, topic in enumerate(("a", "b", "c")) for offset in range(30)]  # fmt: skip
    waits = {("a", 0): 29, ("b", 0): 29, ("c", 0): 29}
    held_rows: list[InputRow] = []
    held_frame, read_rows, read_frame = None, {}, {}  # type: ignore[var-annotated]
    taken = 0
    c_cuts = {0: (0, 0), 4: (0, 0), 9: (0, 0), 10: (0, 22), 22: (22, 30)}  # c comes late
    for lo, hi in itertools.pairwise([0, 4, 9, 10, 22, 30]):
        c_lo, c_hi = c_cuts[lo]
        batch = [r for r in rows if (c_lo <= r.offset < c_hi if r.topic == "c" else lo <= r.offset < hi)]
        ready, held_rows = take_ready(held_rows, batch, read_rows, waits)
        frames = [f for f in (held_frame, _frame(batch)) if f is not None]
        ready_frame, held_frame = ready_order(pd.concat(frames, ignore_index=True), read_frame, waits)
        assert [(r.topic, r.offset) for r in ready] == (
            [] if ready_frame is None else list(zip(ready_frame["topic"], ready_frame["offset"], strict=True)))
        assert sorted((r.topic, r.offset) for r in held_rows) == sorted(zip(held_frame["topic"], held_frame["offset"], strict=True))
        taken += len(ready)
    assert taken == 90 and not held_rows and held_frame is not None and not len(held_frame)
