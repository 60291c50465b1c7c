"""Tumbling and hopping `aggregate()` and `reduce()` with the user's functions as one vectorized
query (kind "window-aggregate", native_window_aggregate.py), against Kafka Streams.

The per-task step alone (no Spark) against the TopologyTestDriver: the same records out and the
same calls of the user's initializer and aggregator, in the same order; on Spark, against
`KafkaStreams` on the same input and the per-task step over Spark's own micro-batches, over two
runs from one checkpoint.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

import pytest

from streams_core import Materialized, Serdes, StreamsBuilder, StreamsConfig, TimeWindows, Topology, TopologyTestDriver
from streams_core.spark import SparkRunner
from streams_core.spark.task_sessions import AggregateFunctions
from streams_core.spark.task_windows import TaskWindows
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import read_table, run_asyncio_to_end, utf8
from tests.spark.test_native_session_count import CONFIG, T0, _offsets, _table, at

S = Serdes.String()

#: The user functions' calls, in order (the TopologyTestDriver's run, then the step's).
CALLS: list[tuple[Any, ...]] = []


def initializer() -> str:
    CALLS.append(("init",))
    return ""


def aggregator(key: str, value: str, aggregate: str) -> str:
    CALLS.append(("add", key, value, aggregate))
    return None if value == "x" else aggregate + value  # type: ignore[return-value]  # None deletes the window


def reducer(one: str, two: str) -> str:
    CALLS.append(("reduce", one, two))
    return f"{one}+{two}"


def topology(source: str, output: str, size: int, advance: int, grace: int, how: str, *, unit: int = 1000,
             origin: int = T0, caching: bool = True) -> Topology:  # fmt: skip
    """Per key of the source, its windows' aggregate (or reduction) of the values, written as
    "key@start" (`unit`s from `origin`) -> the aggregate."""
    builder = StreamsBuilder()
    materialized = Materialized.with_(value_serde=S)
    if not caching:
        materialized = materialized.with_caching_disabled()
    windowed = builder.stream(source, key_serde=S, value_serde=S).group_by_key().windowed_by(
        TimeWindows.of_size_and_grace(size, grace).advance_by(advance))
    table = (windowed.aggregate(initializer, aggregator, materialized) if how == "aggregate"
             else windowed.reduce(reducer, materialized))  # fmt: skip
    (table.to_stream().map(lambda wk, v: (f"{wk.key}@{(wk.window.start - origin) // unit}", v))
     .to(output, key_serde=S, value_serde=S))  # fmt: skip
    return builder.build()


def functions(how: str) -> AggregateFunctions:
    """The DSL's functions of `how` (a reduce's as the DSL builds them), with the String serde."""
    builder = topology("in", "out", 10, 5, 0, how).internal_topology_builder
    builder.set_application_id("o")
    with tempfile.TemporaryDirectory() as state_dir:
        built = builder.build_subtopology(0, StreamsConfig({**CONFIG, "state.dir": state_dir}))
    (node,) = [n for n in built.processors if "AGGREGATE" in n.name or "REDUCE" in n.name]
    processor = node.processor
    return AggregateFunctions(processor._initializer, processor._aggregator, None,
                              lambda v: S.serialize("t", v), lambda b: S.deserialize("t", b))  # fmt: skip


@pytest.mark.parametrize("how", ["aggregate", "reduce"])
def test_the_task_step_calls_the_user_functions_as_kafka_streams(how: str) -> None:
    """Random keys, values (an aggregator returning None deletes its window) and timestamps out of
    order, late records beyond grace among them, tumbling and hopping windows: batch by batch the
    per-task step forwards what the TopologyTestDriver (caching on: it commits after every record)
    forwards, record by record, and calls the user's functions with the same arguments in the
    same order; over batches, the same calls and the same final table."""
    mismatches = []
    for seed in range(60):
        rnd = random.Random(seed)
        size, advance, grace = rnd.choice([(10, 10, 0), (10, 5, 5), (10, 3, 20), (6, 2, 0)])
        records, now = [], 0
        for i in range(rnd.randint(1, 40)):
            now += rnd.randint(0, 8)
            records.append((rnd.choice("ab"), rnd.choice(["x", f"v{i}", f"v{i}", f"v{i}"]),
                            T0 + max(0, now - rnd.choice([0, 0, 0, 3, 12, 25, 60]))))  # fmt: skip
        CALLS.clear()
        with TopologyTestDriver(topology("in", "out", size, advance, grace, how, unit=1), {"application.id": "o"}) as driver:
            source = driver.create_input_topic("in", S, S)
            for key, value, ts in records:
                source.pipe_input(key, value, ts)
            wanted = [(kv.key, kv.value) for kv in driver.create_output_topic("out", S, S).read_key_values_to_list()]
        wanted_calls = list(CALLS)
        for per in (1, 3, 100):
            CALLS.clear()
            step, out = TaskWindows(size, advance, grace, functions(how)), []
            for i in range(0, len(records), per):
                batch = records[i:i + per]
                flushed = step.flushed(step.process([k for k, _, _ in batch], [t for *_, t in batch], [v for _, v, _ in batch]))
                assert len({(k, s) for k, s, _, _ in flushed}) == len(flushed), "one record per window and batch"
                out.extend((f"{k}@{s - T0}", None if v is None else S.deserialize("t", v)) for k, s, _, v in flushed)
            if (out if per == 1 else _table(out)) != (wanted if per == 1 else _table(wanted)) or CALLS != wanted_calls:
                mismatches.append((seed, per))
    assert not mismatches
    assert any(v is None for _, v in wanted) == (how == "aggregate")


def test_a_window_aggregate_rebuilt_from_its_spark_state_continues_as_the_live_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-task processor over batches, its Python copy kept or dropped before every batch
    (rebuilt from the windows' value bytes in state, compacted on the way): the same flushes."""
    import pandas as pd

    from streams_core.spark import native_session_count
    from streams_core.spark.native_session_count import SessionInputs, SessionTask
    from streams_core.spark.native_window_aggregate import WindowAggregation
    from tests.spark.test_native_session_count import _Handle, _State, _Value

    class Flushed:
        @staticmethod
        def inputs() -> SessionInputs:
            return SessionInputs(functions("aggregate"))

        @staticmethod
        def written(flushed: list[tuple[Any, int, int, Any]]) -> Any:
            rows = [(k, s, t, None if v is None else S.deserialize("t", v)) for k, s, t, v in flushed]
            return pd.DataFrame(rows, columns=["key", "start", "ts", "value"], dtype=object)

    monkeypatch.setattr(native_session_count, "_COMPACT_SLACK", 0)
    rnd = random.Random(7)
    rows = [(f"k{rnd.randrange(30)}", rnd.choice(["x", f"{i}."]), T0 + i * 3 + rnd.choice([0, 0, -25, -90]))
            for i in range(600)]  # fmt: skip
    outputs = []
    for rebuilt in (False, True):
        windows = WindowAggregation(size=40, advance=20, grace=30, to_stream="", tail=(), sinks=(), topics=())
        task = SessionTask(windows, "string", Flushed())  # type: ignore[arg-type]  # a stand-in
        states: dict[str, _State] = {"sessions": _State(), "task": _Value()}
        task.init(_Handle(states))
        out = []
        for i in range(0, len(rows), 40):
            if rebuilt:
                native_session_count._live.clear()
            batch = rows[i:i + 40]
            frame = pd.DataFrame({"task": 0, "key": [k for k, _, _ in batch], "ts": [t for *_, t in batch], "part": 0,
                                  "seq": range(i, i + len(batch)), "value": [v for _, v, _ in batch]})  # fmt: skip
            for flushed in task.handleInputRows((0,), iter([frame]), None):
                out.extend(zip(flushed["key"], flushed["start"], flushed["ts"], flushed["value"], strict=True))
        outputs.append(out)
        assert len(states["sessions"].rows) < 15, "the changelog was compacted"
    assert outputs[0] == outputs[1]
    assert any(v is None for *_, v in outputs[0]) and len(outputs[0]) > 100


