"""Runtime throughput: a hand-written aiokafka loop vs the same work on KafkaStreams.

    .venv/bin/python bench/runtime_throughput.py --records 200000      (the recorded run)
    .venv/bin/python bench/runtime_throughput.py --records 20000       (a quick run)

One run starts its own local broker (LocalKafkaBroker in a temp dir, stopped at the end even on
error), fills the input topics once, and measures in this one process:

  raw           a hand-written aiokafka consume-transform-produce loop (getmany, upper-case the
                value, send() futures, every 100 ms: flush the producer then commit offsets): the
                baseline
  passthrough   the same on KafkaStreams: source -> map processor (upper-case) -> sink,
                at_least_once, commit.interval.ms=100
  wc-sqlite     a Processor API word count (split lines, count each word in a key-value store,
                forward every new count to the output topic), persistent (SQLite) store
  wc-memory     the same with the in-memory store

Each variant reads the same data (its own consumer group / application.id over the shared input
topic) and writes to its own output topic. Time runs from the first record the variant's code sees
to the moment the output topic holds every expected record (the producer has delivered them); a
watcher polls the output's end offsets every `--watch-ms` for every variant alike. The table also
gives this process's CPU time per input record over the same window (steadier than wall time on a
shared machine). Both sides use
the clients KafkaStreams builds by default (`streams_core.clients.producer_kwargs` /
`consumer_kwargs`: acks=all, linger.ms=100, max.poll.records=1000), so the comparison is the
runtime, not client settings (`--linger-ms`, `--acks` change both alike).

`--profile PREFIX` profiles chosen variants with py-spy (or pyinstrument), `--summarize RAW`
sums a py-spy profile by category and function. Results and analysis: bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import logging
import os
import platform
import random
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from streams_core import Processor, Record, Serdes, Stores, Topology
from streams_core.broker import LocalKafkaBroker
from streams_core.clients import InternalTopicManager, NewTopicSpec, consumer_kwargs, create_admin, producer_kwargs
from streams_core.config import StreamsConfig
from streams_core.runtime.kafka_streams import KafkaStreams, State

CLIENT_OVERRIDES: dict[str, Any] = {}
"""Producer settings given to raw and to KafkaStreams alike (`--linger-ms`, `--acks`)."""

VARIANTS = ("raw", "raw-batch", "passthrough", "wc-sqlite", "wc-memory")
COMMIT_INTERVAL_MS = 100
PARTITIONS = 4

# -- data ----------------------------------------------------------------------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def make_vocabulary(size: int, rnd: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rnd.choice(_LETTERS) for _ in range(rnd.randint(3, 9))))
    return sorted(words)


def passthrough_records(n: int, value_bytes: int, rnd: random.Random) -> list[tuple[bytes, bytes]]:
    """n (key, value) pairs: string keys key-<i>, lower-case ASCII values of `value_bytes`."""
    base = "".join(rnd.choice(_LETTERS + " ") for _ in range(value_bytes + 257))
    return [(f"key-{i}".encode(), base[i % 257 : i % 257 + value_bytes].encode()) for i in range(n)]


def wordcount_lines(n: int, words_per_line: int, vocabulary: list[str], rnd: random.Random) -> tuple[list[tuple[bytes, bytes]], int]:
    """n lines of words (Zipf-like choice from the vocabulary); returns them and the word total."""
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    picked = rnd.choices(vocabulary, weights=weights, k=n * words_per_line)
    lines = [
        (f"line-{i}".encode(), " ".join(picked[i * words_per_line : (i + 1) * words_per_line]).encode())
        for i in range(n)
    ]
    return lines, n * words_per_line


# -- broker helpers -------------------------------------------------------------------------------


async def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = create_admin(StreamsConfig({"application.id": "bench-admin", "bootstrap.servers": bootstrap}))
    await admin.start()
    try:
        await InternalTopicManager(admin).ensure_topics([NewTopicSpec(name, partitions) for name in names])
    finally:
        await admin.close()


async def fill(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    """Produce the records (acks=all), as fast as the client goes; returns the seconds it took."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, max_batch_size=256 * 1024)
    await producer.start()
    started = time.perf_counter()
    try:
        futures = []
        for key, value in records:
            futures.append(await producer.send(topic, value=value, key=key))
        await producer.flush()
        for future in futures:
            future.result()
    finally:
        await producer.stop()
    return time.perf_counter() - started


