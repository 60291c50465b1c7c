"""Word count throughput: Spark (available_now) against hand-written PySpark and the asyncio runtime.

    flock /tmp/bench.lock .venv/bin/python bench/spark_wordcount.py --words 1000000,10000000 \
        --engines spark,spark-hand --repeat 2                                   (the DSL against hand-written PySpark)
    flock /tmp/bench.lock .venv/bin/python bench/spark_wordcount.py --words 1000000,10000000   (against asyncio)
    flock /tmp/bench.lock .venv/bin/python bench/spark_wordcount.py --words 1000000 \
        --engines spark-windowed-count,spark-hand-windowed --repeat 2           (1-minute windows, both by Spark)
    flock /tmp/bench.lock .venv/bin/python bench/spark_wordcount.py --words 1000000 \
        --engines spark-aggregate,spark-aggregate-keyed                         (reduce/aggregate: vectorized vs keyed stage)
    flock /tmp/bench.lock .venv/bin/python bench/spark_wordcount.py --words 10000000 \
        --engines spark,spark-hand --repeat 2 --master 'local[1]' --spark-cpus 1   (one core: the scaling figure)
    flock /tmp/bench.lock .venv/bin/python bench/spark_wordcount.py --words 100000            (a quick run)

One run starts its own local broker (LocalKafkaBroker in a temp dir, stopped at the end even on
error). For each size it fills one 4-partition input topic once with lines of `--words-per-line`
words drawn Zipf-like from `--vocabulary` words (bench/wordcount_guarantees.py's generator), then
runs app/wordcount.py's `build_topology(input, output, windowed=False)` (flat_map_values ->
group_by -> count -> to; one repartition topic, two sub-topologies) on each engine, each with its
own application id and output topic over the same input:

  spark        SparkRunner.run("available_now") on a local[2] session built once per run
               (its start-up is reported apart); timed from run() to its return
  spark-hand   the job a Spark user writes by hand, on the same session: Kafka source ->
               explode(split(value cast string, " ")) -> groupBy(word).count() -> key = word,
               value = unhex(lpad(hex(count), 16, "0")) (our Long serde's bytes) -> Kafka sink,
               update mode, availableNow; timed from start() to the end of awaitTermination()
  spark-windowed  the same with `windowed=True`: the 1-minute windowed count beside the count
               makes the counting sub-topology a task stage (changelog in Spark state) instead
               of a keyed stage (not in the default --engines)
  spark-windowed-count  a 1-minute tumbling window count alone on SparkRunner: flat_map_values ->
               group_by(word) -> windowed_by(1 min, grace 1 h) -> count -> to_stream -> key
               "word@window start" -> to (one native query: docs/spark.md, "The windowed count
               natively")
  spark-hand-windowed  the same by hand on the same session: explode(split(value)) ->
               groupBy(window(timestamp, "1 minute"), word).count() -> key "word@window start",
               value the Long serde's bytes -> Kafka sink, update mode, availableNow
               With a windowed engine the input records get timestamps spread evenly over
               `--window-span-minutes` (record i of n at start + i * span / n, start an hour ago),
               so both windowed outputs are checked against exact counts per word and window. The
               grace period keeps every record: without it, which records are late depends on how
               Spark's tasks interleave their writes to the repartition topic (each Kafka Streams
               task's stream time), which no fixed expectation can follow.
  spark-aggregate  the word count with `aggregate(lambda: 0, lambda word, _, n: n + 1)` (user functions,
               Long serde) instead of `count()` on SparkRunner: the vectorized stage of native_reduce.py
               (mapInArrow -> groupBy(word).applyInPandasWithState, one output per word and micro-batch)
  spark-aggregate-keyed  the same topology planned as before that stage (the keyed stage:
               groupBy(key).transformWithState, Row API, every update written)
  spark-aggregate-tws, spark-aggregate-row  spark-aggregate with its per-key stage on another Spark
               API than applyInPandasWithState: transformWithStateInPandas or transformWithState (Row
               API) (see `fold_api`)
  asyncio-1    one KafkaStreams instance in a process of its own (commit.interval.ms=100)
  asyncio-2    two instances, two processes, one consumer group: the runtime's scale-out
               timed from launching the process(es) until the group has committed every input and
               repartition partition at its end offset (polled every 0.5 s; start-up included)

Every engine's output topic is then read back and checked against the expected counts (not
timed), and its record count reported (with caching on, at most one record per word and
micro-batch). Throughput = input words / seconds. The Spark engines run `--repeat` times per size,
the order alternating between rounds, each run with a fresh checkpoint and output topic; before
the timed runs each Spark engine runs once on `--warmup-words` (a session's first queries pay
JIT and code generation), reported apart. `--master` sets the session's master (local[1] for the
scaling figure); `--standalone-workers 2` starts a standalone master and two 1-core workers on
127.0.0.1 from the pyspark installation and runs there (executors in processes of their own).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import logging
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from wordcount_guarantees import create_topics, fill, make_lines

from app.wordcount import build_topology
from bench.bench_broker import bench_broker

LOAD_AT_START = os.getloadavg()[0]
PARTITIONS = 4


async def _offsets(bootstrap: str, group: str, topics: list[str]) -> tuple[dict[Any, int], dict[Any, int]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await consumer.start()
    await admin.start()
    try:
        tps = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(tps)
        committed = {tp: meta.offset for tp, meta in (await admin.list_consumer_group_offsets(group)).items()}
        return ends, committed
    finally:
        await consumer.stop()
        await admin.close()


async def run_asyncio(bootstrap: str, input_topic: str, instances: int, state_root: Path) -> tuple[float, float, str]:
    """(seconds to the end, seconds to the first commit, output topic) for `instances` worker processes."""
    app_id = f"bench-asyncio{instances}-{uuid.uuid4().hex[:6]}"
    output = f"{app_id}-out"
    await create_topics(bootstrap, [output, f"{app_id}-word-count-repartition"], PARTITIONS)
    started = time.perf_counter()
    workers = [
        subprocess.Popen([sys.executable, __file__, "--asyncio-worker", bootstrap, app_id, input_topic, output,
                          str(state_root / f"{app_id}-{i}")])
        for i in range(instances)
    ]
    first_commit: float | None = None
    try:
        topics = [input_topic, f"{app_id}-word-count-repartition"]
        stable = 0
        while stable < 2:
            await asyncio.sleep(0.5)
            for worker in workers:
                if worker.poll() is not None:
                    raise RuntimeError(f"asyncio worker exited with {worker.returncode}")
            ends, committed = await _offsets(bootstrap, app_id, topics)
            if first_commit is None and committed:
                first_commit = time.perf_counter() - started
            done = all(committed.get(tp, -1) >= end for tp, end in ends.items() if end > 0)
            stable = stable + 1 if done else 0
        seconds = time.perf_counter() - started
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=60)
    return seconds, first_commit or 0.0, output


def asyncio_worker(bootstrap: str, app_id: str, input_topic: str, output: str, state_dir: str) -> int:
    """One KafkaStreams instance of the word count, until SIGTERM."""
    from streams_core import KafkaStreams

    async def main() -> None:
        streams = KafkaStreams(build_topology(input_topic, output, windowed=False), {
            "application.id": app_id, "bootstrap.servers": bootstrap, "state.dir": state_dir,
            "commit.interval.ms": 100})
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await streams.start()
        await stop.wait()
        await streams.close(timeout=30)

    asyncio.run(main())
    return 0


async def check(bootstrap: str, output: str, expected: Counter[str]) -> int:
    """Raise unless the output's final table is `expected`; the number of records read."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(output, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        table: dict[str, int] = {}
        records = 0

        async def behind() -> bool:
            return any([await consumer.position(tp) < ends[tp] for tp in tps])

        while await behind():
            for batch in (await consumer.getmany(timeout_ms=500, max_records=50_000)).values():
                records += len(batch)
                for r in batch:
                    table[r.key.decode()] = int.from_bytes(r.value, "big", signed=True)
        if table != dict(expected):
            wrong = sum(1 for k, v in expected.items() if table.get(k) != v)
            raise AssertionError(f"{output}: {wrong} of {len(expected)} counts differ from the expected ones")
        return records
    finally:
        await consumer.stop()