async def test_a_window_aggregate_over_micro_batches_and_two_runs_is_kafka_streams(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    """Two tasks (source partitions), five records per micro-batch, two runs from one checkpoint,
    hopping windows and an aggregate whose result depends on the order of the calls, records late
    beyond grace dropped. The table equals KafkaStreams'; the changelog is the per-task step's over
    Spark's micro-batches."""
    suffix = unique_topic("native-window-agg")
    events, output, asyncio_output = f"events-{suffix}", f"out-{suffix}", f"asyncio-out-{suffix}"
    for topic in (events, output, asyncio_output):
        await create_topic(bootstrap_servers, topic, partitions=2)
    runs = [
        {0: [("a", 0), ("a", 5), ("b", 3), ("a", 30), ("a", 12), ("a", 21), ("b", 50), ("a", 100), ("b", 2)],
         1: [("c", 1), ("c", 8), ("c", 40), ("c", 25), ("c", 33), ("c", 90), ("c", 45)]},
        {0: [("a", 35), ("a", 95), ("a", 108), ("b", 52), ("b", 104), ("a", 70)], 1: [("c", 85), ("c", 99), ("c", 60)]},
    ]  # fmt: skip
    value = {(p, i, r): f"{p}{r}{i}." for r, run in enumerate(runs) for p, rows in run.items() for i in range(len(rows))}
    size, advance, grace = 20_000, 10_000, 15_000

    def build(out: str) -> Topology:
        return topology(events, out, size, advance, grace, "aggregate")

    (query,) = SparkRunner(build(output), CONFIG).plan().queries
    assert query.native is not None and query.native.kind == "window-aggregate"
    runner = SparkRunner(build(output), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark, source_options={"maxOffsetsPerTrigger": "5"})  # fmt: skip
    batches: list[dict[int, int]] = []
    for r, run in enumerate(runs):
        await produce(bootstrap_servers, events, [Rec(k.encode(), value[p, i, r].encode(), partition=p, timestamp_ms=at(t))
                                                  for p, rows in run.items() for i, (k, t) in enumerate(rows)])  # fmt: skip
        runner.run("available_now", tmp_path / "checkpoints")
        batches.extend({int(p): o for p, o in _offsets(x["sources"][0]["endOffset"])[events].items()}
                       for x in runner.progress[0] if x["numInputRows"])  # fmt: skip
    assert len(batches) >= 5, "several micro-batches per run"
    records = await read_all(bootstrap_servers, output)
    table = _table([(utf8(x.key), None if x.value is None else utf8(x.value)) for x in records if x.key is not None])
    await run_asyncio_to_end(build(asyncio_output), f"asyncio-{suffix}", bootstrap_servers, tmp_path / "state")
    assert await read_table(bootstrap_servers, asyncio_output, utf8, utf8) == table

    everything = {p: [(k, t, value[p, i, r]) for r, run in enumerate(runs) for i, (k, t) in enumerate(run.get(p, []))]
                  for p in (0, 1)}  # fmt: skip
    expected: dict[str, list[str | None]] = {}
    dropped = 0
    for p, rows in everything.items():
        step, done = TaskWindows(size, advance, grace, functions("aggregate")), 0
        for ends in batches:
            batch, done = rows[done:ends.get(p, done)], ends.get(p, done)
            for k, s, _, v in step.flushed(step.process([k for k, _, _ in batch], [at(t) for _, t, _ in batch],
                                                        [v for *_, v in batch])):  # fmt: skip
                expected.setdefault(f"{k}@{(s - T0) // 1000}", []).append(None if v is None else S.deserialize("t", v))
        dropped += step.dropped
    changelog: dict[str, list[str | None]] = {}
    for x in records:
        assert x.key is not None
        changelog.setdefault(utf8(x.key), []).append(None if x.value is None else utf8(x.value))
    assert changelog == expected
    assert dropped, "late records"
    assert any(len(values) > 1 for values in changelog.values()), "windows updated across micro-batches"