class OutputWatcher:
    """Polls the end offsets of an output topic until they add up to `expected` records."""

    def __init__(self, bootstrap: str, topic: str, expected: int, interval_s: float) -> None:
        self.bootstrap, self.topic, self.expected, self.interval_s = bootstrap, topic, expected, interval_s
        self.done_at: float | None = None
        self.done_cpu = 0.0
        self.last_total = 0
        self.polls = 0

    async def run(self, abort: Callable[[], BaseException | None]) -> float:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partitions = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
            while True:
                error = abort()
                if error is not None:
                    raise error
                ends = await consumer.end_offsets(partitions)
                self.polls += 1
                self.last_total = sum(ends.values())
                if self.last_total >= self.expected:
                    self.done_at, self.done_cpu = time.perf_counter(), time.process_time()
                    return self.done_at
                await asyncio.sleep(self.interval_s)
        finally:
            await consumer.stop()


async def check_upper_case(bootstrap: str, topic: str, sample: int = 200) -> None:
    """Sanity check of a pass-through output: its first records have upper-case values."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        await consumer.seek_to_beginning(TopicPartition(topic, 0))
        records = [r for rs in (await consumer.getmany(timeout_ms=5000, max_records=sample)).values() for r in rs]
    finally:
        await consumer.stop()
    bad = [r.value for r in records if r.value != r.value.upper()]
    if not records or bad:
        raise AssertionError(f"{topic}: expected upper-case values, got {len(records)} records, e.g. {bad[:1]}")


# -- results --------------------------------------------------------------------------------------


@dataclass
class Result:
    variant: str
    records: int
    seconds: float
    outputs: int
    processed_s: float | None = None  # first record to the last one processed (before delivery)
    cpu_s: float = 0.0  # CPU time of this process (all its threads) over `seconds`
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.records / self.seconds


class Probe:
    """Set by the variant's own code at its first record; read by the harness."""

    __slots__ = ("first_at", "first_cpu", "last_at")

    def __init__(self) -> None:
        self.first_at: float | None = None
        self.first_cpu = 0.0
        self.last_at: float | None = None


# -- (a) the raw aiokafka loop --------------------------------------------------------------------


