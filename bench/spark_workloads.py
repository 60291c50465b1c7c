"""Five everyday jobs on SparkRunner against the same jobs hand-written in PySpark (issue 34, item 8).

    flock /tmp/bench.lock .venv/bin/python bench/spark_workloads.py --records 200000 --repeat 2
    flock /tmp/bench.lock .venv/bin/python bench/spark_workloads.py --records 1000000 --jobs sum,wordcount
    .venv/bin/python bench/spark_workloads.py --records 20000 --repeat 1 --warmup 0           (a quick check)

One run starts its own local broker (LocalKafkaBroker in a temp dir, stopped at the end even on
error) and one Spark session (`--master`, default local[2], `spark.sql.shuffle.partitions=4`,
driver memory 4g; its start-up reported apart). Per job it fills its input topics once (4
partitions, explicit timestamps), then runs `--repeat` rounds, each round both sides, the order
alternating (ours, hand, hand, ours, ...), each run with a fresh checkpoint and output topic:

  ours   the DSL topology on `SparkRunner(..., spark=session).run("available_now")`, timed from
         run() to its return (planning, internal topic creation, every query)
  hand   the job a Spark user writes by hand, on the same session, `trigger(availableNow=True)`,
         timed from building the query to the end of awaitTermination()

Jobs (`--records` N records per input):
  sum         N (user, Long) records over N/20 users; `group_by_key().reduce(lambda a, b: a + b)`
              against `groupBy(key).agg(sum(value))` (value bytes decoded/encoded by Spark
              expressions); SparkRunner recognises the lambda as `operator.add`: Spark's own sum
  sum-builtin the same with `reduce(operator.add)` (the same stage as `sum`, docs/spark.md)
  sum-fold    the same with a reducer SparkRunner does not see through (`int(a + b)`): the ordered
              fold, the user's function per value in the vectorized stage
  sum-assoc   `sum-fold` with `SparkRunner(..., associative_reducers=True)`: partial sums per
              Spark partition, then the reducer per key over the partials
  enrichment  N clicks (user -> page) joined with a users table (N/20 users -> one of 20 regions,
              every user record older than every click), counted per region: `stream.join(table)
              .group_by(region).count()` against a stream-static join (the users topic read as a
              batch) + `groupBy(region).count()`; 1 click in 20 has an unknown user (inner join)
  session     N events over N/20 users (gaps 1-60 s, never exactly 30 s), a 30 s session count:
              `windowed_by(SessionWindows(30 s, grace 1 h)).count()` keyed "user@session start"
              against `session_window(timestamp, "30 seconds")` + count, watermark 1 h, append
              mode. A last record 2 h after the others (key "~flush") moves Spark's watermark past
              every session so append mode writes them; it is left out of the comparison
  session-sum the same events, values amounts "0".."99": `aggregate(0, total + int(amount), one + two)`
              per session (the user's functions: the native session aggregate) against
              `session_window` + `sum(cast(value as long))`
  join        N left and N right records over N/20 keys, timestamps spread over 10 minutes, an inner
              join within 10 s: `join(JoinWindows(10 s, grace 1 h))` against a time-range join with
              1 h watermarks (append mode); value "left+right", every pair once
  wordcount   N/10 lines of 10 words (bench/spark_wordcount.py's input and both jobs)

Every output is read back (not timed) and checked exactly: the final table (latest value per key,
tombstones delete) against the expected one, or for the join the multiset of output records.
Before the timed rounds each job runs once on `--warmup` records per side (a session's first
queries pay JIT, code generation and Python worker start-up), reported apart.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import logging
import operator
import os
import platform
import random
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from spark_wordcount import long_bytes
from wordcount_guarantees import create_topics, make_lines

from app.wordcount import build_topology as wordcount_topology
from streams_core import JoinWindows, Materialized, Serdes, SessionWindows, StreamJoined, StreamsBuilder, Topology
from streams_core.broker import DEFAULT_JVM_OPTS, LocalKafkaBroker

LOAD_AT_START = os.getloadavg()[0]
PARTITIONS = 4
HOUR = 3_600_000
REGIONS = 20
SESSION_GAP = 30_000
JOIN_WINDOW = 10_000
FLUSH_KEY = "~flush"

Record = tuple[bytes, bytes, int]  # key, value, timestamp


def long_value(data: bytes) -> int:
    return int.from_bytes(data, "big", signed=True)


def long_column(column: str) -> Any:
    """Our Long serde's 8 bytes (non-negative values) as a bigint, by Spark expressions."""
    from pyspark.sql import functions as F

    return F.conv(F.hex(column), 16, 10).cast("long")


