"""The stream-table join into `group_by(...).count()` compiled to one native query (native_join.py).

Parity with `KafkaStreams` on the same input: clicks joined with a users table whose values change
and are deleted between clicks (each click must meet the table as of its timestamp), the table
topic written after the clicks and read over several micro-batches (`maxOffsetsPerTrigger`: the
clicks wait for it, as the task stage's rule says), in two runs from one checkpoint.
"""

from __future__ import annotations

import asyncio
import operator
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streams_core import Serdes, StreamsBuilder, Topology
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import BASE_TS, long_be, read_table, run_asyncio_to_end, utf8

USERS = 30


def _users(first: int) -> list[tuple[str, str | None, int]]:
    """(user, region or None for a delete, timestamp) of run `first`'s table records."""
    if first == 0:
        return [
            *((f"u{i}", f"r{i % 4}", BASE_TS + i) for i in range(USERS)),
            *((f"u{i}", "moved", BASE_TS + 1_505) for i in range(10)),  # from the 51st click on
            ("u5", None, BASE_TS + 2_005),  # u5's later clicks find no user
        ]
    return [("u30", "late", BASE_TS + 3_005), ("u6", "again", BASE_TS + 3_505)]


def _clicks(first: int, n: int) -> list[tuple[str, int]]:
    """(user, timestamp): every 11th user unknown in the first run (u30 arrives in the second)."""
    return [(f"u{(first + i) % (USERS + 3)}", BASE_TS + 1_000 + (first + i) * 10) for i in range(n)]


def _expected(users: list[tuple[str, str | None, int]], clicks: list[tuple[str, int]], sum_pages: bool) -> dict[str, int]:
    """Clicks (or the sum of their page numbers) per region, each click joined with its user's
    region as of the click's timestamp."""
    events = sorted([(ts, 0, user, region) for user, region, ts in users] + [(ts, 1, user, None) for user, ts in clicks])
    table: dict[str, str] = {}
    counts: Counter[str] = Counter()
    for ts, kind, user, region in events:
        if kind == 0:
            if region is None:
                table.pop(user, None)
            else:
                table[user] = region
        elif user in table:
            counts[table[user]] += _page(ts) if sum_pages else 1
    return dict(counts)


def _page(timestamp: int) -> int:
    return timestamp % 7


def per_region(users: str, clicks: str, output: str, aggregation: str) -> Topology:
    """Clicks joined with their user's region, counted (`aggregation` "count") or their page numbers
    summed ("sum": Spark's own sum after the join) per region."""
    s = Serdes.String()
    builder = StreamsBuilder()
    table = builder.table(users, key_serde=s, value_serde=s)
    joined = (builder.stream(clicks, key_serde=s, value_serde=s)
              .filter(lambda user, page: not page.endswith("/ignored"))
              .join(table, lambda page, region: f"{region}|{page}"))
    if aggregation == "count":
        totals = joined.group_by(lambda user, joined: joined.split("|")[0], key_serde=s, value_serde=s).count()
    else:
        totals = (joined.map(lambda user, joined: (joined.split("|")[0], int(joined.split("/")[2])))
                  .group_by_key(key_serde=s, value_serde=Serdes.Long()).reduce(operator.add))
    totals.to_stream().to(output, key_serde=s, value_serde=Serdes.Long())
    return builder.build()


def _click_records(clicks: list[tuple[str, int]]) -> list[Rec]:
    return [Rec(user.encode(), f"/page/{_page(ts)}{'/ignored' if ts % 13 == 0 else ''}".encode(), timestamp_ms=ts)
            for user, ts in clicks]  # fmt: skip


def _user_records(users: list[tuple[str, str | None, int]]) -> list[Rec]:
    return [Rec(user.encode(), None if region is None else region.encode(), timestamp_ms=ts) for user, region, ts in users]