async def run_raw(
    bootstrap: str, input_topic: str, n: int, watch_s: float,
    profile: contextlib.AbstractAsyncContextManager[None] | None = None,
    *, batched: bool = False, output: str | None = None,
) -> Result:
    """Consume with getmany, upper-case the value, send(), flush + commit every 100 ms.

    `batched` is the best loop aiokafka allows: per input partition one `create_batch()` filled
    with the upper-cased records, closed and handed over with `send_batch()` to the same partition
    number (no awaited send per record, no partitioner call, no linger wait). `output` names an
    existing output topic (bench/peers creates it with its own settings); by default a fresh one.
    """
    output = output or f"bench-raw-out-{uuid.uuid4().hex[:8]}"
    await create_topics(bootstrap, [output], PARTITIONS)
    config = StreamsConfig(
        {"application.id": f"bench-raw-{uuid.uuid4().hex[:8]}", "bootstrap.servers": bootstrap, **CLIENT_OVERRIDES}
    )
    ckw = consumer_kwargs(config, "main.consumer")
    consumer = AIOKafkaConsumer(input_topic, **ckw)
    producer = AIOKafkaProducer(**producer_kwargs(config))
    probe = Probe()
    error: list[BaseException] = []
    stats = {"poll_count": 0, "commit_count": 0, "commit_ms": 0.0}

    async def loop() -> None:
        offsets: dict[TopicPartition, int] = {}
        futures: list[asyncio.Future[Any]] = []
        send = producer.send
        interval = COMMIT_INTERVAL_MS / 1000
        last_commit = time.perf_counter()
        count = 0

        async def commit() -> None:
            started = time.perf_counter()
            await producer.flush()
            for future in futures:
                future.result()  # raises a delivery error
            futures.clear()
            if offsets:
                await consumer.commit(dict(offsets))
            stats["commit_count"] += 1
            stats["commit_ms"] += (time.perf_counter() - started) * 1000

        while count < n:
            batch = await consumer.getmany(timeout_ms=100, max_records=1000)
            stats["poll_count"] += 1
            if batch and probe.first_at is None:
                probe.first_at, probe.first_cpu = time.perf_counter(), time.process_time()
            for tp, messages in batch.items():
                if batched:
                    builder = producer.create_batch()
                    for m in messages:
                        value = m.value.decode().upper().encode()
                        if builder.append(timestamp=m.timestamp, key=m.key, value=value, headers=[]) is None:
                            builder.close()
                            futures.append(await producer.send_batch(builder, output, partition=tp.partition))
                            builder = producer.create_batch()
                            builder.append(timestamp=m.timestamp, key=m.key, value=value, headers=[])
                    builder.close()
                    futures.append(await producer.send_batch(builder, output, partition=tp.partition))
                else:
                    for m in messages:
                        value = m.value.decode().upper().encode()
                        futures.append(await send(output, value=value, key=m.key, timestamp_ms=m.timestamp))
                offsets[tp] = messages[-1].offset + 1
                count += len(messages)
            if time.perf_counter() - last_commit >= interval:
                await commit()
                last_commit = time.perf_counter()
        probe.last_at = time.perf_counter()
        await commit()

    async def guarded() -> None:
        try:
            await loop()
        except BaseException as exc:  # surfaced through the watcher
            error.append(exc)
            raise

    watcher = OutputWatcher(bootstrap, output, n, watch_s)
    async with profile or contextlib.nullcontext():
        await producer.start()
        await consumer.start()
        task = asyncio.create_task(guarded())
        try:
            done_at = await watcher.run(lambda: error[0] if error else None)
            await task
        finally:
            if not task.done():
                task.cancel()
            await consumer.stop()
            await producer.stop()
    assert probe.first_at is not None and probe.last_at is not None
    await check_upper_case(bootstrap, output)
    return Result("raw-batch" if batched else "raw", n, done_at - probe.first_at, watcher.last_total, probe.last_at - probe.first_at,
                  watcher.done_cpu - probe.first_cpu,
                  {"poll_count": stats["poll_count"], "commit_count": stats["commit_count"],
                   "commit_latency_ms_avg": stats["commit_ms"] / max(1, stats["commit_count"]),
                   "watch_polls": watcher.polls})


# -- (b) pass-through and (c) word count on KafkaStreams ------------------------------------------


class UpperCase(Processor[str, str, str, str]):
    """Forward the record with its value upper-cased (and note when the first record came)."""

    probe: Probe

    def init(self, context: Any) -> None:
        self.context = context

    def process(self, record: Record[str, str]) -> None:
        probe = self.probe
        if probe.first_at is None:
            probe.first_at, probe.first_cpu = time.perf_counter(), time.process_time()
        self.context.forward(record.with_value(record.value.upper()))


class WordCount(Processor[str, str, str, int]):
    """Count every word of a line in the store and forward its new count (no cache: every update)."""

    probe: Probe

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: Record[str, str]) -> None:
        probe = self.probe
        if probe.first_at is None:
            probe.first_at, probe.first_cpu = time.perf_counter(), time.process_time()
        store, forward, timestamp = self.store, self.context.forward, record.timestamp
        for word in record.value.split():
            count = (store.get(word) or 0) + 1
            store.put(word, count)
            forward(Record(word, count, timestamp))


