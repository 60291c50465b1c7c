"""Word count throughput: Spark (available_now) against hand-written PySpark and the asyncio runtime.

    flock /tmp/bench.lock .venv/bin/python bench/spark_wordcount.py --words 1000000,10000000 \
        --engines spark,spark-hand --repeat 2                                   (the DSL against hand-written PySpark)
    flock /tmp/bench.lock .venv/bin/python bench/spark_wordcount.py --words 1000000,10000000   (against asyncio)
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
scaling figure).
"""

from __future__ import annotations

import argparse
import asyncio
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
from streams_core.testing.broker import DEFAULT_JVM_OPTS, LocalKafkaBroker

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


def run_spark(spark: Any, bootstrap: str, input_topic: str, checkpoints: Path, windowed: bool = False) -> tuple[float, str]:
    from streams_core.spark import SparkRunner

    app_id = f"bench-spark-{uuid.uuid4().hex[:6]}"
    output = f"{app_id}-out"
    asyncio.run(create_topics(bootstrap, [output], PARTITIONS))
    runner = SparkRunner(build_topology(input_topic, output, windowed=windowed),
                         {"application.id": app_id, "bootstrap.servers": bootstrap}, spark=spark)
    started = time.perf_counter()
    runner.run("available_now", checkpoints / app_id)
    return time.perf_counter() - started, output


def run_handwritten(spark: Any, bootstrap: str, input_topic: str, checkpoints: Path) -> tuple[float, str]:
    """The word count as a Spark user writes it by hand, its counts as our Long serde's bytes."""
    from pyspark.sql import functions as F

    app_id = f"bench-hand-{uuid.uuid4().hex[:6]}"
    output = f"{app_id}-out"
    asyncio.run(create_topics(bootstrap, [output], PARTITIONS))
    started = time.perf_counter()
    lines = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", input_topic).option("startingOffsets", "earliest").load())
    words = lines.select(F.explode(F.split(F.col("value").cast("string"), " ")).alias("word"))
    counts = words.groupBy("word").count().select(
        F.col("word").cast("binary").alias("key"), F.unhex(F.lpad(F.hex("count"), 16, "0")).alias("value"))
    query = (counts.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", output)
             .option("checkpointLocation", str(checkpoints / app_id)).outputMode("update")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return time.perf_counter() - started, output


def spark_run(engine: str, spark: Any, bootstrap: str, input_topic: str, checkpoints: Path) -> tuple[float, str]:
    if engine == "spark-hand":
        return run_handwritten(spark, bootstrap, input_topic, checkpoints)
    return run_spark(spark, bootstrap, input_topic, checkpoints, windowed=engine == "spark-windowed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", default="1000000,10000000", help="input sizes in words, comma-separated")
    parser.add_argument("--words-per-line", type=int, default=10)
    parser.add_argument("--vocabulary", type=int, default=5000)
    parser.add_argument("--engines", default="spark,asyncio-1,asyncio-2")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs of each Spark engine per size (order alternating)")
    parser.add_argument("--warmup-words", type=int, default=100_000, help="untimed first run of each Spark engine")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--asyncio-worker", nargs=5, metavar=("BOOTSTRAP", "APP_ID", "INPUT", "OUTPUT", "STATE_DIR"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.asyncio_worker:
        return asyncio_worker(*args.asyncio_worker)
    logging.basicConfig(level=logging.WARNING)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `timeout` unwinds: the broker stops
    engines = args.engines.split(",")
    sizes = [int(w) for w in args.words.split(",")]
    rows: list[tuple[int, str, float, str]] = []
    jvm_opts = [o for o in DEFAULT_JVM_OPTS if not o.startswith("-XX:TieredStopAtLevel")]
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        broker = LocalKafkaBroker(Path(tmp) / "broker", jvm_opts=jvm_opts)
        broker.start()
        spark = None
        try:
            bootstrap = broker.bootstrap_servers
            if any(engine.startswith("spark") for engine in engines):
                from streams_core.spark import build_session

                started = time.perf_counter()
                spark = build_session({"spark.master": args.master, "spark.sql.shuffle.partitions": "4",
                                       "spark.driver.memory": "4g"}, app_name="bench")
                spark.sparkContext.setLogLevel("ERROR")
                spark_startup = time.perf_counter() - started
                print(f"Spark session ({args.master}) up in {spark_startup:.1f} s", flush=True)
                if args.warmup_words:
                    lines, expected = make_lines(args.warmup_words // args.words_per_line, args.words_per_line,
                                                 args.vocabulary, seed=7)
                    warm_topic = f"bench-warmup-{uuid.uuid4().hex[:6]}"
                    asyncio.run(create_topics(bootstrap, [warm_topic], PARTITIONS))
                    asyncio.run(fill(bootstrap, warm_topic, lines))
                    for engine in (e for e in engines if e.startswith("spark")):
                        seconds, output = spark_run(engine, spark, bootstrap, warm_topic, Path(tmp) / "checkpoints")
                        asyncio.run(check(bootstrap, output, expected))
                        print(f"  warm-up (first run) {engine}: {args.warmup_words:,} words in {seconds:.1f} s", flush=True)
            for words in sizes:
                lines, expected = make_lines(words // args.words_per_line, args.words_per_line, args.vocabulary)
                input_topic = f"bench-lines-{uuid.uuid4().hex[:6]}"
                asyncio.run(create_topics(bootstrap, [input_topic], PARTITIONS))
                filled = asyncio.run(fill(bootstrap, input_topic, lines))
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
                    records = asyncio.run(check(bootstrap, output, expected))
                    note = f"{note}; {records:,} output records".lstrip("; ")
                    rows.append((total, engine, seconds, note))
                    print(f"  {engine}: {total / seconds:,.0f} words/s ({seconds:.1f} s) {note}", flush=True)
        finally:
            if spark is not None:
                spark.stop()
            broker.stop()
    print(f"\n{datetime.date.today()} {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores; "
          f"--words-per-line {args.words_per_line} --vocabulary {args.vocabulary}; {PARTITIONS} partitions; "
          f"load average {LOAD_AT_START:.2f} at the start, {os.getloadavg()[0]:.2f} at the end\n")
    print("| input words | engine | words/s | seconds | notes |")
    print("|---:|---|---:|---:|---|")
    for total, engine, seconds, note in rows:
        print(f"| {total:,} | {engine} | {total / seconds:,.0f} | {seconds:.1f} | {note} |")
    for total in sorted({r[0] for r in rows}):
        dsl = [r[2] for r in rows if r[0] == total and r[1] == "spark"]
        hand = [r[2] for r in rows if r[0] == total and r[1] == "spark-hand"]
        if dsl and hand:
            print(f"\n{total:,} words: spark / spark-hand = {min(dsl) / min(hand):.2f} (best of each), "
                  f"{sum(dsl) / sum(hand):.2f} (mean of each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
