"""The session count as one vectorized query (native_session_count.py), against Kafka Streams.

The per-task step alone (no Spark) against the TopologyTestDriver record by record; on Spark,
against `KafkaStreams` on the same input (final tables) and, for the changelog, against the
per-task step replayed over Spark's own micro-batches (one record per changed session and
micro-batch, a merged-away session's tombstone in Kafka Streams' order), over two runs from one
checkpoint.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from streams_core import (
    EmitStrategy,
    Grouped,
    Materialized,
    Produced,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
    WindowedSerdes,
)
from streams_core.spark import SparkRunner
from streams_core.spark.task_sessions import TaskSessions
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import BASE_TS, read_table, run_asyncio_to_end, utf8

S, L = Serdes.String(), Serdes.Long()
T0 = (BASE_TS // 1000) * 1000
CONFIG = {"application.id": "plan", "bootstrap.servers": "127.0.0.1:9"}


def at(seconds: int) -> int:
    return T0 + seconds * 1000


def sessions_topology(source: str, output: str, gap: int, grace: int, *, caching: bool = True, unit: int = 1000,
                      origin: int = T0) -> Topology:  # fmt: skip
    """Per key of the source, its sessions counted, written as "key@start-end" (`unit`s from `origin`) -> count."""
    builder = StreamsBuilder()
    materialized = None if caching else Materialized.as_("sessions").with_caching_disabled()
    (builder.stream(source, key_serde=S, value_serde=S).group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap, grace)).count(materialized)
     .to_stream().map(lambda wk, n: (f"{wk.key}@{(wk.window.start - origin) // unit}-{(wk.window.end - origin) // unit}",
                                     None if n is None else str(n)))
     .to(output, key_serde=S, value_serde=S))  # fmt: skip
    return builder.build()


def test_the_task_step_is_kafka_streams_session_aggregation() -> None:
    """Random keys and timestamps out of order (late records beyond grace among them): record by
    record the per-task step forwards what the TopologyTestDriver forwards (a session store without
    cache: Kafka Streams' retention of gap + grace); over batches, the same final table with at most
    one record per session and batch."""
    mismatches = []
    for seed in range(80):
        rnd = random.Random(seed)
        gap, grace = rnd.choice([(10, 0), (10, 5), (10, 30), (5, 100)])
        records, now = [], 0
        for _ in range(rnd.randint(1, 40)):
            now += rnd.randint(0, 8)
            records.append((rnd.choice("ab"), T0 + max(0, now - rnd.choice([0, 0, 0, 3, 12, 25, 60]))))
        with TopologyTestDriver(sessions_topology("in", "out", gap, grace, caching=False, unit=1), {"application.id": "o"}) as driver:
            source = driver.create_input_topic("in", S, S)
            for key, ts in records:
                source.pipe_input(key, "x", ts)
            wanted = [(kv.key, kv.value) for kv in driver.create_output_topic("out", S, S).read_key_values_to_list()]
        # Without a cache, a session merged into one with the same window is deleted, then written.
        wanted = [r for i, r in enumerate(wanted) if not (r[1] is None and i + 1 < len(wanted) and wanted[i + 1][0] == r[0])]
        for per in (1, 3, 100):
            step, out = TaskSessions(gap, grace, gap + grace), []
            for i in range(0, len(records), per):
                batch = records[i:i + per]
                flushed = step.flushed(step.process([k for k, _ in batch], [t for _, t in batch]))
                assert len({(k, s, e) for k, s, e, _ in flushed}) == len(flushed), "one record per session and batch"
                out.extend((f"{k}@{s - T0}-{e - T0}", None if n is None else str(n)) for k, s, e, n in flushed)
            if (out if per == 1 else _table(out)) != (wanted if per == 1 else _table(wanted)):
                mismatches.append((seed, per))
    assert not mismatches


def _offsets(offsets: Any) -> Any:
    return json.loads(offsets) if isinstance(offsets, str) else offsets


def _table(records: list[tuple[str, str | None]]) -> dict[str, str]:
    table: dict[str, str] = {}
    for key, value in records:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table


class _State:
    """A list or value state of the fake handle: what Spark keeps between micro-batches."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def get(self) -> Any:
        return iter(list(self.rows)) if isinstance(self.rows, list) else self.rows

    def appendList(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows.extend(rows)

    def put(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = list(rows)

    def clear(self) -> None:
        self.rows = []


class _Value(_State):
    def get(self) -> Any:
        return self.rows[0] if self.rows else None

    def update(self, row: tuple[Any, ...]) -> None:
        self.rows = [row]


class _Flushed:
    """SessionTask's output without a tail: the flushed sessions themselves."""

    @staticmethod
    def inputs() -> Any:
        from streams_core.spark.native_session_count import SessionInputs
        from streams_core.spark.task_sessions import COUNT

        return SessionInputs(COUNT)

    @staticmethod
    def written(flushed: list[tuple[Any, int, int, int | None]]) -> Any:
        import pandas as pd

        return pd.DataFrame(flushed, columns=["key", "start", "end", "n"], dtype=object)


class _Handle:
    def __init__(self, states: dict[str, _State]) -> None:
        self.states = states

    def getListState(self, name: str, schema: str) -> _State:
        return self.states[name]

    getValueState = getListState


def test_a_task_rebuilt_from_its_spark_state_continues_as_the_live_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-task processor over batches, its Python copy kept (live) or dropped before every batch
    (rebuilt from the changelog chunks in state, compacted on the way): the same flushes."""
    import pandas as pd

    from streams_core.spark import native_session_count
    from streams_core.spark.native_session_count import SessionAggregation, SessionTask

    monkeypatch.setattr(native_session_count, "_COMPACT_SLACK", 0)
    rnd = random.Random(7)
    rows = [(f"k{rnd.randrange(30)}", T0 + i * 3 + rnd.choice([0, 0, -25, -90])) for i in range(600)]
    outputs = []
    for rebuilt in (False, True):
        task = SessionTask(SessionAggregation(gap=20, grace=30, retention=50, to_stream="", tail=(), sinks=(), topics=()),
                           "string", _Flushed())  # type: ignore[arg-type]  # a stand-in
        states: dict[str, _State] = {"sessions": _State(), "task": _Value()}
        task.init(_Handle(states))
        out = []
        for i in range(0, len(rows), 40):
            if rebuilt:
                native_session_count._live.clear()
            batch = rows[i:i + 40]
            frame = pd.DataFrame({"task": 0, "key": [k for k, _ in batch], "ts": [t for _, t in batch],
                                  "part": 0, "seq": range(i, i + len(batch))})  # fmt: skip
            for flushed in task.handleInputRows((0,), iter([frame]), None):
                out.extend(zip(flushed["key"], flushed["start"], flushed["end"], flushed["n"], strict=True))
        outputs.append(out)
        assert len(states["sessions"].rows) < 15, "the changelog was compacted"
    assert outputs[0] == outputs[1]
    assert any(n is None for *_, n in outputs[0]), "merges wrote tombstones"


def test_plan_names_the_stage_and_why_not() -> None:
    (query,) = SparkRunner(sessions_topology("in", "out", 10_000, 0), CONFIG).plan().queries
    assert query.stage == "native" and query.native is not None and query.native.kind == "session-count"
    assert "transformWithStateInPandas (sessions per key by the task's stream time, then the tail)" in query.describe()
    how = dict(query.operators())
    assert [name for name, text in how.items() if text.startswith("vectorized: per task (source partitions)")] == [
        n for n in how if "AGGREGATE" in n]
    (query,) = SparkRunner(sessions_topology("in", "out", 10_000, 0, caching=False), CONFIG).plan().queries
    assert query.native is None and query.stage == "task" and "not native: caching is off" in query.describe()
    builder = StreamsBuilder()
    (builder.stream("in", key_serde=S, value_serde=S).group_by_key().windowed_by(SessionWindows.with_inactivity_gap(10))
     .emit_strategy(EmitStrategy.on_window_close()).count().to_stream().to("out"))  # fmt: skip
    (query,) = SparkRunner(builder.build(), CONFIG).plan().queries
    assert query.stage == "task" and "not native: it emits on window close" in query.describe()


async def test_sessions_merge_and_late_records_drop_per_task_over_micro_batches_and_two_runs(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    """Two tasks (source partitions), five records per micro-batch, two runs from one checkpoint:
    merges across micro-batches and runs (the old sessions' tombstones), late records beyond grace
    dropped. The table equals KafkaStreams'; the changelog is the per-task step's over Spark's
    micro-batches."""
    suffix = unique_topic("native-session")
    events, output, asyncio_output = f"events-{suffix}", f"out-{suffix}", f"asyncio-out-{suffix}"
    for topic in (events, output, asyncio_output):
        await create_topic(bootstrap_servers, topic, partitions=2)
    runs = [
        {0: [("a", 0), ("a", 5), ("b", 3), ("a", 30), ("a", 12), ("a", 21), ("b", 50), ("a", 100), ("b", 2)],
         1: [("c", 1), ("c", 8), ("c", 40), ("c", 25), ("c", 33), ("c", 90), ("c", 45)]},
        {0: [("a", 35), ("a", 95), ("a", 108), ("b", 52), ("b", 104)], 1: [("c", 85), ("c", 99), ("c", 60)]},
    ]  # fmt: skip
    runner = SparkRunner(sessions_topology(events, output, 10_000, 20_000),
                         {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers}, spark=spark,
                         source_options={"maxOffsetsPerTrigger": "5"})  # fmt: skip
    batches: list[dict[int, int]] = []
    for run in runs:
        await produce(bootstrap_servers, events, [Rec(k.encode(), b"x", partition=p, timestamp_ms=at(t))
                                                  for p, rows in run.items() for k, t in rows])  # fmt: skip
        runner.run("available_now", tmp_path / "checkpoints")
        batches.extend({int(p): o for p, o in _offsets(r["sources"][0]["endOffset"])[events].items()}
                       for r in runner.progress[0] if r["numInputRows"])  # fmt: skip
    assert len(batches) >= 5, "several micro-batches per run"
    records = await read_all(bootstrap_servers, output)
    table = {utf8(r.key): None if r.value is None else utf8(r.value) for r in records if r.key is not None}
    table = {k: v for k, v in table.items() if v is not None}
    assert table == {"a@0-30": "5", "a@95-108": "3", "b@3-3": "1", "b@50-50": "1", "b@104-104": "1",
                     "c@1-8": "2", "c@25-40": "3", "c@85-99": "3"}  # fmt: skip

    await run_asyncio_to_end(sessions_topology(events, asyncio_output, 10_000, 20_000), f"asyncio-{suffix}",
                             bootstrap_servers, tmp_path / "state")  # fmt: skip
    assert await read_table(bootstrap_servers, asyncio_output, utf8, utf8) == table

    everything = {p: [r for run in runs for r in run.get(p, [])] for p in (0, 1)}
    expected: dict[str, list[str | None]] = {}
    for p, rows in everything.items():
        step, done = TaskSessions(10_000, 20_000, 30_000), 0
        for ends in batches:
            batch, done = rows[done:ends.get(p, done)], ends.get(p, done)
            for k, s, e, n in step.flushed(step.process([k for k, _ in batch], [at(t) for _, t in batch])):
                expected.setdefault(f"{k}@{(s - T0) // 1000}-{(e - T0) // 1000}", []).append(None if n is None else str(n))
    changelog: dict[str, list[str | None]] = {}
    for r in records:
        assert r.key is not None
        changelog.setdefault(utf8(r.key), []).append(None if r.value is None else utf8(r.value))
    assert changelog == expected
    assert changelog["a@100-100"] == ["1", None], "a session merged in a later run: its tombstone"


async def test_long_keys_through_a_replaced_repartition_topic_with_the_session_windowed_serde(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    """group_by(word length) over two tasks (the replaced topic's partitions), written with the
    session windowed serde: the same bytes and table as KafkaStreams."""
    suffix = unique_topic("native-session-long")
    lines = f"lines-{suffix}"
    outputs = {engine: f"{engine}-out-{suffix}" for engine in ("spark", "asyncio")}
    for topic in (lines, *outputs.values()):
        await create_topic(bootstrap_servers, topic, partitions=2)
    words = ["a", "bb", "ccc", "dd", "e", "ffff", "ggg", "h"]
    await produce(bootstrap_servers, lines, [
        Rec(f"k{i}".encode(), " ".join(words[i % 8: i % 8 + 3]).encode(), partition=i % 2, timestamp_ms=at(i * 7 % 60))
        for i in range(30)
    ])  # fmt: skip
    windowed = WindowedSerdes.session_windowed_serde_from(L)

    def build(output: str) -> Topology:
        builder = StreamsBuilder()
        (builder.stream(lines, key_serde=S, value_serde=S).flat_map_values(str.split)
         .group_by(lambda key, word: len(word), Grouped.with_(L, S))
         .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5_000, 3_600_000)).count()
         .to_stream().to(output, Produced.with_(windowed, L)))
        return builder.build()

    (query,) = SparkRunner(build(outputs["spark"]), CONFIG).plan().queries
    assert query.native is not None and query.native.bypassed_topic is not None
    runner = SparkRunner(build(outputs["spark"]), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark, source_options={"maxOffsetsPerTrigger": "8"})  # fmt: skip
    runner.run("available_now", tmp_path / "checkpoints")
    await run_asyncio_to_end(build(outputs["asyncio"]), f"asyncio-{suffix}", bootstrap_servers, tmp_path / "state")
    tables = {engine: await read_table(bootstrap_servers, topic, bytes.hex, bytes.hex) for engine, topic in outputs.items()}
    assert tables["spark"] == tables["asyncio"]
    assert len(tables["spark"]) >= 4