@pytest.mark.parametrize("aggregation", ["count", "sum"])
async def test_join_then_count_or_sum_per_region_matches_kafka_streams_over_two_runs(
    aggregation: str, bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    suffix = unique_topic(f"join{aggregation}")
    users, clicks = f"users-{suffix}", f"clicks-{suffix}"
    outputs = {engine: f"{engine}-regions-{suffix}" for engine in ("spark", "asyncio")}
    for topic in (users, clicks, *outputs.values()):
        await create_topic(bootstrap_servers, topic, partitions=2)

    def build(engine: str) -> Topology:
        return per_region(users, clicks, outputs[engine], aggregation)

    runner = SparkRunner(build("spark"), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark, source_options={"maxOffsetsPerTrigger": "40"})
    (query,) = runner.plan().queries
    assert query.native is not None and query.native.kind == {"count": "join-count", "sum": "join-spark-reduce"}[aggregation]
    assert "replaces topic" in query.describe(), "no repartition topic round trip"

    all_users: list[tuple[str, str | None, int]] = []
    all_clicks: list[tuple[str, int]] = []
    batches = 0
    for run, (first, n) in enumerate(((0, 200), (200, 80))):
        new_clicks = _clicks(first, n)
        # The clicks first on the broker: the table's older records come in later micro-batches.
        await produce(bootstrap_servers, clicks, _click_records(new_clicks))
        await produce(bootstrap_servers, users, _user_records(_users(first)))
        all_users.extend(_users(first))
        all_clicks.extend((user, ts) for user, ts in new_clicks if ts % 13 != 0)
        await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
        batches += sum(1 for p in runner.progress[query.subtopology_id] if p["numInputRows"])
        await run_asyncio_to_end(build("asyncio"), f"asyncio-{suffix}", bootstrap_servers, tmp_path / "state",
                                 config={"max.task.idle.ms": 2_000})
        expected = _expected(all_users, all_clicks, aggregation == "sum")
        spark_table = await read_table(bootstrap_servers, outputs["spark"], utf8, long_be)
        assert spark_table == await read_table(bootstrap_servers, outputs["asyncio"], utf8, long_be), f"run {run}"
        assert spark_table == expected, f"run {run}"
        # Some click met each changed region (a sum of page numbers may be 0: the pages follow the clock).
        assert "moved" in expected and (run == 0 or "late" in expected), "the table's changes matter"

    assert batches >= 5, "the input came over several micro-batches"
    written = await read_all(bootstrap_servers, outputs["spark"])
    assert len(written) <= batches * len(expected), "at most one record per region and micro-batch"
    assert len(written) < len(all_clicks) / 4


class _ListState:
    def __init__(self) -> None:
        self.entries: list[tuple[Any, ...]] = []
        self.rewrites = 0

    def get(self) -> Any:
        return iter(list(self.entries))

    def appendList(self, entries: list[tuple[Any, ...]]) -> None:  # Spark's name
        self.entries.extend(entries)

    def put(self, entries: list[tuple[Any, ...]]) -> None:
        self.entries, self.rewrites = list(entries), self.rewrites + 1

    def clear(self) -> None:
        self.put([])


class _ValueState:
    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    def get(self) -> tuple[Any, ...] | None:
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value


class _Handle:
    def __init__(self) -> None:
        self.states: dict[str, Any] = {}

    def getListState(self, name: str, *schemas: str) -> _ListState:  # Spark's name
        return self.states.setdefault(name, _ListState())  # type: ignore[no-any-return]

    def getValueState(self, name: str, *schemas: str) -> _ValueState:  # Spark's name
        return self.states.setdefault(name, _ValueState())  # type: ignore[no-any-return]


@pytest.mark.parametrize("compact_slack", [1_000, 0])
def test_a_task_restored_from_spark_state_joins_as_the_live_task_and_holds_for_the_table(
    compact_slack: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without Spark: the per-task step over three micro-batches, its Python worker's live table
    dropped before each (restored from the changelog in Spark state, compacted or not) or kept;
    the clicks wait while the users partition has unread data."""
    import pandas as pd
    import pyarrow as pa

    from streams_core.spark import native_join
    from streams_core.spark.native_count import CountKeys
    from streams_core.spark.native_join import JoinCountTask, _live
    from streams_core.spark.packed_rows import ROW_SCHEMA, PackRows

    monkeypatch.setattr(native_join, "_COMPACT_SLACK", compact_slack)

    s = Serdes.String()
    builder = StreamsBuilder()
    table = builder.table("users", key_serde=s, value_serde=s)
    (builder.stream("clicks", key_serde=s, value_serde=s).left_join(table, lambda page, region: region or "none")
     .group_by(lambda user, region: region, key_serde=s, value_serde=s).count()
     .to_stream().to("out", key_serde=s, value_serde=Serdes.Long()))
    runner = SparkRunner(builder.build(), {"application.id": "restore", "bootstrap.servers": "127.0.0.1:9"})
    (query,) = runner.plan().queries
    assert query.native is not None

    def frame(topic: str, rows: list[tuple[int, int, str, str | None]]) -> Any:
        """The rows as the task gets them: packed by `PackRows` before Spark's shuffle."""
        raw = pd.DataFrame({"topic": topic, "partition": 0, "offset": [r[0] for r in rows], "timestamp": [r[1] for r in rows],
                            "key": [r[2].encode() for r in rows], "value": [None if r[3] is None else r[3].encode() for r in rows]})  # fmt: skip
        (packed,) = PackRows()(iter([pa.RecordBatch.from_pandas(raw, ROW_SCHEMA, preserve_index=False)]))
        return packed.to_pandas()

    batches = [  # users' last offset is 2: the clicks of the first batch wait for it
        [frame("clicks", [(0, 100, "a", "/1"), (1, 300, "b", "/2")]), frame("users", [(0, 50, "a", "north")])],
        [frame("users", [(1, 200, "b", "south"), (2, 250, "a", None)]), frame("clicks", [(2, 400, "a", "/3")])],
        [frame("clicks", [(3, 500, "b", "/4"), (4, 600, "c", "/5")])],
    ]
    expected = [{}, {"north": 1, "south": 1, "none": 1}, {"south": 1, "none": 1}]

    handles: list[_Handle] = []

    def run(keep_live: bool) -> list[dict[str, int]]:
        task = JoinCountTask(CountKeys(query.spec.topology, query.spec.props, query.native), {("users", 0): 2})
        handles.append(_Handle())
        task.init(handles[-1])  # type: ignore[arg-type]  # the fake has the calls the task makes
        outputs = []
        for frames in batches:
            if not keep_live:
                _live.clear()
            out = list(task.handleInputRows((0,), iter(frames), None))
            outputs.append({} if not out else dict(zip(out[0]["key"], out[0]["n"], strict=True)))
        return outputs

    assert run(keep_live=True) == expected
    assert run(keep_live=False) == expected
    changelog = handles[-1].states["table"]
    # u"a" deleted, u"b" kept: compacted (rewritten once the 3 changes pass twice the 1 live entry) or appended
    assert changelog.entries == ([(b"b", b"south")] if compact_slack == 0 else [(b"a", b"north"), (b"b", b"south"), (b"a", None)])
    assert changelog.rewrites == (1 if compact_slack == 0 else 0)