def passthrough_topology(input_topic: str, output: str, probe: Probe) -> Topology:
    def supplier() -> UpperCase:
        p = UpperCase()
        p.probe = probe
        return p

    return (
        Topology()
        .add_source("SOURCE", input_topic, key_serde=Serdes.String(), value_serde=Serdes.String())
        .add_processor("UPPER", supplier, "SOURCE")
        .add_sink("SINK", output, "UPPER", key_serde=Serdes.String(), value_serde=Serdes.String())
    )


def wordcount_topology(input_topic: str, output: str, probe: Probe, persistent: bool) -> Topology:
    def supplier() -> WordCount:
        p = WordCount()
        p.probe = probe
        return p

    store = Stores.persistent_key_value_store("counts") if persistent else Stores.in_memory_key_value_store("counts")
    return (
        Topology()
        .add_source("SOURCE", input_topic, key_serde=Serdes.String(), value_serde=Serdes.String())
        .add_processor("COUNT", supplier, "SOURCE")
        .add_state_store(Stores.key_value_store_builder(store, Serdes.String(), Serdes.Long()), "COUNT")
        .add_sink("SINK", output, "COUNT", key_serde=Serdes.String(), value_serde=Serdes.Long())
    )


async def run_streams(
    variant: str,
    bootstrap: str,
    input_topic: str,
    n: int,
    expected_outputs: int,
    watch_s: float,
    state_root: Path,
    build: Callable[[str, Probe], Topology],
    profile: contextlib.AbstractAsyncContextManager[None] | None = None,
) -> Result:
    output = f"bench-{variant}-out-{uuid.uuid4().hex[:8]}"
    await create_topics(bootstrap, [output], PARTITIONS)
    probe = Probe()
    app_id = f"bench-{variant}-{uuid.uuid4().hex[:8]}"
    streams = KafkaStreams(
        build(output, probe),
        {
            "application.id": app_id,
            "bootstrap.servers": bootstrap,
            "processing.guarantee": "at_least_once",
            "commit.interval.ms": COMMIT_INTERVAL_MS,
            "state.dir": str(state_root / app_id),
            **CLIENT_OVERRIDES,
        },
    )

    def failed() -> BaseException | None:
        if streams.errors:
            return streams.errors[0]
        if streams.state in (State.ERROR, State.PENDING_ERROR, State.NOT_RUNNING):
            return RuntimeError(f"{variant}: KafkaStreams stopped ({streams.state.name})")
        return None

    watcher = OutputWatcher(bootstrap, output, expected_outputs, watch_s)
    processed_at: list[float] = []

    async def processed_watch() -> None:
        # In-process and cheap: when did the thread count N processed records?
        while True:
            if sum(t["processed_records"] for t in streams.metrics()["threads"]) >= n:
                processed_at.append(time.perf_counter())
                return
            await asyncio.sleep(0.01)

    try:
        async with profile or contextlib.nullcontext():
            await streams.start()
            side = asyncio.create_task(processed_watch())
            try:
                done_at = await watcher.run(failed)
                await asyncio.wait_for(side, 30)
                metrics = streams.metrics()
            finally:
                side.cancel()
    finally:
        await streams.close(timeout=30)
    assert probe.first_at is not None
    if variant == "passthrough":
        await check_upper_case(bootstrap, output)
    thread = metrics["threads"][0]
    extra = {k: thread[k] for k in ("poll_count", "commit_count", "pause_count", "resume_count", "commit_latency_ms_avg")}
    extra["watch_polls"] = watcher.polls
    return Result(variant, n, done_at - probe.first_at, watcher.last_total, processed_at[0] - probe.first_at,
                  watcher.done_cpu - probe.first_cpu, extra)


# -- main -----------------------------------------------------------------------------------------


