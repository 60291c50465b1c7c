"""Session `aggregate()` and `reduce()` with the user's functions as one vectorized query (kind
"session-aggregate", native_session_count.py), against Kafka Streams.

The per-task step alone (no Spark) against the TopologyTestDriver: the same records out and the
same calls of the user's initializer, session merger and aggregator, in the same order; on
Spark, against `KafkaStreams` on the same input and the per-task step over Spark's own
micro-batches, over two runs from one checkpoint.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

import pytest

from streams_core import (
    Grouped,
    Materialized,
    Produced,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    StreamsConfig,
    Topology,
    TopologyTestDriver,
    WindowedSerdes,
)
from streams_core.spark import SparkRunner
from streams_core.spark.native_session_count import SessionAggregation, SessionInputs, SessionTask
from streams_core.spark.task_sessions import AggregateFunctions, TaskSessions
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import read_table, run_asyncio_to_end, utf8
from tests.spark.test_native_session_count import CONFIG, T0, _Handle, _offsets, _State, _table, _Value, at

S, L = Serdes.String(), Serdes.Long()

#: The user functions' calls, in order (the TopologyTestDriver's run, then the step's).
CALLS: list[tuple[Any, ...]] = []


def initializer() -> str:
    CALLS.append(("init",))
    return ""


def aggregator(key: str, value: str, aggregate: str) -> str:
    CALLS.append(("add", key, value, aggregate))
    return aggregate + value


def merger(key: str, one: str, two: str) -> str:
    CALLS.append(("merge", key, one, two))
    return f"{one}({two})"


def reducer(one: str, two: str) -> str:
    CALLS.append(("reduce", one, two))
    return f"{one}+{two}"


def aggregated(builder: StreamsBuilder, source: str, output: str, gap: int, grace: int, how: str, *,
               caching: bool = True, unit: int = 1000, origin: int = T0) -> None:  # fmt: skip
    """Per key of the source, its sessions' aggregate (or reduction) of the values, written as
    "key@start-end" (`unit`s from `origin`) -> the aggregate."""
    materialized = Materialized.with_(value_serde=S)
    if not caching:
        materialized = materialized.with_caching_disabled()
    sessions = builder.stream(source, key_serde=S, value_serde=S).group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_and_grace(gap, grace))
    table = (sessions.aggregate(initializer, aggregator, merger, materialized) if how == "aggregate"
             else sessions.reduce(reducer, materialized))  # fmt: skip
    (table.to_stream()
     .map(lambda wk, v: (f"{wk.key}@{(wk.window.start - origin) // unit}-{(wk.window.end - origin) // unit}", v))
     .to(output, key_serde=S, value_serde=S))  # fmt: skip


def topology(source: str, output: str, gap: int, grace: int, how: str, **options: Any) -> Topology:
    builder = StreamsBuilder()
    aggregated(builder, source, output, gap, grace, how, **options)
    return builder.build()


def functions(how: str) -> AggregateFunctions:
    """The DSL's functions of `how` (a reduce's as the DSL builds them), with the String serde."""
    builder = topology("in", "out", 10, 0, how).internal_topology_builder
    builder.set_application_id("o")
    with tempfile.TemporaryDirectory() as state_dir:
        built = builder.build_subtopology(0, StreamsConfig({**CONFIG, "state.dir": state_dir}))
    (node,) = [n for n in built.processors if "AGGREGATE" in n.name or "REDUCE" in n.name]
    processor = node.processor
    return AggregateFunctions(processor._initializer, processor._aggregator, processor._merger,
                            lambda v: S.serialize("t", v), lambda b: S.deserialize("t", b))  # fmt: skip


@pytest.mark.parametrize("how", ["aggregate", "reduce"])
def test_the_task_step_calls_the_user_functions_as_kafka_streams(how: str) -> None:
    """Random keys and timestamps out of order (late records beyond grace among them): record by
    record the per-task step forwards what the TopologyTestDriver forwards (a session store without
    cache) and calls the user's functions with the same arguments in the same order (late records'
    merges included); over batches, the same calls and the same final table."""
    mismatches = []
    for seed in range(60):
        rnd = random.Random(seed)
        gap, grace = rnd.choice([(10, 0), (10, 5), (10, 30), (5, 100)])
        records, now = [], 0
        for i in range(rnd.randint(1, 40)):
            now += rnd.randint(0, 8)
            records.append((rnd.choice("ab"), f"v{i}", T0 + max(0, now - rnd.choice([0, 0, 0, 3, 12, 25, 60]))))
        CALLS.clear()
        with TopologyTestDriver(topology("in", "out", gap, grace, how, caching=False, unit=1), {"application.id": "o"}) as driver:
            source = driver.create_input_topic("in", S, S)
            for key, value, ts in records:
                source.pipe_input(key, value, ts)
            wanted = [(kv.key, kv.value) for kv in driver.create_output_topic("out", S, S).read_key_values_to_list()]
        wanted_calls = list(CALLS)
        # Without a cache, a session merged into one with the same window is deleted, then written.
        wanted = [r for i, r in enumerate(wanted) if not (r[1] is None and i + 1 < len(wanted) and wanted[i + 1][0] == r[0])]
        for per in (1, 3, 100):
            CALLS.clear()
            step, out = TaskSessions(gap, grace, gap + grace, functions(how)), []
            for i in range(0, len(records), per):
                batch = records[i:i + per]
                flushed = step.flushed(step.process([k for k, _, _ in batch], [t for *_, t in batch], [v for _, v, _ in batch]))
                assert len({(k, s, e) for k, s, e, _ in flushed}) == len(flushed), "one record per session and batch"
                out.extend((f"{k}@{s - T0}-{e - T0}", None if v is None else S.deserialize("t", v)) for k, s, e, v in flushed)
            if (out if per == 1 else _table(out)) != (wanted if per == 1 else _table(wanted)) or CALLS != wanted_calls:
                mismatches.append((seed, per))
    assert not mismatches
    assert any(c[0] == ("merge" if how == "aggregate" else "reduce") for c in wanted_calls)


def test_an_aggregator_returning_none_removes_the_session_as_the_caching_store_does() -> None:
    """None from the aggregator: the session removed; its tombstone only if the store had it (the
    TopologyTestDriver with caching on commits after each record: one batch per record)."""

    def maybe(key: str, value: str, aggregate: str) -> str | None:
        return None if value == "x" else aggregate + value

    def build() -> Topology:
        builder = StreamsBuilder()
        (builder.stream("in", key_serde=S, value_serde=S).group_by_key()
         .windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 100))
         .aggregate(str, maybe, lambda key, one, two: one + two, Materialized.with_(value_serde=S)).to_stream()
         .map(lambda wk, v: (f"{wk.key}@{wk.window.start}-{wk.window.end}", v)).to("out", key_serde=S, value_serde=S))
        return builder.build()

    mismatches, removed = [], 0
    for seed in range(40):
        rnd = random.Random(seed)
        records = [(rnd.choice("ab"), rnd.choice(["p", "q", "x"]), rnd.randint(0, 60)) for _ in range(15)]
        with TopologyTestDriver(build(), {"application.id": "o"}) as driver:
            source = driver.create_input_topic("in", S, S)
            for key, value, ts in records:
                source.pipe_input(key, value, ts)
            wanted = [(kv.key, kv.value) for kv in driver.create_output_topic("out", S, S).read_key_values_to_list()]
        step = TaskSessions(10, 100, 110, AggregateFunctions(str, maybe, lambda key, one, two: one + two,
                                                           lambda v: S.serialize("t", v), lambda b: S.deserialize("t", b)))  # fmt: skip
        out = [(f"{k}@{s}-{e}", None if v is None else S.deserialize("t", v))
               for key, value, ts in records for k, s, e, v in step.flushed(step.process([key], [ts], [value]))]  # fmt: skip
        removed += sum(v is None for _, v in out)
        if out != wanted:
            mismatches.append(seed)
    assert not mismatches
    assert removed


class _Flushed:
    """SessionTask's output without a tail: the flushed sessions, their values deserialized."""

    def __init__(self, how: str) -> None:
        self._inputs = SessionInputs(functions(how))

    def inputs(self) -> SessionInputs:
        return self._inputs

    @staticmethod
    def written(flushed: list[tuple[Any, int, int, Any]]) -> Any:
        import pandas as pd

        rows = [(k, s, e, None if v is None else S.deserialize("t", v)) for k, s, e, v in flushed]
        return pd.DataFrame(rows, columns=["key", "start", "end", "value"], dtype=object)