def run_spark(spark: Any, bootstrap: str, input_topic: str, checkpoints: Path, build: Any) -> tuple[float, str]:
    """`build(input, output)`'s topology on SparkRunner, available_now, to a new output topic."""
    from streams_core.spark import SparkRunner

    app_id = f"bench-spark-{uuid.uuid4().hex[:6]}"
    output = f"{app_id}-out"
    asyncio.run(create_topics(bootstrap, [output], PARTITIONS))
    runner = SparkRunner(build(input_topic, output), {"application.id": app_id, "bootstrap.servers": bootstrap}, spark=spark)
    started = time.perf_counter()
    runner.run("available_now", checkpoints / app_id)
    return time.perf_counter() - started, output


def run_handwritten(spark: Any, bootstrap: str, input_topic: str, checkpoints: Path) -> tuple[float, str]:
    """The word count as a Spark user writes it by hand, its counts as our Long serde's bytes."""
    from pyspark.sql import functions as F

    def count(lines: Any) -> Any:
        words = lines.select(F.explode(F.split(F.col("value").cast("string"), " ")).alias("word"))
        return words.groupBy("word").count().select(F.col("word").cast("binary").alias("key"), long_bytes("count"))

    return run_hand_query(spark, bootstrap, input_topic, checkpoints, "bench-hand", count)


