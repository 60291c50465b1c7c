"""The windowed count compiled to Spark's own aggregation, against KafkaStreams on the same input.

Late records are dropped by each Kafka Streams task's stream time, record by record: the native
query keeps that rule (the running largest timestamp per task within a micro-batch, the task's
stream time in Spark state between micro-batches), not Spark's global watermark. Inputs are split
over several micro-batches (`maxOffsetsPerTrigger`) so that both halves of the rule are used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streams_core import Grouped, Produced, Serdes, StreamsBuilder, TimeWindows, Topology, WindowedSerdes
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, unique_topic
from tests.spark.engines import BASE_TS, ENGINES, read_table, run_asyncio_to_end, run_both_engines

W0 = (BASE_TS // 10_000) * 10_000
SMALL_BATCHES = {"maxOffsetsPerTrigger": "4"}
S = Serdes.String()


def at(seconds: float) -> int:
    return W0 + int(seconds * 1000)


def native_query(topology: Topology) -> Any:
    (query,) = SparkRunner(topology, {"application.id": "plan", "bootstrap.servers": "127.0.0.1:9"}).plan().queries
    assert query.stage == "native" and query.native is not None and query.native.window is not None
    assert all(how.startswith("native") for name, how in query.operators() if "AGGREGATE" in name or "TOSTREAM" in name)
    return query


async def test_late_records_are_dropped_by_each_tasks_stream_time(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    """group_by_key: the tasks are the source partitions; partition 1 lags 18 s behind partition 0."""
    suffix = unique_topic("native-window")
    events = f"events-{suffix}"
    outputs = {engine: (f"{engine}-windows-{suffix}",) for engine in ENGINES}
    for topic in (events, *outputs["spark"], *outputs["asyncio"]):
        await create_topic(bootstrap_servers, topic, partitions=2)
    await produce(bootstrap_servers, events, [
        *(Rec(b"a", str(t).encode(), partition=0, timestamp_ms=at(t)) for t in (0, 1, 30, 24, 2, 26)),
        *(Rec(b"b", str(t).encode(), partition=1, timestamp_ms=at(t)) for t in (1, 3, 11, 12, 2, 20, 4)),
    ])

    def build(engine: str) -> Topology:
        builder = StreamsBuilder()
        (builder.stream(events, key_serde=S, value_serde=S).group_by_key()
         .windowed_by(TimeWindows.of_size_and_grace(10_000, 5_000)).count()
         .to_stream().map(lambda wk, n: (f"{wk.key}@{(wk.window.start - W0) // 1000}", str(n)))
         .to(outputs[engine][0], key_serde=S, value_serde=S))
        return builder.build()

    assert native_query(build("spark")).native.window.partitions_of is None
    tables, runner = await run_both_engines(build, bootstrap_servers, spark, tmp_path, suffix, outputs, SMALL_BATCHES)
    assert len([p for p in runner.progress[0] if p["numInputRows"]]) >= 3, "several micro-batches"
    assert tables["spark"] == tables["asyncio"]
    assert tables["spark"][0] == {
        "a@0": "2",   # 0 s, 1 s; the record at 2 s came after stream time 30 s: window [0, 10) closed at 15 s
        "a@20": "2", "a@30": "1",
        "b@0": "3",   # 1 s, 3 s and 2 s: partition 1's stream time was 12 s (a global watermark: 30 s)
        "b@10": "2", "b@20": "1",  # the record at 4 s came after 20 s: dropped
    }


async def test_hopping_windows_through_a_replaced_repartition_topic_drop_the_same_records(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    """group_by(selector): the tasks are the repartition topic's partitions (one here, so both
    engines see one order); hopping windows, late records within and across micro-batches."""
    suffix = unique_topic("native-window-hop")
    lines = f"lines-{suffix}"
    outputs = {engine: (f"{engine}-hop-{suffix}",) for engine in ENGINES}
    for topic in (lines, *outputs["spark"], *outputs["asyncio"]):
        await create_topic(bootstrap_servers, topic, partitions=1)
    seconds = [0, 4, 9, 13, 3, 21, 8, 14, 40, 26, 33, 39, 12, 41]
    await produce(bootstrap_servers, lines, [
        Rec(f"k{i}".encode(), f"w{i % 3} w{i % 2}".encode(), partition=0, timestamp_ms=at(t)) for i, t in enumerate(seconds)
    ])

    def build(engine: str) -> Topology:
        builder = StreamsBuilder()
        (builder.stream(lines, key_serde=S, value_serde=S).flat_map_values(str.split)
         .group_by(lambda key, word: word, Grouped.with_(S, S))
         .windowed_by(TimeWindows.of_size_and_grace(10_000, 4_000).advance_by(5_000)).count()
         .to_stream().filter(lambda wk, n: wk.key != "w2")
         .map(lambda wk, n: (f"{wk.key}@{(wk.window.start - W0) // 1000}", str(n)))
         .to(outputs[engine][0], key_serde=S, value_serde=S))
        return builder.build()

    assert native_query(build("spark")).native.window.partitions_of is not None
    tables, runner = await run_both_engines(build, bootstrap_servers, spark, tmp_path, suffix, outputs, SMALL_BATCHES)
    assert len([p for p in runner.progress[0] if p["numInputRows"]]) >= 3, "several micro-batches"
    assert tables["spark"] == tables["asyncio"]
    expected, dropped = one_task_hopping_counts([(f"w{i % 3} w{i % 2}".split(), at(t)) for i, t in enumerate(seconds)])
    assert dropped >= 3, "the input has late records"
    assert tables["spark"][0] == {f"{w}@{(start - W0) // 1000}": str(n) for (w, start), n in expected.items() if w != "w2"}


def one_task_hopping_counts(records: list[tuple[list[str], int]]) -> tuple[dict[tuple[str, int], int], int]:
    """Kafka Streams' rule for one task, size 10 s, advance 5 s, grace 4 s: counts per (word, start), drops."""
    counts: dict[tuple[str, int], int] = {}
    stream_time, dropped = -1, 0
    for words, ts in records:
        for word in words:
            stream_time = max(stream_time, ts)
            for start in range(max(0, ts - 10_000 + 5_000) // 5_000 * 5_000, ts + 1, 5_000):
                if start + 10_000 <= stream_time - 4_000:
                    dropped += 1
                else:
                    counts[(word, start)] = counts.get((word, start), 0) + 1
    return counts, dropped


async def test_other_key_serdes_and_a_windowed_serde_over_two_tasks(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    """Long keys (their serde's bytes, murmur2 over the replaced topic's two partitions) written
    with the time-windowed serde, no record late; the same table on both engines."""
    suffix = unique_topic("native-window-long")
    lines = f"lines-{suffix}"
    outputs = {engine: f"{engine}-long-{suffix}" for engine in ENGINES}
    for topic in (lines, *outputs.values()):
        await create_topic(bootstrap_servers, topic, partitions=2)
    words = ["a", "bb", "ccc", "dd", "e", "ffff", "ggg", "h"]
    await produce(bootstrap_servers, lines, [
        Rec(f"k{i}".encode(), " ".join(words[i % 8: i % 8 + 3]).encode(), partition=i % 2, timestamp_ms=at(i * 7))
        for i in range(24)
    ])
    windowed = WindowedSerdes.time_windowed_serde_from(Serdes.Long(), 60_000)

    def build(output: str) -> Topology:
        builder = StreamsBuilder()
        (builder.stream(lines, key_serde=S, value_serde=S).flat_map_values(str.split)
         .group_by(lambda key, word: len(word), Grouped.with_(Serdes.Long(), S))
         .windowed_by(TimeWindows.of_size_and_grace(60_000, 3_600_000)).count()
         .to_stream().to(output, Produced.with_(windowed, Serdes.Long())))
        return builder.build()

    native_query(build(outputs["spark"]))
    runner = SparkRunner(build(outputs["spark"]), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark, source_options={"maxOffsetsPerTrigger": "5"})
    runner.run("available_now", tmp_path / "checkpoints")
    await run_asyncio_to_end(build(outputs["asyncio"]), f"asyncio-{suffix}", bootstrap_servers, tmp_path / "state")

    def decode_key(data: bytes) -> tuple[int, int]:
        wk = windowed.deserialize(None, data)
        assert wk is not None
        return wk.key, (wk.window.start - W0) // 1000

    tables = {engine: await read_table(bootstrap_servers, topic, decode_key, lambda v: int.from_bytes(v, "big"))
              for engine, topic in outputs.items()}  # fmt: skip
    assert tables["spark"] == tables["asyncio"]
    expected: dict[tuple[int, int], int] = {}
    for i in range(24):
        for word in words[i % 8: i % 8 + 3]:
            key = (len(word), (at(i * 7) // 60_000 * 60_000 - W0) // 1000)
            expected[key] = expected.get(key, 0) + 1
    assert tables["spark"] == expected


async def test_a_tasks_stream_time_survives_a_restart_from_the_checkpoint(bootstrap_servers: str, spark: Any,
                                                                          tmp_path: Path) -> None:  # fmt: skip
    """A second `available_now` run from the same checkpoint drops a record late for the stream
    time the first run left in Spark state, and keeps counting the open windows."""
    suffix = unique_topic("native-window-rerun")
    events, output = f"events-{suffix}", f"out-{suffix}"
    for topic in (events, output):
        await create_topic(bootstrap_servers, topic, partitions=1)
    builder = StreamsBuilder()
    (builder.stream(events, key_serde=S, value_serde=S).group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(10_000, 5_000)).count()
     .to_stream().map(lambda wk, n: (f"{wk.key}@{(wk.window.start - W0) // 1000}", str(n)))
     .to(output, key_serde=S, value_serde=S))
    runner = SparkRunner(builder.build(), {"application.id": f"rerun-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark)  # fmt: skip
    native_query(runner.topology)
    await produce(bootstrap_servers, events, [Rec(b"a", b"x", partition=0, timestamp_ms=at(t)) for t in (1, 2, 21)])
    runner.run("available_now", tmp_path / "checkpoints")
    assert await read_table(bootstrap_servers, output, bytes.decode, bytes.decode) == {"a@0": "2", "a@20": "1"}
    # Stream time 21 s closed [0, 10) (end + grace 15 s) and left [10, 20) open (25 s).
    await produce(bootstrap_servers, events, [Rec(b"a", b"x", partition=0, timestamp_ms=at(t)) for t in (3, 12, 22)])
    runner.run("available_now", tmp_path / "checkpoints")
    assert await read_table(bootstrap_servers, output, bytes.decode, bytes.decode) == {
        "a@0": "2", "a@10": "1", "a@20": "2"}


async def test_through_two_tasks_each_task_drops_what_kafka_streams_drops_in_the_named_interleaving(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    """A replaced repartition topic of two partitions, late records: the native query's table is
    what Kafka Streams' own window aggregate (the TopologyTestDriver, one per task) computes when
    each task reads its writers' records merged by their running largest timestamp (docs/spark.md)."""
    import heapq

    from streams_core import TopologyTestDriver
    from streams_core.common.partitioner import default_partition

    suffix = unique_topic("native-window-tasks")
    lines, output = f"lines-{suffix}", f"out-{suffix}"
    for topic in (lines, output):
        await create_topic(bootstrap_servers, topic, partitions=2)
    # Partition 0 runs ahead (to 60 s) early; partition 1 lags, with records late for its own order.
    records = {
        0: [("p q r", 1), ("p s", 30), ("q t", 61), ("p r", 12), ("s t u", 44), ("q", 2)],
        1: [("r s", 3), ("t u p", 8), ("q", 27), ("p u", 5), ("r t", 33), ("s", 9), ("u q", 20)],
    }
    await produce(bootstrap_servers, lines, [Rec(b"k", line.encode(), partition=p, timestamp_ms=at(t))
                                             for p, rows in records.items() for line, t in rows])  # fmt: skip
    windows = TimeWindows.of_size_and_grace(10_000, 6_000)

    def build(source: str, sink: str, by_word: bool) -> Topology:
        builder = StreamsBuilder()
        stream = builder.stream(source, key_serde=S, value_serde=S)
        grouped = stream.flat_map_values(str.split).group_by(lambda k, w: w, Grouped.with_(S, S)) if by_word else stream.group_by_key()
        (grouped.windowed_by(windows).count().to_stream()
         .map(lambda wk, n: (f"{wk.key}@{(wk.window.start - W0) // 1000}", str(n))).to(sink, key_serde=S, value_serde=S))
        return builder.build()

    runner = SparkRunner(build(lines, output, True), {"application.id": f"tasks-{suffix}", "bootstrap.servers": bootstrap_servers},
                         spark=spark)  # fmt: skip
    assert native_query(runner.topology).native.window.partitions_of is not None
    runner.run("available_now", tmp_path / "checkpoints")
    table = await read_table(bootstrap_servers, output, bytes.decode, bytes.decode)

    expected: dict[str, str] = {}
    for task in (0, 1):
        writers = []
        for rows in records.values():
            words = [(w, at(t)) for line, t in rows for w in line.split() if default_partition(w.encode(), 2) == task]
            running = [max(ts for _, ts in words[: i + 1]) for i in range(len(words))]
            writers.append([(m, i, w, ts) for i, ((w, ts), m) in enumerate(zip(words, running, strict=True))])
        with TopologyTestDriver(build("task", "out", False), {"application.id": "oracle"}) as driver:
            source = driver.create_input_topic("task", S, S)
            for _, _, word, ts in heapq.merge(*writers, key=lambda r: r[0]):
                source.pipe_input(word, word, ts)
            expected.update(driver.create_output_topic("out", S, S).read_key_values_to_map())
    assert table == expected
    everything = {f"{w}@{(at(t) - W0) // 10_000 * 10}" for rows in records.values() for line, t in rows for w in line.split()}
    counted = sum(int(n) for n in table.values())
    assert counted < sum(len(line.split()) for rows in records.values() for line, _ in rows), "records were dropped"
    assert set(table) <= everything