def print_table(results: list[Result], baseline: float | None, words_per_line: int) -> None:
    print()
    print("| variant | records | seconds | records/s | ratio to raw | ratio to raw-batch | CPU us/record | CPU ratio | notes |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    base_cpu = next((r.cpu_s / r.records for r in results if r.variant == "raw"), None)
    batch_rate = next((r.rate for r in results if r.variant == "raw-batch"), None)
    for r in results:
        ratio = f"{r.rate / baseline:.2f}x" if baseline else "-"
        ratio_batch = f"{r.rate / batch_rate:.2f}x" if batch_rate else "-"
        notes = ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.extra.items())
        if r.variant.startswith("wc"):
            notes = f"{r.rate * words_per_line:,.0f} words/s, {r.outputs:,} counts out; " + notes
        cpu = r.cpu_s / r.records
        cpu_ratio = f"{cpu / base_cpu:.2f}x" if base_cpu else "-"
        notes = f"processed in {r.processed_s:.2f} s; " + notes if r.processed_s is not None else notes
        print(f"| {r.variant} | {r.records:,} | {r.seconds:.2f} | {r.rate:,.0f} | {ratio} | {ratio_batch} | {cpu * 1e6:.1f} | {cpu_ratio} | {notes} |")


LOAD_AT_START = os.getloadavg()