def test_an_aggregate_rebuilt_from_its_spark_state_continues_as_the_live_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-task processor over batches, its Python copy kept or dropped before every batch
    (rebuilt from the store's value bytes in state, compacted on the way): the same flushes."""
    import pandas as pd

    from streams_core.spark import native_session_count

    monkeypatch.setattr(native_session_count, "_COMPACT_SLACK", 0)
    rnd = random.Random(7)
    rows = [(f"k{rnd.randrange(30)}", f"{i}.", T0 + i * 3 + rnd.choice([0, 0, -25, -90])) for i in range(600)]
    outputs = []
    for rebuilt in (False, True):
        session = SessionAggregation(gap=20, grace=30, retention=50, to_stream="", tail=(), sinks=(), topics=())
        task = SessionTask(session, "string", _Flushed("aggregate"))  # type: ignore[arg-type]  # a stand-in
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
                out.extend(zip(flushed["key"], flushed["start"], flushed["end"], flushed["value"], strict=True))
        outputs.append(out)
        assert len(states["sessions"].rows) < 15, "the changelog was compacted"
    assert outputs[0] == outputs[1]
    assert any(v is None for *_, v in outputs[0]) and any(v and "(" in v for *_, v in outputs[0]), "merges"


@pytest.mark.parametrize("how", ["aggregate", "reduce"])
def test_plan_names_the_session_aggregate_stage(how: str) -> None:
    (query,) = SparkRunner(topology("in", "out", 10_000, 0, how), CONFIG).plan().queries
    assert query.stage == "native" and query.native is not None and query.native.kind == "session-aggregate"
    assert "transformWithStateInPandas (the user's functions over sessions per key" in query.describe()
    how_runs = dict(query.operators())
    (aggregation,) = [n for n in how_runs if "AGGREGATE" in n or "REDUCE" in n]
    assert how_runs[aggregation].startswith("vectorized: per task (source partitions)")
    assert "the user's initializer, session merger and aggregator" in how_runs[aggregation]
    (query,) = SparkRunner(topology("in", "out", 10_000, 0, how, caching=False), CONFIG).plan().queries
    assert query.native is None and query.stage == "task" and "not native: caching is off" in query.describe()


async def test_a_session_aggregate_over_micro_batches_and_two_runs_is_kafka_streams(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    """Two tasks (source partitions), five records per micro-batch, two runs from one checkpoint, an
    aggregate whose result depends on the order of the calls: merges across micro-batches and runs,
    late records dropped. The table equals KafkaStreams'; the changelog is the per-task step's over
    Spark's micro-batches (the values through the store's serde)."""
    suffix = unique_topic("native-session-agg")
    events, output, asyncio_output = f"events-{suffix}", f"out-{suffix}", f"asyncio-out-{suffix}"
    for topic in (events, output, asyncio_output):
        await create_topic(bootstrap_servers, topic, partitions=2)
    runs = [
        {0: [("a", 0), ("a", 5), ("b", 3), ("a", 30), ("a", 12), ("a", 21), ("b", 50), ("a", 100), ("b", 2)],
         1: [("c", 1), ("c", 8), ("c", 40), ("c", 25), ("c", 33), ("c", 90), ("c", 45)]},
        {0: [("a", 35), ("a", 95), ("a", 108), ("b", 52), ("b", 104)], 1: [("c", 85), ("c", 99), ("c", 60)]},
    ]  # fmt: skip
    value = {(p, i, r): f"{p}{r}{i}." for r, run in enumerate(runs) for p, rows in run.items() for i in range(len(rows))}
    runner = SparkRunner(topology(events, output, 10_000, 20_000, "aggregate"),
                         {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers}, spark=spark,
                         source_options={"maxOffsetsPerTrigger": "5"})  # fmt: skip
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
    await run_asyncio_to_end(topology(events, asyncio_output, 10_000, 20_000, "aggregate"), f"asyncio-{suffix}",
                             bootstrap_servers, tmp_path / "state")  # fmt: skip
    assert await read_table(bootstrap_servers, asyncio_output, utf8, utf8) == table
    assert "(" in table["a@0-30"], "sessions merged"

    everything = {p: [(k, t, value[p, i, r]) for r, run in enumerate(runs) for i, (k, t) in enumerate(run.get(p, []))]
                  for p in (0, 1)}  # fmt: skip
    expected: dict[str, list[str | None]] = {}
    for p, rows in everything.items():
        step, done = TaskSessions(10_000, 20_000, 30_000, functions("aggregate")), 0
        for ends in batches:
            batch, done = rows[done:ends.get(p, done)], ends.get(p, done)
            for k, s, e, v in step.flushed(step.process([k for k, _, _ in batch], [at(t) for _, t, _ in batch],
                                                        [v for *_, v in batch])):  # fmt: skip
                expected.setdefault(f"{k}@{(s - T0) // 1000}-{(e - T0) // 1000}", []).append(
                    None if v is None else S.deserialize("t", v))
    changelog: dict[str, list[str | None]] = {}
    for x in records:
        assert x.key is not None
        changelog.setdefault(utf8(x.key), []).append(None if x.value is None else utf8(x.value))
    assert changelog == expected


async def test_a_session_reduce_of_json_values_through_a_replaced_repartition_topic(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    """group_by(word length) over two tasks (the replaced topic's partitions), values as JSON lists
    through the repartition serde, reduced per session (sorted: the writers' interleaving is the
    broker's); written with the session windowed serde: the same bytes and table as KafkaStreams."""
    suffix = unique_topic("native-session-reduce")
    lines = f"lines-{suffix}"
    outputs = {engine: f"{engine}-out-{suffix}" for engine in ("spark", "asyncio")}
    for topic in (lines, *outputs.values()):
        await create_topic(bootstrap_servers, topic, partitions=2)
    words = ["a", "bb", "ccc", "dd", "e", "ffff", "ggg", "h"]
    await produce(bootstrap_servers, lines, [
        Rec(f"k{i}".encode(), " ".join(words[i % 8: i % 8 + 3]).encode(), partition=i % 2, timestamp_ms=at(i * 7 % 60))
        for i in range(30)
    ])  # fmt: skip
    windowed, json = WindowedSerdes.session_windowed_serde_from(L), Serdes.Json()

    def build(output: str) -> Topology:
        builder = StreamsBuilder()
        (builder.stream(lines, key_serde=S, value_serde=S).flat_map_values(str.split)
         .map_values(lambda word: [word])
         .group_by(lambda key, word: len(word[0]), Grouped.with_(L, json))
         .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5_000, 3_600_000))
         .reduce(_merged, Materialized.with_(value_serde=json))
         .to_stream().to(output, Produced.with_(windowed, json)))
        return builder.build()

    (query,) = SparkRunner(build(outputs["spark"]), CONFIG).plan().queries
    assert query.native is not None and query.native.kind == "session-aggregate" and query.native.bypassed_topic
    runner = SparkRunner(build(outputs["spark"]), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark, source_options={"maxOffsetsPerTrigger": "8"})  # fmt: skip
    runner.run("available_now", tmp_path / "checkpoints")
    await run_asyncio_to_end(build(outputs["asyncio"]), f"asyncio-{suffix}", bootstrap_servers, tmp_path / "state")
    tables = {engine: await read_table(bootstrap_servers, topic, bytes.hex, utf8) for engine, topic in outputs.items()}
    assert tables["spark"] == tables["asyncio"]
    assert len(tables["spark"]) >= 4 and any(v.count(",") >= 2 for v in tables["spark"].values())


def _merged(one: list[str], two: list[str]) -> list[str]:
    return sorted(one + two)