def long_bytes(column: str) -> Any:
    """The column as our Long serde's 8 big-endian bytes, as a Spark user would write it."""
    from pyspark.sql import functions as F

    return F.unhex(F.lpad(F.hex(column), 16, "0")).alias("value")


def run_hand_query(spark: Any, bootstrap: str, input_topic: str, checkpoints: Path, prefix: str, job: Any) -> tuple[float, str]:
    """`job(kafka rows)` (key and value columns) from the input's start to a new output topic, update
    mode, availableNow; timed from building the query to the end of awaitTermination()."""
    app_id = f"{prefix}-{uuid.uuid4().hex[:6]}"
    output = f"{app_id}-out"
    asyncio.run(create_topics(bootstrap, [output], PARTITIONS))
    started = time.perf_counter()
    lines = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", input_topic).option("startingOffsets", "earliest").load())
    query = (job(lines).writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", output)
             .option("checkpointLocation", str(checkpoints / app_id)).outputMode("update")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return time.perf_counter() - started, output


WINDOW_MS = 60_000
WINDOWED_ENGINES = ("spark-windowed-count", "spark-hand-windowed")


def windowed_count_topology(input_topic: str, output: str) -> Any:
    """A 1-minute tumbling window count of the words, keyed "word@window start" (Long values)."""
    from streams_core import Grouped, Materialized, Produced, Serdes, StreamsBuilder, TimeWindows

    s = Serdes.String()
    builder = StreamsBuilder()
    (builder.stream(input_topic, key_serde=s, value_serde=s).flat_map_values(lambda line: line.lower().split())
     .group_by(lambda key, word: word, Grouped.with_(s, s))
     .windowed_by(TimeWindows.of_size_and_grace(WINDOW_MS, 3_600_000))
     .count(Materialized.with_(s, Serdes.Long()))
     .to_stream().map(lambda wk, n: (f"{wk.key}@{wk.window.start}", n)).to(output, Produced.with_(s, Serdes.Long())))
    return builder.build()


def run_handwritten_windowed(spark: Any, bootstrap: str, input_topic: str, checkpoints: Path) -> tuple[float, str]:
    """The 1-minute windowed word count by hand: window() + groupBy + count, update mode."""
    from pyspark.sql import functions as F

    def count(lines: Any) -> Any:
        words = lines.select("timestamp", F.explode(F.split(F.col("value").cast("string"), " ")).alias("word"))
        return words.groupBy(F.window("timestamp", "1 minute"), "word").count().select(
            F.concat("word", F.lit("@"), F.unix_millis("window.start").cast("string")).cast("binary").alias("key"),
            long_bytes("count"))

    return run_hand_query(spark, bootstrap, input_topic, checkpoints, "bench-hand-win", count)


def aggregate_count_topology(input_topic: str, output: str) -> Any:
    """The word count with `aggregate(initializer, aggregator)` (user functions) instead of `count()`."""
    from streams_core import Grouped, Materialized, Produced, Serdes, StreamsBuilder

    s = Serdes.String()
    builder = StreamsBuilder()
    (builder.stream(input_topic, key_serde=s, value_serde=s).flat_map_values(lambda line: line.lower().split())
     .group_by(lambda key, word: word, Grouped.with_(s, s))
     .aggregate(lambda: 0, lambda word, _, n: n + 1, Materialized.with_(s, Serdes.Long()))
     .to_stream().to(output, Produced.with_(s, Serdes.Long())))
    return builder.build()


@contextlib.contextmanager
def keyed_folds() -> Any:
    """Plans reduce/aggregate as before the vectorized stage: in the keyed stage (transformWithState, Row API)."""
    from streams_core.spark import spark_plan

    compiled = spark_plan.find_native_count

    def without_folds(*args: Any, **kwargs: Any) -> Any:
        native = compiled(*args, **kwargs)
        return None if native is not None and native.kind in ("ordered-fold", "partial-reduce", "spark-reduce") else native

    spark_plan.find_native_count = without_folds  # type: ignore[assignment]
    try:
        yield
    finally:
        spark_plan.find_native_count = compiled


@contextlib.contextmanager
def fold_api(api: str) -> Any:
    """SparkRunner's vectorized reduce/aggregate query with its per-key stage (`FoldStage.fold`) on
    another Spark API than the library's applyInPandasWithState: "tws" (transformWithStateInPandas,
    a call to the state server per state access) or "row" (transformWithState, Row API)."""
    import pandas as pd
    from pyspark.sql import Row
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    from streams_core.spark.native_reduce import NOTHING, FoldStage, FoldValues
    from streams_core.spark.native_stages import NATIVE_STAGES

    columns = ["key", "partition", "seq", "timestamp", "value"]

    class RowFold(StatefulProcessor):
        def __init__(self, stage: FoldStage) -> None:
            self.stage = stage

        def init(self, handle: Any) -> None:
            self.value = handle.getValueState("value", "value binary")
            self.stage.prepare()

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            stored = self.value.get()
            data, out = self.stage.fold(key[0], pd.DataFrame(list(rows), columns=columns),
                                        None if stored is None else bytes(stored[0]))
            if data is not None:
                self.value.update((data,))
            elif stored is not None:
                self.value.clear()
            if out is not NOTHING:
                yield Row(key=key[0], value=out)

        def close(self) -> None:
            pass

    def query(runner: Any, query: Any, rows: Any) -> Any:
        native, spec = query.native, query.spec
        keys = FoldValues(spec.topology, spec.props, native)
        values = rows.select(*keys.columns(query.source_topics)).mapInArrow(keys, keys.schema).groupBy("key")
        stage = FoldStage(spec.topology, spec.props, native)
        schema = "key string, value binary"
        if api == "row":
            out = values.transformWithState(RowFold(stage), schema, "Update", "None")
        else:
            out = values.transformWithStateInPandas(stage, schema, "Update", "None")
        return out.select(F.lit(native.output_topic).alias("topic"), F.col("key").cast("binary").alias("key"), "value")

    stage = NATIVE_STAGES["ordered-fold"]
    stage.query = query  # type: ignore[method-assign]
    try:
        yield
    finally:
        del stage.query


def spark_run(engine: str, spark: Any, bootstrap: str, input_topic: str, checkpoints: Path) -> tuple[float, str]:
    if engine == "spark-aggregate":
        return run_spark(spark, bootstrap, input_topic, checkpoints, aggregate_count_topology)
    if engine in ("spark-aggregate-tws", "spark-aggregate-row"):
        with fold_api(engine.rsplit("-", 1)[1]):
            return run_spark(spark, bootstrap, input_topic, checkpoints, aggregate_count_topology)
    if engine == "spark-aggregate-keyed":
        with keyed_folds():
            return run_spark(spark, bootstrap, input_topic, checkpoints, aggregate_count_topology)
    if engine == "spark-hand":
        return run_handwritten(spark, bootstrap, input_topic, checkpoints)
    if engine == "spark-hand-windowed":
        return run_handwritten_windowed(spark, bootstrap, input_topic, checkpoints)
    if engine == "spark-windowed-count":
        return run_spark(spark, bootstrap, input_topic, checkpoints, windowed_count_topology)
    windowed = engine == "spark-windowed"
    return run_spark(spark, bootstrap, input_topic, checkpoints,
                     lambda source, sink: build_topology(source, sink, windowed=windowed))


def line_timestamps(count: int, span_minutes: int) -> list[int]:
    """Record i of `count` at start + i * span / count, start an hour ago on a window boundary."""
    start = (int(time.time() * 1000) - 3_600_000) // WINDOW_MS * WINDOW_MS
    return [start + i * span_minutes * WINDOW_MS // count for i in range(count)]


def windowed_counts(lines: list[bytes], timestamps: list[int]) -> Counter[str]:
    """The expected final table of the windowed engines: "word@window start" -> count."""
    return Counter(f"{w}@{ts - ts % WINDOW_MS}" for line, ts in zip(lines, timestamps, strict=True)
                   for w in line.decode().split())


def make_input(bootstrap: str, topic: str, lines: list[bytes], timed: bool, span_minutes: int) -> tuple[float, Counter[str] | None]:
    """Create and fill the input topic; with `timed`, timestamps spread over the span and the windowed counts."""
    asyncio.run(create_topics(bootstrap, [topic], PARTITIONS))
    if not timed:
        return asyncio.run(fill(bootstrap, topic, lines)), None
    timestamps = line_timestamps(len(lines), span_minutes)
    return asyncio.run(fill(bootstrap, topic, lines, timestamps)), windowed_counts(lines, timestamps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", default="1000000,10000000", help="input sizes in words, comma-separated")
    parser.add_argument("--words-per-line", type=int, default=10)
    parser.add_argument("--vocabulary", type=int, default=5000)
    parser.add_argument("--engines", default="spark,asyncio-1,asyncio-2")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs of each Spark engine per size (order alternating)")
    parser.add_argument("--warmup-words", type=int, default=100_000, help="untimed first run of each Spark engine")
    parser.add_argument("--window-span-minutes", type=int, default=10,
                        help="with a windowed engine: the input's timestamps span this many 1-minute windows")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--standalone-workers", type=int, default=0,
                        help="run on a standalone master with this many 1-core workers started on 127.0.0.1")
    parser.add_argument("--spark-cpus", type=lambda text: {int(c) for c in text.split(",")},
                        help="CPU ids (e.g. 1) the Spark session runs on, its JVM and Python workers: set after "
                             "the broker started, which keeps every CPU")
    parser.add_argument("--asyncio-worker", nargs=5, metavar=("BOOTSTRAP", "APP_ID", "INPUT", "OUTPUT", "STATE_DIR"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.asyncio_worker:
        return asyncio_worker(*args.asyncio_worker)
    logging.basicConfig(level=logging.WARNING)
    engines = args.engines.split(",")
    timed = any(engine in WINDOWED_ENGINES for engine in engines)
    sizes = [int(w) for w in args.words.split(",")]
    rows: list[tuple[int, str, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp, contextlib.ExitStack() as cluster:
        broker = cluster.enter_context(bench_broker(Path(tmp) / "broker"))
        if args.spark_cpus:
            os.sched_setaffinity(0, args.spark_cpus)  # inherited by the JVM and the Python workers it forks
        spark = None
        try:
            bootstrap = broker.bootstrap_servers
            if any(engine.startswith("spark") for engine in engines):
                from streams_core.spark import build_session

                started = time.perf_counter()
                if args.standalone_workers:
                    from streams_core.spark.local_cluster import local_standalone_cluster

                    args.master = cluster.enter_context(
                        local_standalone_cluster(Path(tmp) / "cluster", workers=args.standalone_workers, memory="2g"))
                spark = build_session({"spark.master": args.master, "spark.sql.shuffle.partitions": "4",
                                       "spark.driver.memory": "4g"}, app_name="bench")
                spark.sparkContext.setLogLevel("ERROR")
                spark_startup = time.perf_counter() - started
                print(f"Spark session ({args.master}) up in {spark_startup:.1f} s", flush=True)
                if args.warmup_words:
                    lines, expected = make_lines(args.warmup_words // args.words_per_line, args.words_per_line,
                                                 args.vocabulary, seed=7)
                    warm_topic = f"bench-warmup-{uuid.uuid4().hex[:6]}"
                    _, windowed = make_input(bootstrap, warm_topic, lines, timed, args.window_span_minutes)
                    for engine in (e for e in engines if e.startswith("spark")):
                        seconds, output = spark_run(engine, spark, bootstrap, warm_topic, Path(tmp) / "checkpoints")
                        asyncio.run(check(bootstrap, output, windowed if engine in WINDOWED_ENGINES else expected))
                        print(f"  warm-up (first run) {engine}: {args.warmup_words:,} words in {seconds:.1f} s", flush=True)
            for words in sizes:
                lines, expected = make_lines(words // args.words_per_line, args.words_per_line, args.vocabulary)
                input_topic = f"bench-lines-{uuid.uuid4().hex[:6]}"
                filled, windowed = make_input(bootstrap, input_topic, lines, timed, args.window_span_minutes)
                total = sum(expected.values())
                print(f"{input_topic}: {len(lines):,} lines, {total:,} words, filled in {filled:.1f} s", flush=True)
                spark_engines = [e for e in engines if e.startswith("spark")]
                order = [e for e in engines if not e.startswith("spark")]
                for round_ in range(args.repeat):
                    order += spark_engines if round_ % 2 == 0 else spark_engines[::-1]
                for engine in order:
                    if engine.startswith("spark"):
                        seconds, output = spark_run(engine, spark, bootstrap, input_topic, Path(tmp) / "checkpoints")
                        note = ""
                    else:
                        instances = int(engine.split("-")[1])
                        seconds, first, output = asyncio.run(run_asyncio(bootstrap, input_topic, instances, Path(tmp)))
                        note = f"first commit after {first:.1f} s"
                    records = asyncio.run(check(bootstrap, output, windowed if engine in WINDOWED_ENGINES else expected))
                    note = f"{note}; {records:,} output records".lstrip("; ")
                    rows.append((total, engine, seconds, note))
                    print(f"  {engine}: {total / seconds:,.0f} words/s ({seconds:.1f} s) {note}", flush=True)
        finally:
            if spark is not None:
                spark.stop()
    print(f"\n{datetime.date.today()} {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores; "
          f"--words-per-line {args.words_per_line} --vocabulary {args.vocabulary}; {PARTITIONS} partitions; "
          f"load average {LOAD_AT_START:.2f} at the start, {os.getloadavg()[0]:.2f} at the end\n")
    print("| input words | engine | words/s | seconds | notes |")
    print("|---:|---|---:|---:|---|")
    for total, engine, seconds, note in rows:
        print(f"| {total:,} | {engine} | {total / seconds:,.0f} | {seconds:.1f} | {note} |")
    for total in sorted({r[0] for r in rows}):
        for ours, theirs in (("spark", "spark-hand"), ("spark-windowed-count", "spark-hand-windowed"),
                             ("spark-aggregate", "spark-aggregate-keyed"), ("spark-aggregate-tws", "spark-aggregate"),
                             ("spark-aggregate-row", "spark-aggregate")):
            dsl = [r[2] for r in rows if r[0] == total and r[1] == ours]
            hand = [r[2] for r in rows if r[0] == total and r[1] == theirs]
            if dsl and hand:
                print(f"\n{total:,} words: {ours} / {theirs} = {min(dsl) / min(hand):.2f} (best of each), "
                      f"{sum(dsl) / sum(hand):.2f} (mean of each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