async def main_async(args: argparse.Namespace, broker: LocalKafkaBroker, state_root: Path) -> None:
    bootstrap = broker.bootstrap_servers
    rnd = random.Random(42)
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; choose from {VARIANTS}")
    n, wc_n = args.records, args.wc_records or max(1, args.records // 4)
    pass_topic, wc_topic = "bench-input", "bench-lines"
    await create_topics(bootstrap, [pass_topic, wc_topic], PARTITIONS)
    words_total = 0
    if {"raw", "raw-batch", "passthrough"} & set(variants):
        seconds = await fill(bootstrap, pass_topic, passthrough_records(n, args.value_bytes, rnd))
        print(f"filled {pass_topic}: {n:,} records of {args.value_bytes} B in {seconds:.1f} s", flush=True)
    if any(v.startswith("wc") for v in variants):
        lines, words_total = wordcount_lines(wc_n, args.words_per_line, make_vocabulary(args.vocabulary, rnd), rnd)
        seconds = await fill(bootstrap, wc_topic, lines)
        print(f"filled {wc_topic}: {wc_n:,} lines of {args.words_per_line} words in {seconds:.1f} s", flush=True)

    watch_s = args.watch_ms / 1000
    runs: dict[str, list[Result]] = {v: [] for v in variants}
    profiled: list[str] = []
    for round_ in range(args.repeat):
        for variant in variants:
            around = None
            if args.profile and variant in args.profile_variants.split(",") and round_ == 0:
                around = measurement_profiler(args.profiler, Path(f"{args.profile}.{variant}"), profiled)

            if variant in ("raw", "raw-batch"):
                result = await run_raw(bootstrap, pass_topic, n, watch_s, around, batched=variant == "raw-batch")
            elif variant == "passthrough":
                result = await run_streams(
                    variant, bootstrap, pass_topic, n, n, watch_s, state_root,
                    lambda out, probe: passthrough_topology(pass_topic, out, probe), around,
                )
            else:
                persistent = variant == "wc-sqlite"
                result = await run_streams(
                    variant, bootstrap, wc_topic, wc_n, words_total, watch_s, state_root,
                    lambda out, probe, p=persistent: wordcount_topology(wc_topic, out, probe, p), around,
                )
            runs[variant].append(result)
            print(f"round {round_ + 1} {variant}: {result.rate:,.0f} records/s ({result.seconds:.2f} s)", flush=True)

    # Median run of each variant; the ratio is to the median raw run of this same process.
    chosen = [sorted(rs, key=lambda r: r.rate)[len(rs) // 2] for rs in runs.values()]
    baseline = next((r.rate for r in chosen if r.variant == "raw"), None)
    if args.repeat > 1:
        for variant, rs in runs.items():
            line = ", ".join(f"{r.rate:,.0f}" for r in rs)
            print(f"{variant}: {line} records/s (median {statistics.median(r.rate for r in rs):,.0f})")
            for base in ("raw", "raw-batch"):
                if variant not in ("raw", "raw-batch") and base in runs:
                    ratios = [r.rate / b.rate for r, b in zip(rs, runs[base], strict=False)]
                    print(f"  ratio to the {base} run of the same round: {', '.join(f'{x:.2f}' for x in ratios)}"
                          f" (median {statistics.median(ratios):.2f})")
    print(f"\n{datetime.date.today()} {platform.python_implementation()} {platform.python_version()} "
          f"{os.cpu_count()} cores; --records {n} (word count: {wc_n} lines x {args.words_per_line} words), "
          f"value {args.value_bytes} B, {PARTITIONS} partitions, commit.interval.ms {COMMIT_INTERVAL_MS}, "
          f"producer overrides {CLIENT_OVERRIDES or 'none (linger.ms=100, acks=all)'}; "
          f"load average {LOAD_AT_START[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    print_table(chosen, baseline, args.words_per_line)
    for line in profiled:
        print(line)


@contextlib.asynccontextmanager
async def measurement_profiler(kind: str, path: Path, report: list[str]) -> AsyncIterator[None]:
    """Profiles one variant from just before its clients start to its last output; writes `path`.*.

    py-spy samples this process from outside (no overhead inside; CPU samples only, idle waits
    in epoll are left out): `<path>.raw`, collapsed stacks, summed by `--summarize <path>.raw`.
    pyinstrument runs inside and slows calls down, so its figures are only
    relative: `<path>.txt` and `<path>.html`.
    """
    if kind == "py-spy":
        import subprocess

        spy = Path(sys.executable).with_name("py-spy")
        out = path.with_name(path.name + ".raw")
        proc = subprocess.Popen(
            [str(spy), "record", "--pid", str(os.getpid()), "--rate", "500", "--format", "raw", "--output", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await asyncio.sleep(1.0)  # let py-spy attach before the clients start
        try:
            yield
        finally:
            proc.send_signal(signal.SIGINT)
            await asyncio.to_thread(proc.wait, 30)
            report.append(f"py-spy profile: {out}")
        return
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()
    try:
        yield
    finally:
        profiler.stop()
        text, html = path.with_name(path.name + ".txt"), path.with_name(path.name + ".html")
        text.write_text(profiler.output_text(unicode=True, color=False, show_all=False))
        html.write_text(profiler.output_html())
        report.append(f"pyinstrument profile: {text} and {html}")


# Where a sample's time goes: the first rule whose marker is in the stack wins.
PROFILE_CATEGORIES = (
    ("delivery callbacks (RecordCollectorImpl._on_delivery, per record)", ("_on_delivery",)),
    ("collector -> producer.send() per record (RecordCollectorImpl.send_pending)", ("RecordCollectorImpl.send_pending",)),
    ("producer.send() per record (raw loop)", ("AIOKafkaProducer.send (",)),
    ("commit: flush, offsets, checkpoints (StreamThread._commit)", ("StreamThread._commit", "run_raw.<locals>.loop.<locals>.commit")),
    ("buffering: deserialize, timestamp, RecordQueue (TaskManager.add_records)", ("TaskManager.add_records",)),
    ("processing: PartitionGroup, topology walk, serdes, sink (TaskManager.process)", ("TaskManager.process",)),
    ("consumer.getmany (aiokafka record objects)", ("AIOKafkaConsumer.getmany",)),
    ("raw loop body (decode, upper, encode)", ("run_raw.<locals>.loop",)),
    ("stream thread: flow control, punctuation, rest of the loop", ("StreamThread._run_loop",)),
    ("aiokafka sender: produce requests, socket writes, responses", ("aiokafka/producer/",)),
    ("aiokafka fetcher and connections: fetch requests, decoding", ("aiokafka/",)),
    ("bench watcher (end offsets, metrics)", ("OutputWatcher", "processed_watch")),
    ("event loop: select", ("EpollSelector.select",)),
)


def summarize_collapsed(path: Path, top: int = 25) -> None:
    """Print the inclusive and self shares of the functions in a py-spy raw (collapsed) profile."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    categories: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        if stack.startswith("Thread._bootstrap") or "_bootstrap (threading.py" in stack.split(";", 1)[0]:
            continue  # other threads (the executor's idle workers): not the event loop
        frames = [f.rsplit(" (", 1) for f in stack.split(";")]
        names = [f"{name} ({where.rsplit(':', 1)[0]})" if len(parts) == 2 else parts[0]
                 for parts in frames for name, where in [(parts[0], parts[-1])]]
        total += count
        label = next((lb for lb, markers in PROFILE_CATEGORIES if any(m in stack for m in markers)), "other (event loop, GC, ...)")
        categories[label] = categories.get(label, 0) + count
        for name in set(names):
            inclusive[name] = inclusive.get(name, 0) + count
        own[names[-1]] = own.get(names[-1], 0) + count
    print(f"{path}: {total} samples of the main thread (CPU only)\n\nby category:")
    for label, count in sorted(categories.items(), key=lambda kv: -kv[1]):
        print(f"  {100 * count / total:5.1f}%  {label}")
    print("\ninclusive:")
    for name, count in sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {100 * count / total:5.1f}%  {name}")
    print("\nself:")
    for name, count in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {100 * count / total:5.1f}%  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000, help="input records of raw and passthrough")
    parser.add_argument("--wc-records", type=int, default=0, help="input lines of the word counts (default records/4)")
    parser.add_argument("--words-per-line", type=int, default=10)
    parser.add_argument("--vocabulary", type=int, default=5000, help="distinct words")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {','.join(VARIANTS)}")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each variant (the table shows the median)")
    parser.add_argument("--watch-ms", type=int, default=50, help="how often the output end offsets are polled")
    parser.add_argument("--profile", metavar="PREFIX", help="profile the measurement of --profile-variants into PREFIX.<variant>.*")
    parser.add_argument("--profiler", choices=("py-spy", "pyinstrument"), default="py-spy",
                        help="py-spy (sampling from outside) or pyinstrument; pip install it into .venv first")
    parser.add_argument("--profile-variants", default="passthrough", help="comma-separated variants to profile")
    parser.add_argument("--jvm-c2", action=argparse.BooleanOptionalAction, default=True,
                        help="run the broker JVM with C2 (no -XX:TieredStopAtLevel=1); default on")
    parser.add_argument("--linger-ms", type=int, default=None,
                        help="producer linger.ms of raw and the KafkaStreams variants alike (default: the streams default, 100)")
    parser.add_argument("--acks", default=None, help="producer acks of raw and the KafkaStreams variants alike (default: all)")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--summarize", metavar="RAW", help="only print the top functions of a py-spy raw profile")
    args = parser.parse_args(argv)
    if args.summarize:
        summarize_collapsed(Path(args.summarize))
        return 0
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if not args.verbose:  # the broker's first-group and new-topic retries are expected noise
        logging.getLogger("aiokafka").setLevel(logging.ERROR)
    if args.linger_ms is not None:
        CLIENT_OVERRIDES["linger.ms"] = args.linger_ms
    if args.acks is not None:
        CLIENT_OVERRIDES["acks"] = args.acks
    from bench_broker import bench_broker  # this script's folder (sys.path[0])

    with tempfile.TemporaryDirectory(prefix="bench-runtime-") as tmp, bench_broker(Path(tmp) / "broker", c2=args.jvm_c2) as broker:
        asyncio.run(main_async(args, broker, Path(tmp) / "state"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
