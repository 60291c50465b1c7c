"""Every native stateful stage on Spark killed with SIGKILL mid-run, then rerun from its checkpoint.

Each job runs in a process of its own (tests/spark/killed_run.py starts it and kills its process
group once its output topic holds a record); no test here uses the session's SparkSession, so the
file is in SPARK_OWN_PROCESSES (tests/conftest.py): under xdist it runs beside the Spark group.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from streams_core import Serdes
from streams_core.spark.spark_rows import kafka_order
from streams_core.spark.stream_join_arrays import ready_order
from streams_core.spark.subtopology_executor import InputRow
from streams_core.spark.task_sessions import TaskSessions
from streams_core.spark.task_windows import TaskWindows
from streams_core.testing.topology_test_driver import TopologyTestDriver
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark import killed_run
from tests.spark import test_fk_join as fk
from tests.spark import test_versioned_table as versioned
from tests.spark.engines import BASE_TS, long_be, read_table, run_asyncio_to_end, utf8
from tests.spark.test_native_join_count import _click_records, _clicks, _expected, _user_records, _users, per_region
from tests.spark.test_native_session_aggregate import S, functions
from tests.spark.test_native_session_count import _table, at
from tests.spark.test_native_stream_join import _sides, joined
from tests.spark.test_native_window_aggregate import S as WS
from tests.spark.test_native_window_aggregate import functions as window_functions


@pytest.mark.slow
async def test_a_sum_killed_mid_run_and_rerun_ends_with_the_right_totals(bootstrap_servers: str, tmp_path: Path) -> None:
    """SIGKILL once part of the output is written, then a rerun from the checkpoint: Spark's state
    and offsets move together, and a replayed micro-batch writes the same totals again."""
    suffix = unique_topic("combine-kill")
    source, output = f"values-{suffix}", f"sums-{suffix}"
    for topic in (source, output):
        await create_topic(bootstrap_servers, topic, partitions=2)
    pairs = [(f"{chr(97 + i % 7)}{i}", (i * 37) % 101 - 50) for i in range(600)]
    await produce(bootstrap_servers, source, [Rec(k.encode(), v.to_bytes(8, "big", signed=True)) for k, v in pairs])
    job = killed_run.command("combine", bootstrap_servers, tmp_path / "ck", output, source)
    await killed_run.kill_once_written(job, bootstrap_servers, output)
    expected: dict[str, int] = {}
    for key, value in pairs:
        expected[key[0]] = expected.get(key[0], 0) + value
    assert await read_table(bootstrap_servers, output, utf8, long_be) != expected, "killed mid-run"
    await killed_run.run_to_end(job)
    assert await read_table(bootstrap_servers, output, utf8, long_be) == expected


@pytest.mark.slow
async def test_a_join_count_killed_mid_run_and_rerun_ends_with_kafka_streams_table(bootstrap_servers: str,
                                                                                  tmp_path: Path) -> None:  # fmt: skip
    """SIGKILL once part of the counts is written, then a rerun from the checkpoint (a new process:
    each task's table restored from its changelog in Spark state, held clicks included): the final
    table is KafkaStreams' on the same input."""
    suffix = unique_topic("joinkill")
    users, clicks, on_spark, on_asyncio = (f"{name}-{suffix}" for name in ("users", "clicks", "spark", "asyncio"))
    for topic in (users, clicks, on_spark, on_asyncio):
        await create_topic(bootstrap_servers, topic, partitions=2)
    all_clicks = _clicks(0, 240)
    await produce(bootstrap_servers, users, _user_records(_users(0)))
    await produce(bootstrap_servers, clicks, _click_records(all_clicks))
    job = killed_run.command("join-count", bootstrap_servers, tmp_path / "ck", on_spark, users, clicks)
    await killed_run.kill_once_written(job, bootstrap_servers, on_spark)
    expected = _expected(_users(0), [(user, ts) for user, ts in all_clicks if ts % 13 != 0], sum_pages=False)
    assert await read_table(bootstrap_servers, on_spark, utf8, long_be) != expected, "killed mid-run"
    await killed_run.run_to_end(job)
    await run_asyncio_to_end(per_region(users, clicks, on_asyncio, "count"), f"asyncio-{suffix}", bootstrap_servers,
                             tmp_path / "state", config={"max.task.idle.ms": 2_000})  # fmt: skip
    assert await read_table(bootstrap_servers, on_spark, utf8, long_be) == expected
    assert await read_table(bootstrap_servers, on_asyncio, utf8, long_be) == expected


async def test_a_session_count_killed_mid_run_and_rerun_ends_with_kafka_streams_table(bootstrap_servers: str,
                                                                                     tmp_path: Path) -> None:  # fmt: skip
    """SIGKILL once part of the output is written, then a rerun from the checkpoint (a new Python
    worker: the sessions rebuilt from Spark state): the table of the per-task step over all input."""
    suffix = unique_topic("session-kill")
    source, output = f"events-{suffix}", f"out-{suffix}"
    for topic in (source, output):
        await create_topic(bootstrap_servers, topic, partitions=2)
    rnd = random.Random(11)
    rows = {p: [(f"k{rnd.randrange(8)}", i * 4 + rnd.choice([0, 0, 0, -9, -40])) for i in range(90)] for p in (0, 1)}
    await produce(bootstrap_servers, source, [Rec(k.encode(), b"x", partition=p, timestamp_ms=at(t))
                                              for p, part in rows.items() for k, t in part])  # fmt: skip
    job = killed_run.command("sessions", bootstrap_servers, tmp_path / "ck", output, source)
    await killed_run.kill_once_written(job, bootstrap_servers, output)
    expected: dict[str, str] = {}
    for part in rows.values():
        step = TaskSessions(10_000, 20_000, 30_000)
        flushed = step.flushed(step.process([k for k, _ in part], [at(t) for _, t in part]))
        assert step.dropped, "late records"
        expected.update((f"{k}@{s // 1000}-{e // 1000}", str(n)) for k, s, e, n in flushed if n is not None)
    assert await read_table(bootstrap_servers, output, utf8, utf8) != expected, "killed mid-run"
    await killed_run.run_to_end(job)
    assert await read_table(bootstrap_servers, output, utf8, utf8) == expected


def _task_rows(sides: dict[str, list[Rec]], partition: int) -> list[InputRow]:
    """Task `partition`'s input of the `stream-join` job: both topics' records of the partition
    (topics "left" and "right"; offsets: the order produced)."""
    rows: list[InputRow] = []
    for topic in ("left", "right"):
        mine = [r for r in sides[topic] if r.partition == partition]
        rows.extend(InputRow(topic, partition, offset, r.timestamp_ms or 0, r.key, r.value, ())
                    for offset, r in enumerate(mine))  # fmt: skip
    return rows


def _driver_results(tasks: list[list[InputRow]]) -> dict[bytes, list[bytes]]:
    """The `stream-join` job's results per key, in order, by the TopologyTestDriver: one driver per
    task (keys never cross partitions), fed the task's records in the order given."""
    results: dict[bytes, list[bytes]] = {}
    string = Serdes.String()
    for rows in tasks:
        topology = joined("left", "right", "out", killed_run.STREAM_JOIN_WINDOWS, kind="outer_join")
        with TopologyTestDriver(topology, {"application.id": "driver"}) as driver:
            inputs = {t: driver.create_input_topic(t, Serdes.Bytes(), Serdes.Bytes()) for t in ("left", "right")}
            for row in rows:
                inputs[row.topic].pipe_input(row.key, row.value, row.timestamp, row.headers)
            for record in driver.create_output_topic("out", string, string).read_records_to_list():
                results.setdefault(record.key.encode(), []).append(record.value.encode())
    return results


def _committed(checkpoints: Path, topics: dict[str, str], rows: list[InputRow]) -> list[InputRow]:
    """The records of one task (`rows`, all its input) that the micro-batches committed in the query's
    checkpoint processed, in order: read up to the last committed batch's end offsets, then what the
    task's `ready_order` takes of them (it holds the rest while a partition has unread records)."""
    import pandas as pd  # type: ignore[import-untyped]  # no stubs in the venv

    (query,) = checkpoints.glob("native-stream-join-*")
    commits = [int(p.name) for p in (query / "commits").glob("[0-9]*")] if (query / "commits").is_dir() else []
    if not commits:
        return []
    ends = json.loads((query / "offsets" / str(max(commits))).read_text().splitlines()[-1])  # Spark's source offsets
    read = [r for r in rows if r.offset < ends.get(topics[r.topic], {}).get(str(r.partition), 0)]
    waits = {(r.topic, r.partition): r.offset for r in rows}  # rows: in offset order per topic
    frame = pd.DataFrame({"topic": [r.topic for r in read], "partition": [r.partition for r in read],
                          "offset": [r.offset for r in read], "timestamp": [r.timestamp for r in read]})  # fmt: skip
    ready, _ = ready_order(frame, {}, waits)
    by_place = {(r.topic, r.offset): r for r in read}
    return [] if ready is None else [by_place[place] for place in zip(ready["topic"], ready["offset"], strict=True)]


async def _written(bootstrap: str, topic: str) -> dict[bytes, list[bytes]]:
    """The topic's values per key, in order (the joined records: neither key nor value None)."""
    per_key: dict[bytes, list[bytes]] = {}
    for record in await read_all(bootstrap, topic):
        assert record.key is not None and record.value is not None
        per_key.setdefault(record.key, []).append(record.value)
    return per_key


@pytest.mark.slow
async def test_an_outer_join_killed_mid_run_and_rerun_writes_the_test_drivers_results_at_least_once(
    bootstrap_servers: str, tmp_path: Path,
) -> None:  # fmt: skip
    """SIGKILL once part of the joined records is written, then a rerun from the checkpoint (a new
    process: both sides' window stores, the unmatched records waiting for their windows to close and
    the held records rebuilt from Spark state). An outer join: matched pairs (an inner join's
    results), and unmatched records of both sides emitted as stream time closes their windows.

    Kafka Streams' at-least-once rule: after a crash the records since the last commit are processed
    again, so results may be written twice, none may be missing. Here the commit is Spark's micro-batch:
    the killed run wrote a prefix of each key's results, all of the committed batches' at least; the
    rerun replays from the first batch not committed (from the state of the last committed one) and
    writes each key's results from exactly there on, once each: repeated are the results of the
    batch in flight that the killed run wrote, nothing else. Every result carries its records' unique
    values, so a repeat is told from a result."""
    suffix = unique_topic("stream-join-kill")
    left, right, output = f"left-{suffix}", f"right-{suffix}", f"joined-{suffix}"
    for topic in (left, right, output):
        await create_topic(bootstrap_servers, topic, partitions=2)
    sides = _sides(0, 60)
    await produce(bootstrap_servers, left, sides["left"])
    await produce(bootstrap_servers, right, sides["right"])
    tasks = [_task_rows(sides, partition) for partition in (0, 1)]
    # All input is there before the run and the task waits for a partition with unread records:
    # the Spark task takes its records in PartitionGroup's order over all of them.
    expected = _driver_results([kafka_order(rows) for rows in tasks])
    values = [value for results in expected.values() for value in results]
    assert len(set(values)) == len(values), "each result is told apart by its value"
    assert {b"+None" in v or b"None+" in v for v in values} == {True, False}, "matched and unmatched results"
    assert any(v.startswith(b"None+") for v in values) and any(b"late" in v for v in values), "both sides, late ones"

    job = killed_run.command("stream-join", bootstrap_servers, tmp_path / "ck", output, left, right)
    await killed_run.kill_once_written(job, bootstrap_servers, output)
    killed = await _written(bootstrap_servers, output)
    assert sum(map(len, killed.values())) < len(values), "killed mid-run"
    for key, results in killed.items():
        assert results == expected[key][: len(results)], f"{key!r}: the killed run wrote a prefix of the results"
    topics = {"left": left, "right": right}
    committed = _driver_results([_committed(tmp_path / "ck", topics, rows) for rows in tasks])

    await killed_run.run_to_end(job)
    after = await _written(bootstrap_servers, output)
    assert after.keys() == expected.keys()
    for key, results in expected.items():
        before = killed.get(key, [])
        assert after[key][: len(before)] == before, "the killed run's records stay the topic's first"
        start = len(committed.get(key, []))
        assert start <= len(before), f"{key!r}: the committed micro-batches' results were all written"
        assert after[key][len(before) :] == results[start:], f"{key!r}: the rerun writes from the first uncommitted batch on"


@pytest.mark.slow
async def test_a_session_aggregate_killed_mid_run_and_rerun_ends_with_the_task_steps_table(bootstrap_servers: str,
                                                                                          tmp_path: Path) -> None:  # fmt: skip
    """SIGKILL once part of the output is written, then a rerun from the checkpoint (a new Python
    worker: the sessions' value bytes read back from Spark state): the table of the per-task step
    over all input."""
    suffix = unique_topic("session-agg-kill")
    source, output = f"events-{suffix}", f"out-{suffix}"
    for topic in (source, output):
        await create_topic(bootstrap_servers, topic, partitions=2)
    rnd = random.Random(12)
    rows = {p: [(f"k{rnd.randrange(8)}", f"{p}.{i};", i * 4 + rnd.choice([0, 0, 0, -9, -40])) for i in range(90)]
            for p in (0, 1)}  # fmt: skip
    await produce(bootstrap_servers, source, [Rec(k.encode(), v.encode(), partition=p, timestamp_ms=at(t))
                                              for p, part in rows.items() for k, v, t in part])  # fmt: skip
    job = killed_run.command("session-aggregate", bootstrap_servers, tmp_path / "ck", output, source)
    await killed_run.kill_once_written(job, bootstrap_servers, output)
    expected: dict[str, str] = {}
    for part in rows.values():
        step = TaskSessions(10_000, 20_000, 30_000, functions("aggregate"))
        flushed = step.flushed(step.process([k for k, _, _ in part], [at(t) for *_, t in part], [v for _, v, _ in part]))
        assert step.dropped, "late records"
        expected.update((f"{k}@{s // 1000}-{e // 1000}", S.deserialize("t", v)) for k, s, e, v in flushed if v is not None)
    assert any("(" in v for v in expected.values()), "merged sessions"
    assert await read_table(bootstrap_servers, output, utf8, utf8) != expected, "killed mid-run"
    await killed_run.run_to_end(job)
    assert await read_table(bootstrap_servers, output, utf8, utf8) == expected


@pytest.mark.slow
async def test_a_window_aggregate_killed_mid_run_and_rerun_ends_with_the_task_steps_table(bootstrap_servers: str,
                                                                                         tmp_path: Path) -> None:  # fmt: skip
    """SIGKILL once part of the output is written, then a rerun from the checkpoint (a new Python
    worker: the hopping windows' value bytes read back from Spark state): the table of the per-task
    step over all input (an aggregate whose result depends on the order of the calls)."""
    suffix = unique_topic("window-agg-kill")
    source, output = f"events-{suffix}", f"out-{suffix}"
    for topic in (source, output):
        await create_topic(bootstrap_servers, topic, partitions=2)
    rnd = random.Random(13)
    # keys of one partition each (as `group_by_key` presumes): windows align, a key's windows in both tasks would collide
    rows = {p: [(f"k{p}{rnd.randrange(8)}", f"{p}.{i};", i * 4 + rnd.choice([0, 0, 0, -9, -40])) for i in range(90)]
            for p in (0, 1)}  # fmt: skip
    await produce(bootstrap_servers, source, [Rec(k.encode(), v.encode(), partition=p, timestamp_ms=at(t))
                                              for p, part in rows.items() for k, v, t in part])  # fmt: skip
    job = killed_run.command("window-aggregate", bootstrap_servers, tmp_path / "ck", output, source)
    await killed_run.kill_once_written(job, bootstrap_servers, output)
    flushes: list[tuple[str, str | None]] = []
    for part in rows.values():
        step = TaskWindows(*killed_run.WINDOW_AGGREGATE, window_functions("aggregate"))
        flushed = step.flushed(step.process([k for k, _, _ in part], [at(t) for *_, t in part], [v for _, v, _ in part]))
        assert step.dropped, "late records"
        flushes.extend((f"{k}@{s // 1000}", None if v is None else WS.deserialize("t", v)) for k, s, _, v in flushed)
    expected = _table(flushes)
    assert any(v.count(";") > 1 for v in expected.values()), "windows of several records"
    assert await read_table(bootstrap_servers, output, utf8, utf8) != expected, "killed mid-run"
    await killed_run.run_to_end(job)
    assert await read_table(bootstrap_servers, output, utf8, utf8) == expected


async def _produce_in_order(bootstrap: str, names: dict[str, str], records: list[tuple[str, str, str | None, int]]) -> None:
    """(topic, key, value, time) records to the topics `names` maps them to, one produce per record: the
    order across topics kept (times from BASE_TS)."""
    for topic, key, value, timestamp in records:
        await produce(bootstrap, names[topic], [
            Rec(key.encode(), None if value is None else value.encode(), timestamp_ms=BASE_TS + timestamp)])  # fmt: skip


@pytest.mark.slow
async def test_a_foreign_key_join_killed_mid_run_and_rerun_ends_with_the_drivers_table(bootstrap_servers: str,
                                                                                      tmp_path: Path) -> None:  # fmt: skip
    """SIGKILL once part of the joined table is written (at most 6 records per micro-batch: mid-way
    through the rounds of the subscription/response cycle), then a rerun from the checkpoints (a new
    process: both sub-topologies' stores, subscriptions included, rebuilt from Spark state; the
    response topic's unread records read on): the final table is the TopologyTestDriver's."""
    suffix = unique_topic("fk-kill")
    names = {"orders": f"orders-{suffix}", "customers": f"customers-{suffix}", "out": f"out-{suffix}"}
    for topic in names.values():
        await create_topic(bootstrap_servers, topic, partitions=2)
    await _produce_in_order(bootstrap_servers, names, fk.INPUT)
    expected = fk.driver_table(fk.topology("left", names["orders"], names["customers"], names["out"]), names)
    assert expected == fk.EXPECTED["left"]
    job = killed_run.command("fk-join", bootstrap_servers, tmp_path / "ck", names["out"], names["orders"], names["customers"])
    await killed_run.kill_once_written(job, bootstrap_servers, names["out"])
    assert await read_table(bootstrap_servers, names["out"], utf8, utf8) != expected, "killed mid-run"
    await killed_run.run_to_end(job)
    assert await read_table(bootstrap_servers, names["out"], utf8, utf8) == expected


@pytest.mark.slow
async def test_a_versioned_table_join_killed_mid_run_and_rerun_writes_the_drivers_output_at_least_once(
    bootstrap_servers: str, tmp_path: Path,
) -> None:  # fmt: skip
    """SIGKILL once part of the joined orders is written, then a rerun from the checkpoint (a new
    process: the versioned store and the grace period's buffer rebuilt from Spark state).

    The output is a stream (one partition, each order joined once: its values told apart), so
    Kafka Streams' at-least-once rule is checked as is: the killed run wrote a prefix of the
    driver's output, the rerun replays from the first micro-batch not committed and writes the
    driver's output from that batch's first record on. Repeated may be only the contiguous part
    written by the batch in flight when killed; nothing is missing, nothing else is written."""
    suffix = unique_topic("versioned-kill")
    names = {"prices": f"prices-{suffix}", "orders": f"orders-{suffix}", "out": f"out-{suffix}"}
    for topic in names.values():
        await create_topic(bootstrap_servers, topic, partitions=1)
    await _produce_in_order(bootstrap_servers, names, versioned.INPUT)
    # all input there before the run: the task waits for the topic behind, Kafka Streams' order over all of it
    top = versioned.topology(names["prices"], names["orders"], names["out"], grace_ms=killed_run.VERSIONED_GRACE_MS)
    expected = versioned.driver_output(top, versioned.in_kafka_order(versioned.as_rows(versioned.INPUT, BASE_TS)), names)
    assert len(set(expected)) == len(expected) >= 5, "each output record told apart"

    async def written() -> list[tuple[str, str]]:
        return [((r.key or b"").decode(), (r.value or b"").decode()) for r in await read_all(bootstrap_servers, names["out"])]

    job = killed_run.command("versioned-join", bootstrap_servers, tmp_path / "ck", names["out"], names["prices"],
                             names["orders"])  # fmt: skip
    await killed_run.kill_once_written(job, bootstrap_servers, names["out"])
    killed = await written()
    assert 0 < len(killed) < len(expected), "killed mid-run"
    assert killed == expected[: len(killed)], "the killed run wrote a prefix of the driver's output"
    await killed_run.run_to_end(job)
    after = await written()
    assert after[: len(killed)] == killed, "the killed run's records stay the topic's first"
    rerun = after[len(killed) :]
    starts = [start for start in range(len(killed) + 1) if rerun == expected[start:]]
    assert starts, f"the rerun writes the driver's output from a micro-batch's start on: {rerun} after {killed}"
    assert set(after) == set(expected), "nothing missing, nothing else written"