@dataclass
class Data:
    inputs: dict[str, list[Record]]  # role -> records
    expected: dict[str, Any] | Counter[tuple[str, str]]


@dataclass
class Job:
    """One workload: its input, the DSL topology, the hand-written query, and how its output reads."""

    name: str
    make: Callable[[int, float], Data]
    ours: Callable[[dict[str, str], str], Topology]
    hand: Callable[[Any, dict[str, str]], tuple[Any, str]]  # (session, topics) -> (frame of key, value), output mode
    value: Callable[[bytes], Any] = long_value
    pairs: bool = False  # compare the multiset of output records, not the final table
    ignore: str | None = None  # a key left out of the comparison
    options: dict[str, Any] = field(default_factory=dict)  # SparkRunner's keyword arguments


# ---- sum per key


def make_sum(n: int, base: float) -> Data:
    rnd = random.Random(1)
    users = max(1, n // 20)
    records, sums = [], Counter[str]()
    for i in range(n):
        user, amount = f"u{rnd.randrange(users)}", rnd.randint(1, 100)
        sums[user] += amount
        records.append((user.encode(), amount.to_bytes(8, "big"), int(base) + i))
    return Data({"input": records}, dict(sums))


def sum_topology(topics: dict[str, str], output: str, reducer: Callable[[int, int], int] = lambda a, b: a + b) -> Topology:
    s, long = Serdes.String(), Serdes.Long()
    builder = StreamsBuilder()
    (builder.stream(topics["input"], key_serde=s, value_serde=long).group_by_key()
     .reduce(reducer).to_stream().to(output, key_serde=s, value_serde=long))
    return builder.build()


def add_opaque(a: int, b: int) -> int:
    """A sum SparkRunner does not recognise as one (the call to int), so the user's function runs."""
    return int(a + b)


def sum_fold_topology(topics: dict[str, str], output: str) -> Topology:
    return sum_topology(topics, output, add_opaque)


def sum_builtin_topology(topics: dict[str, str], output: str) -> Topology:
    """The sum with `operator.add`, which SparkRunner computes with Spark's own sum (native_combine.py)."""
    return sum_topology(topics, output, operator.add)


def sum_hand(spark: Any, topics: dict[str, str]) -> tuple[Any, str]:
    from pyspark.sql import functions as F

    rows = stream(spark, topics["input"])
    totals = rows.groupBy("key").agg(F.sum(long_column("value")).alias("total"))
    return totals.select("key", long_bytes("total")), "update"


# ---- enrichment: stream-table join, then count per region


def make_enrichment(n: int, base: float) -> Data:
    rnd = random.Random(2)
    users = max(1, n // 20)
    regions = {f"u{u}": f"region-{rnd.randrange(REGIONS)}" for u in range(users)}
    table = [(u.encode(), r.encode(), int(base) + i) for i, (u, r) in enumerate(regions.items())]
    clicks, counts = [], Counter[str]()
    for i in range(n):
        user = f"u{rnd.randrange(users)}" if rnd.random() >= 0.05 else f"unknown{i}"
        if user in regions:
            counts[regions[user]] += 1
        clicks.append((user.encode(), f"/page/{rnd.randrange(100)}".encode(), int(base) + HOUR // 60 + i))
    return Data({"clicks": clicks, "users": table}, dict(counts))


def enrichment_topology(topics: dict[str, str], output: str) -> Topology:
    s = Serdes.String()
    builder = StreamsBuilder()
    users = builder.table(topics["users"], key_serde=s, value_serde=s)
    (builder.stream(topics["clicks"], key_serde=s, value_serde=s).join(users, lambda page, region: region)
     .group_by(lambda user, region: region, key_serde=s, value_serde=s).count()
     .to_stream().to(output, key_serde=s, value_serde=Serdes.Long()))
    return builder.build()


def enrichment_hand(spark: Any, topics: dict[str, str]) -> tuple[Any, str]:
    from pyspark.sql import functions as F

    users = (spark.read.format("kafka").option("kafka.bootstrap.servers", BOOTSTRAP[0])
             .option("subscribe", topics["users"]).option("startingOffsets", "earliest").load()
             .select(F.col("key").alias("user"), F.col("value").cast("string").alias("region")))
    clicks = stream(spark, topics["clicks"]).select(F.col("key").alias("user"))
    counts = clicks.join(users, "user").groupBy("region").count()
    return counts.select(F.col("region").cast("binary").alias("key"), long_bytes("count")), "update"


# ---- session count, 30 s gap


def make_session(n: int, base: float) -> Data:
    return _sessions(n, base, sums=False)


def make_session_sum(n: int, base: float) -> Data:
    return _sessions(n, base, sums=True)


def _sessions(n: int, base: float, sums: bool) -> Data:
    """The session jobs' events; expected per "user@session start": the count, or with `sums` the
    sum of the events' amounts (values "0".."99")."""
    rnd = random.Random(3)
    users = max(1, n // 20)
    events: list[tuple[int, str]] = []
    for u in range(users):
        ts = int(base) + rnd.randrange(600_000)
        for _ in range(20):
            events.append((ts, f"u{u}"))
            gap = rnd.randint(1_000, 60_000)
            ts += gap if gap != SESSION_GAP else gap + 1
    events = sorted(events)[:n]
    amounts = [ts % 100 if sums else 1 for ts, _ in events]
    sessions: dict[str, int] = {}
    last: dict[str, tuple[int, int]] = {}  # user -> (session start, last event)
    for (ts, user), amount in zip(events, amounts, strict=True):
        start, end = last.get(user, (0, -10 * SESSION_GAP))
        if ts - end > SESSION_GAP:
            start = ts
        last[user] = (start, ts)
        key = f"{user}@{start}"
        sessions[key] = sessions.get(key, 0) + amount
    values = [str(a).encode() if sums else b"click" for a in amounts]
    records = [(user.encode(), value, ts) for (ts, user), value in zip(events, values, strict=True)]
    records.append((FLUSH_KEY.encode(), b"0" if sums else b"click", events[-1][0] + 2 * HOUR))
    return Data({"input": records}, sessions)


def session_topology(topics: dict[str, str], output: str) -> Topology:
    s = Serdes.String()
    builder = StreamsBuilder()
    (builder.stream(topics["input"], key_serde=s, value_serde=s).group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(SESSION_GAP, HOUR)).count()
     .to_stream().map(lambda wk, n: (f"{wk.key}@{wk.window.start}", n)).to(output, key_serde=s, value_serde=Serdes.Long()))
    return builder.build()


def session_hand(spark: Any, topics: dict[str, str]) -> tuple[Any, str]:
    from pyspark.sql import functions as F

    rows = stream(spark, topics["input"]).withWatermark("timestamp", "1 hour")
    sessions = rows.groupBy(F.session_window("timestamp", "30 seconds"), "key").count()
    key = F.concat(F.col("key").cast("string"), F.lit("@"), F.unix_millis("session_window.start").cast("string"))
    return sessions.select(key.cast("binary").alias("key"), long_bytes("count")), "append"


def session_sum_topology(topics: dict[str, str], output: str) -> Topology:
    s, long = Serdes.String(), Serdes.Long()
    builder = StreamsBuilder()
    (builder.stream(topics["input"], key_serde=s, value_serde=s).group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(SESSION_GAP, HOUR))
     .aggregate(lambda: 0, lambda user, amount, total: total + int(amount), lambda user, one, two: one + two,
                Materialized.with_(value_serde=long))
     .to_stream().map(lambda wk, total: (f"{wk.key}@{wk.window.start}", total)).to(output, key_serde=s, value_serde=long))
    return builder.build()


def session_sum_hand(spark: Any, topics: dict[str, str]) -> tuple[Any, str]:
    from pyspark.sql import functions as F

    rows = stream(spark, topics["input"]).withWatermark("timestamp", "1 hour")
    amount = F.col("value").cast("string").cast("long")
    sessions = rows.groupBy(F.session_window("timestamp", "30 seconds"), "key").agg(F.sum(amount).alias("total"))
    key = F.concat(F.col("key").cast("string"), F.lit("@"), F.unix_millis("session_window.start").cast("string"))
    return sessions.select(key.cast("binary").alias("key"), long_bytes("total")), "append"


# ---- stream-stream join, 10 s window


def make_join(n: int, base: float) -> Data:
    rnd = random.Random(4)
    keys = max(1, n // 20)
    sides: dict[str, list[tuple[int, str, str]]] = {}
    for side in ("left", "right"):
        events = sorted((int(base) + rnd.randrange(600_000), f"k{rnd.randrange(keys)}") for _ in range(n))
        sides[side] = [(ts, key, f"{side[0]}{i}") for i, (ts, key) in enumerate(events)]
    by_key: dict[str, list[tuple[int, str]]] = {}
    for ts, key, value in sides["right"]:
        by_key.setdefault(key, []).append((ts, value))
    pairs = Counter[tuple[str, str]]()
    for ts, key, value in sides["left"]:
        for other_ts, other in by_key.get(key, ()):
            if abs(other_ts - ts) <= JOIN_WINDOW:
                pairs[(key, f"{value}+{other}")] += 1
    return Data({side: [(k.encode(), v.encode(), ts) for ts, k, v in records] for side, records in sides.items()}, pairs)


def join_topology(topics: dict[str, str], output: str) -> Topology:
    s = Serdes.String()
    builder = StreamsBuilder()
    right = builder.stream(topics["right"], key_serde=s, value_serde=s)
    (builder.stream(topics["left"], key_serde=s, value_serde=s)
     .join(right, lambda left, other: f"{left}+{other}", JoinWindows.of_time_difference_and_grace(JOIN_WINDOW, HOUR),
           StreamJoined.with_(s, s, s))
     .to(output, key_serde=s, value_serde=s))
    return builder.build()


def join_hand(spark: Any, topics: dict[str, str]) -> tuple[Any, str]:
    from pyspark.sql import functions as F

    def side(role: str, prefix: str) -> Any:
        return stream(spark, topics[role]).select(
            F.col("key").alias(f"{prefix}k"), F.col("value").cast("string").alias(f"{prefix}v"),
            F.col("timestamp").alias(f"{prefix}t")).withWatermark(f"{prefix}t", "1 hour")

    joined = side("left", "l").join(side("right", "r"), F.expr(
        "lk = rk AND rt >= lt - interval 10 seconds AND rt <= lt + interval 10 seconds"))
    return joined.select(F.col("lk").alias("key"), F.concat("lv", F.lit("+"), "rv").cast("binary").alias("value")), "append"


# ---- word count


def make_wordcount(n: int, base: float) -> Data:
    lines, expected = make_lines(max(1, n // 10), 10, 5000)
    return Data({"input": [(b"line-%d" % i, line, int(base) + i) for i, line in enumerate(lines)]}, dict(expected))


def wordcount_ours(topics: dict[str, str], output: str) -> Topology:
    return wordcount_topology(topics["input"], output, windowed=False)


def wordcount_hand(spark: Any, topics: dict[str, str]) -> tuple[Any, str]:
    from pyspark.sql import functions as F

    words = stream(spark, topics["input"]).select(F.explode(F.split(F.col("value").cast("string"), " ")).alias("word"))
    return words.groupBy("word").count().select(F.col("word").cast("binary").alias("key"), long_bytes("count")), "update"


JOBS = {job.name: job for job in (
    Job("sum", make_sum, sum_topology, sum_hand),
    Job("sum-builtin", make_sum, sum_builtin_topology, sum_hand),
    Job("sum-fold", make_sum, sum_fold_topology, sum_hand),
    Job("sum-assoc", make_sum, sum_fold_topology, sum_hand, options={"associative_reducers": True}),
    Job("enrichment", make_enrichment, enrichment_topology, enrichment_hand),
    Job("session", make_session, session_topology, session_hand, ignore=FLUSH_KEY),
    Job("session-sum", make_session_sum, session_sum_topology, session_sum_hand, ignore=FLUSH_KEY),
    Job("join", make_join, join_topology, join_hand, value=bytes.decode, pairs=True),
    Job("wordcount", make_wordcount, wordcount_ours, wordcount_hand),
)}

BOOTSTRAP: list[str] = []  # the broker of this run
PHASES: list[bool] = []  # --phases given


def stream(spark: Any, topic: str) -> Any:
    return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", BOOTSTRAP[0])
            .option("subscribe", topic).option("startingOffsets", "earliest").load())


async def produce(bootstrap: str, topic: str, records: list[Record]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, max_batch_size=256 * 1024)
    await producer.start()
    try:
        futures = [await producer.send(topic, value=v, key=k, timestamp_ms=ts) for k, v, ts in records]
        await producer.flush()
        for future in futures:
            future.result()
    finally:
        await producer.stop()


async def read_output(bootstrap: str, topic: str) -> list[tuple[bytes, bytes | None]]:
    """Every record of the topic, partition by partition in offset order."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        records: dict[int, list[tuple[bytes, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 600
        while any([await consumer.position(tp) < ends[tp] for tp in tps]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not read to its end within 600 s")
            for tp, batch in (await consumer.getmany(timeout_ms=500, max_records=50_000)).items():
                records[tp.partition].extend((r.key, r.value) for r in batch)
        return [r for p in range(PARTITIONS) for r in records[p]]
    finally:
        await consumer.stop()


def check(job: Job, data: Data, records: list[tuple[bytes, bytes | None]], output: str) -> None:
    """Raise unless the output is exactly the expected one."""
    if job.pairs:
        got: Any = Counter((k.decode(), job.value(v)) for k, v in records if v is not None)
    else:
        got = {}
        for k, v in records:
            if v is None:
                got.pop(k.decode(), None)
            else:
                got[k.decode()] = job.value(v)
    if job.ignore is not None:
        got = {k: v for k, v in got.items() if not k.startswith(job.ignore + "@")}
    if got != data.expected:
        missing = sum(1 for k in data.expected if k not in got)
        wrong = sum(1 for k, v in data.expected.items() if k in got and got[k] != v)
        extra = sum(1 for k in got if k not in data.expected)
        raise AssertionError(f"{job.name} {output}: {missing} missing, {wrong} wrong, {extra} unexpected of "
                             f"{len(data.expected)} expected")


def run_ours(spark: Any, job: Job, topics: dict[str, str], checkpoints: Path) -> tuple[float, str]:
    from streams_core.spark import SparkRunner

    app_id = f"ours-{job.name}-{uuid.uuid4().hex[:6]}"
    output = f"{app_id}-out"
    asyncio.run(create_topics(BOOTSTRAP[0], [output], PARTITIONS))
    runner = SparkRunner(job.ours(topics, output), {"application.id": app_id, "bootstrap.servers": BOOTSTRAP[0]},
                         spark=spark, progress=False, **job.options)
    started = time.perf_counter()
    runner.run("available_now", checkpoints / app_id)
    seconds = time.perf_counter() - started
    if PHASES:
        phases: Counter[str] = Counter()
        for reports in runner.progress.values():
            for report in reports:
                phases.update(report.get("durationMs", {}))
        inside = phases.get("triggerExecution", 0) / 1000
        print(f"    Spark's durationMs over {sum(map(len, runner.progress.values()))} micro-batches: "
              + ", ".join(f"{k} {v / 1000:.1f} s" for k, v in phases.most_common())
              + f"; outside micro-batches {seconds - inside:.1f} s", flush=True)
    return seconds, output


def run_hand(spark: Any, job: Job, topics: dict[str, str], checkpoints: Path) -> tuple[float, str]:
    app_id = f"hand-{job.name}-{uuid.uuid4().hex[:6]}"
    output = f"{app_id}-out"
    asyncio.run(create_topics(BOOTSTRAP[0], [output], PARTITIONS))
    started = time.perf_counter()
    frame, mode = job.hand(spark, topics)
    query = (frame.writeStream.format("kafka").option("kafka.bootstrap.servers", BOOTSTRAP[0]).option("topic", output)
             .option("checkpointLocation", str(checkpoints / app_id)).outputMode(mode)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return time.perf_counter() - started, output


def fill(job: Job, n: int) -> tuple[Data, dict[str, str]]:
    data = job.make(n, time.time() * 1000 - 4 * HOUR)
    suffix = uuid.uuid4().hex[:6]
    topics = {role: f"bench-{job.name}-{role}-{suffix}" for role in data.inputs}
    asyncio.run(create_topics(BOOTSTRAP[0], list(topics.values()), PARTITIONS))
    for role, records in data.inputs.items():
        asyncio.run(produce(BOOTSTRAP[0], topics[role], records))
    return data, topics


def run_side(side: str, spark: Any, job: Job, data: Data, topics: dict[str, str], checkpoints: Path) -> tuple[float, int]:
    seconds, output = (run_ours if side == "ours" else run_hand)(spark, job, topics, checkpoints)
    records = asyncio.run(read_output(BOOTSTRAP[0], output))
    check(job, data, records, output)
    return seconds, len(records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", default="200000", help="records per input, comma-separated sizes")
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"comma-separated, of {', '.join(JOBS)}")
    parser.add_argument("--repeat", type=int, default=2, help="rounds per job and size (order alternating)")
    parser.add_argument("--warmup", type=int, default=10_000, help="records per input of an untimed first run (0: none)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--phases", action="store_true", help="print Spark's time per phase of each SparkRunner run")
    args = parser.parse_args(argv)
    if args.phases:
        PHASES.append(True)
    logging.basicConfig(level=logging.WARNING)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `timeout` unwinds: the broker stops
    jobs = [JOBS[name] for name in args.jobs.split(",")]
    rows: list[tuple[str, int, str, float, int]] = []
    jvm_opts = [o for o in DEFAULT_JVM_OPTS if not o.startswith("-XX:TieredStopAtLevel")]
    with tempfile.TemporaryDirectory(prefix="bench-workloads-") as tmp:
        broker = LocalKafkaBroker(Path(tmp) / "broker", jvm_opts=jvm_opts)
        broker.start()
        spark = None
        try:
            BOOTSTRAP.append(broker.bootstrap_servers)
            from streams_core.spark import build_session

            started = time.perf_counter()
            spark = build_session({"spark.master": args.master, "spark.sql.shuffle.partitions": "4",
                                   "spark.driver.memory": "4g"}, app_name="bench-workloads")
            spark.sparkContext.setLogLevel("ERROR")
            print(f"Spark session ({args.master}) up in {time.perf_counter() - started:.1f} s", flush=True)
            checkpoints = Path(tmp) / "checkpoints"
            for job in jobs:
                if args.warmup:
                    data, topics = fill(job, args.warmup)
                    for side in ("ours", "hand"):
                        seconds, records = run_side(side, spark, job, data, topics, checkpoints)
                        print(f"  warm-up {job.name} {side}: {args.warmup:,} records in {seconds:.1f} s", flush=True)
                for n in (int(r) for r in args.records.split(",")):
                    data, topics = fill(job, n)
                    print(f"{job.name}: {n:,} records per input ({', '.join(topics.values())})", flush=True)
                    for round_ in range(args.repeat):
                        for side in (("ours", "hand") if round_ % 2 == 0 else ("hand", "ours")):
                            seconds, records = run_side(side, spark, job, data, topics, checkpoints)
                            rows.append((job.name, n, side, seconds, records))
                            print(f"  {side}: {seconds:.1f} s, {records:,} output records (exact)", flush=True)
        finally:
            if spark is not None:
                spark.stop()
            broker.stop()
    print(f"\n{datetime.date.today()} {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} cores, {args.master}; {PARTITIONS} partitions; load average {LOAD_AT_START:.2f} at the "
          f"start, {os.getloadavg()[0]:.2f} at the end\n")
    print("| job | records per input | hand-written (s, best / mean) | SparkRunner (s, best / mean) | ratio best / mean "
          "| output records hand / ours |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, n in dict.fromkeys((r[0], r[1]) for r in rows):
        hand = [r for r in rows if r[:3] == (name, n, "hand")]
        ours = [r for r in rows if r[:3] == (name, n, "ours")]
        best_h, best_o = min(r[3] for r in hand), min(r[3] for r in ours)
        mean_h, mean_o = sum(r[3] for r in hand) / len(hand), sum(r[3] for r in ours) / len(ours)
        print(f"| {name} | {n:,} | {best_h:.1f} / {mean_h:.1f} | {best_o:.1f} / {mean_o:.1f} | "
              f"{best_o / best_h:.2f}x / {mean_o / mean_h:.2f}x | {hand[0][4]:,} / {ours[0][4]:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
