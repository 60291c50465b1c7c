"""Benchmarks against the peers: one broker, one seeded input, each system in its own process.

    make bench-peers                                   (installs, full run, JSON + PNG; ~25 min)
    .venv/bin/python bench/peers/harness.py --quick    (small input, one round; ~5 min once installed)
        [--lines N] [--rounds R] [--systems a,b] [--workloads a,b] [--run-timeout S] [--out DIR]

Starts a local broker (LocalKafkaBroker 4.3.1, C2 on), fills one 4-partition input topic with
seeded lines (keys `line-<i>`, 10 upper-case words a line Zipf-like from 5,000 words, timestamps
spread over 8 s across a minute boundary), then runs every (workload, system) pair, round after
round. Each run gets a fresh application id / group, state dir and output topic; the output topic
is created with `message.timestamp.type=LogAppendTime`, so the broker stamps when each result was
written. A run ends when the system's group has committed the input (and its own repartition
topics) to their ends and the output has not grown for `--quiet` seconds, or when the system exits
by itself (the aiokafka loops, Spark); then SIGTERM, and the output is read back (not timed):

  - correct: the last value per key equals the truth computed here, and no other key appears;
  - from start: the last output's LogAppendTime minus the moment the process was launched;
  - from first write: the same minus the first record the system wrote to its repartition topic
    (end offsets polled every 0.1 s), or the first output record's LogAppendTime without one;
  - output span: the last minus the first LogAppendTime of the output;
  - CPU seconds (user + system, the process and its children) and peak RSS of the process tree.

Medians of the rounds go to bench/results/peers-<date>.json with versions, settings and load
averages; bench/peers/chart.py renders the PNG. Systems, settings and results: bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import logging
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient  # noqa: E402
from runtime_throughput import make_vocabulary, wordcount_lines  # noqa: E402

from streams_core.clients import InternalTopicManager, NewTopicSpec, create_admin  # noqa: E402
from streams_core.config import StreamsConfig  # noqa: E402

PARTITIONS = 4
WORDS_PER_LINE = 10
VOCABULARY = 5000
WINDOW_MS = 60_000
CACHE_BYTES = 10 * 1024 * 1024
COMMIT_MS = 1000
SETTINGS = {
    "partitions": PARTITIONS, "words_per_line": WORDS_PER_LINE, "vocabulary": VOCABULARY, "seed": 42,
    "commit_interval_ms": COMMIT_MS, "producer": "acks=all, linger.ms=100, batch.size=16384, compression none",
    "windowed": "1-minute tumbling windows, grace 10 s (Faust: none), input timestamps within 8 s",
    "cache": "wc: 0 bytes; wc-cache: 10 MB (the default) where the system has a record cache",
    "processing_guarantee": "at-least-once unless the system's name says exactly-once",
}
WORKLOADS = ("passthrough", "wc", "wc-cache", "windowed")


@dataclass(frozen=True)
class System:
    """A peer: how to launch it for a workload, and what it runs."""

    name: str
    workloads: tuple[str, ...]
    exits_itself: bool = False  # ends on its own once done (no group to watch)
    transactional: bool = False  # its committed offsets sit one below a transaction marker

    def command(self, workload: str, run: RunContext) -> list[str]:
        args = [run.bootstrap, run.app_id, run.input, run.output, workload.removesuffix("-cache"), run.state_dir,
                str(COMMIT_MS)]
        cache = str(CACHE_BYTES if workload == "wc-cache" else 0)
        ours = [sys.executable, str(HERE / "run_ours.py"), *args, "--cache-bytes", cache]
        if self.name.startswith("aiokafka"):
            return [sys.executable, str(HERE / "run_raw.py"), run.bootstrap, run.input, run.output, str(run.records),
                    str(COMMIT_MS), self.name.removeprefix("aiokafka-")]
        if self.name == "ours-alos":
            return ours
        if self.name == "ours-alos-2w":
            return [*ours, "--workers", "2"]
        if self.name == "ours-eos":
            return [*ours, "--guarantee", "exactly_once_v2"]
        if self.name == "spark":
            return [*ours, "--engine", "spark"]
        if self.name == "quix":
            return [str(run.pythons["quix"]), str(HERE / "run_quix.py"), *args]
        if self.name == "faust":
            return [str(run.pythons["faust"]), str(HERE / "run_faust.py"), *args]
        if self.name == "kstreams":
            return ["java", "-Xms256m", "-Xmx1g", "-cp", run.classpath, "PeersBench", *args[:5], cache, *args[5:]]
        raise ValueError(self.name)


SYSTEMS = {s.name: s for s in (
    System("aiokafka-naive", ("passthrough",), exits_itself=True),
    System("aiokafka-batch", ("passthrough",), exits_itself=True),
    System("ours-alos", WORKLOADS),
    System("ours-alos-2w", WORKLOADS),  # two stream threads as worker processes (stream.threads.mode=process)
    System("ours-eos", WORKLOADS, transactional=True),
    System("kstreams", WORKLOADS),
    System("quix", ("passthrough", "wc", "windowed")),
    System("faust", ("passthrough", "wc", "windowed")),
    # Spark emits one result per key and micro-batch, as a record cache does: its row is wc-cache.
    System("spark", ("wc-cache",), exits_itself=True),
)}


@dataclass
class RunContext:
    bootstrap: str
    app_id: str
    input: str
    output: str
    state_dir: str
    records: int
    pythons: dict[str, Path]
    classpath: str


@dataclass
class Input:
    """The seeded input and the truth of every workload."""

    records: list[tuple[bytes, bytes, int]]  # key, value, timestamp ms
    words: int
    truth: dict[str, dict[str, Any]] = field(default_factory=dict)


def make_input(lines: int, now_ms: int) -> Input:
    """`lines` lines of upper-case words with timestamps over 8 s across a minute boundary, and the truths."""
    rnd = random.Random(42)
    pairs, words = wordcount_lines(lines, WORDS_PER_LINE, make_vocabulary(VOCABULARY, rnd), rnd)
    boundary = now_ms // WINDOW_MS * WINDOW_MS
    records = [(key, value.upper(), boundary - 4000 + i * 8000 // max(1, lines)) for i, (key, value) in enumerate(pairs)]
    counts: Counter[str] = Counter()
    windowed: Counter[str] = Counter()
    for _, value, ts in records:
        for word in value.decode().lower().split():
            counts[word] += 1
            windowed[f"{word}@{ts // WINDOW_MS * WINDOW_MS}"] += 1
    data = Input(records, words)
    data.truth = {"passthrough": {k.decode(): v for k, v, _ in records}, "wc": dict(counts), "wc-cache": dict(counts),
                  "windowed": dict(windowed)}
    return data


def decode_value(workload: str, raw: bytes | None) -> Any:
    """Output values as the truth holds them: bytes for pass-through, else an int (decimal text or a long)."""
    if workload == "passthrough" or raw is None:
        return raw
    return int(raw) if raw.isdigit() else int.from_bytes(raw, "big", signed=True)


def check_output(workload: str, truth: dict[str, Any], last: dict[str, Any]) -> tuple[bool, dict[str, int]]:
    """Whether the last value per key equals the truth; with counts of wrong, missing and extra keys."""
    missing = sum(1 for k in truth if k not in last)
    wrong = sum(1 for k, v in last.items() if k in truth and v != truth[k])
    extra = sum(1 for k in last if k not in truth)
    return missing == wrong == extra == 0, {"missing": missing, "wrong": wrong, "extra": extra}


class TreeSampler:
    """Peak RSS and CPU of a process and its descendants, from /proc (children may outlive a wait4)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.cpu_ticks: dict[int, int] = {}
        self.peak_rss = 0
        self._page, self._hz = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")

    def sample(self) -> None:
        stats: dict[int, tuple[int, int, int]] = {}  # pid -> ppid, cpu ticks, rss pages
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[21]))
        tree, frontier = set(), {self.pid}
        while frontier:
            tree |= frontier
            frontier = {p for p, (ppid, _, _) in stats.items() if ppid in frontier} - tree
        rss = 0
        for pid in tree & stats.keys():
            _, ticks, pages = stats[pid]
            self.cpu_ticks[pid] = max(self.cpu_ticks.get(pid, 0), ticks)
            rss += pages
        self.peak_rss = max(self.peak_rss, rss * self._page)

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu_ticks.values()) / self._hz


async def create_topics(bootstrap: str, specs: list[NewTopicSpec]) -> None:
    admin = create_admin(StreamsConfig({"application.id": "peers-admin", "bootstrap.servers": bootstrap}))
    await admin.start()
    try:
        await InternalTopicManager(admin).ensure_topics(specs)
    finally:
        await admin.close()


async def fill(bootstrap: str, topic: str, records: list[tuple[bytes, bytes, int]]) -> float:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, max_batch_size=256 * 1024)
    await producer.start()
    started = time.perf_counter()
    try:
        futures = [await producer.send(topic, value=v, key=k, timestamp_ms=ts) for k, v, ts in records]
        await producer.flush()
        for future in futures:
            future.result()
    finally:
        await producer.stop()
    return time.perf_counter() - started


async def read_output(bootstrap: str, topic: str, workload: str) -> dict[str, Any]:
    """The last value per key, the record count and the first and last LogAppendTime of a topic."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed")
    await consumer.start()
    last: dict[str, Any] = {}
    count, first_ts, last_ts, log_append = 0, None, None, True
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        while any([await consumer.position(tp) < ends[tp] - 1 for tp in tps]):  # -1: a final commit marker
            batch = await consumer.getmany(timeout_ms=1000, max_records=100_000)
            if not batch and all([await consumer.position(tp) >= ends[tp] - 1 for tp in tps]):
                break
            for records in batch.values():
                for r in records:
                    count += 1
                    log_append &= r.timestamp_type == 1
                    first_ts = r.timestamp if first_ts is None else min(first_ts, r.timestamp)
                    last_ts = r.timestamp if last_ts is None else max(last_ts, r.timestamp)
                    last[r.key.decode() if r.key is not None else ""] = decode_value(workload, r.value)
    finally:
        await consumer.stop()
    return {"last": last, "count": count, "first_ms": first_ts, "last_ms": last_ts, "log_append_time": log_append}


class Watcher:
    """Polls the broker while a system runs: its repartition topics' first write, its commits, its output."""

    def __init__(self, bootstrap: str, run: RunContext, input_ends: dict[TopicPartition, int], slack: int) -> None:
        self.bootstrap, self.run, self.input_ends, self.slack = bootstrap, run, input_ends, slack
        self.repartition_first: float | None = None
        self.repartition_topics: list[str] = []
        self.committed_input = 0
        self.output_total = 0

    async def __aenter__(self) -> Watcher:
        self.consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        self.admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await self.consumer.start()
        await self.admin.start()
        self.before = set(await self.consumer.topics())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()
        await self.admin.close()

    async def poll_repartition(self) -> None:
        """Note when a repartition topic created by this run first holds a record."""
        if self.repartition_first is not None:
            return
        topics = [t for t in await self.consumer.topics() if "repartition" in t and t not in self.before]
        self.repartition_topics = topics
        tps = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]  # every system makes them 4 wide
        if tps and sum((await self.consumer.end_offsets(tps)).values()) > 0:
            self.repartition_first = time.time()

    async def caught_up(self) -> bool:
        """The group has committed the input and every partition it consumes at their ends."""
        committed = {tp: meta.offset for tp, meta in (await self.admin.list_consumer_group_offsets(self.run.app_id)).items()}
        self.committed_input = sum(max(0, committed.get(tp, 0)) for tp in self.input_ends)
        if any(committed.get(tp, -1) < end for tp, end in self.input_ends.items() if end > 0):
            return False
        others = [tp for tp in committed if tp not in self.input_ends]
        ends = await self.consumer.end_offsets(others) if others else {}
        return all(committed[tp] >= ends[tp] - self.slack for tp in others)

    async def output_size(self) -> int:
        tps = [TopicPartition(self.run.output, p) for p in range(PARTITIONS)]
        self.output_total = sum((await self.consumer.end_offsets(tps)).values())
        return self.output_total


async def run_one(system: System, workload: str, run: RunContext, data: Input, input_ends: dict[TopicPartition, int],
                  args: argparse.Namespace, logs: Path) -> dict[str, Any]:
    """Launch one system on one workload, wait until it is done, stop it, and measure and check its output."""
    await create_topics(run.bootstrap, [NewTopicSpec(run.output, PARTITIONS, {"message.timestamp.type": "LogAppendTime"})])
    log_path = logs / f"{run.app_id}.log"
    Path(run.state_dir).mkdir(parents=True)
    result: dict[str, Any] = {"system": system.name, "workload": workload, "app_id": run.app_id,
                              "load_average_at_start": os.getloadavg()[0], "log": str(log_path)}
    async with Watcher(run.bootstrap, run, input_ends, 1 if system.transactional else 0) as watcher:
        with open(log_path, "wb") as log:
            launched = time.time()
            proc = subprocess.Popen(system.command(workload, run), stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, cwd=ROOT)
        sampler = TreeSampler(proc.pid)
        spy = None
        if system.name == args.profile:  # py-spy samples from outside; it shares the 2 cores, so the run is slower
            raw = ROOT / ".cache" / "peers" / "profiles" / f"{run.app_id}.raw"
            raw.parent.mkdir(parents=True, exist_ok=True)
            spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(proc.pid),
                                    "--rate", "250", "--format", "raw", "--output", str(raw)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            result["profile"] = str(raw)
        waited = asyncio.create_task(asyncio.to_thread(os.wait4, proc.pid, 0))
        status, quiet_since, last_size, next_check = "ok", time.monotonic(), -1, 0.0
        try:
            while not waited.done():
                sampler.sample()
                await watcher.poll_repartition()
                now = time.monotonic()
                if time.time() - launched > args.run_timeout:
                    status = "timeout"
                    break
                if not system.exits_itself and now >= next_check:
                    next_check = now + 0.5
                    size = await watcher.output_size()
                    if size != last_size:
                        last_size, quiet_since = size, now
                    elif size > 0 and now - quiet_since >= args.quiet and await watcher.caught_up():
                        break
                await asyncio.wait([waited], timeout=0.1)
            if waited.done() and not system.exits_itself:
                status = "crashed"
        finally:
            if not waited.done():
                os.kill(proc.pid, signal.SIGTERM)
                done, _ = await asyncio.wait([waited], timeout=60)
                if not done:
                    os.killpg(proc.pid, signal.SIGKILL)
            _, wait_status, rusage = await waited
            proc.returncode = os.waitstatus_to_exitcode(wait_status)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the run (e.g. a Spark JVM)
            if spy is not None:
                await asyncio.to_thread(spy.wait, 30)  # it writes its profile when the process is gone
        if status == "timeout":
            with contextlib.suppress(Exception):
                await watcher.caught_up()
        elif system.exits_itself and proc.returncode != 0:
            status = f"exit {proc.returncode}"
        repartition_first = watcher.repartition_first
        result["repartition_topics"] = watcher.repartition_topics
        result["committed_input_lines"] = watcher.committed_input
    output = await read_output(run.bootstrap, run.output, workload)
    correct, diff = check_output(workload, data.truth[workload], output.pop("last"))
    units = len(data.records) if workload == "passthrough" else data.words
    cpu = max(rusage.ru_utime + rusage.ru_stime, sampler.cpu_seconds)
    result |= {"status": status, "correct": correct and status == "ok", "diff": diff, "exit_code": proc.returncode,
               "output_records": output["count"], "log_append_time": output["log_append_time"], "units": units,
               "cpu_seconds": cpu, "cpu_s_per_million_units": cpu / units * 1e6,
               "peak_rss_mb": sampler.peak_rss / 2**20}  # not ru_maxrss: a child inherits its parent's at fork
    if output["last_ms"] is not None and output["first_ms"] is not None:
        end = output["last_ms"] / 1000
        first = min(repartition_first or float("inf"), output["first_ms"] / 1000)  # polls lag the broker's stamp
        result["seconds"] = {"from_start": end - launched, "from_first_write": end - first,
                             "output_span": (output["last_ms"] - output["first_ms"]) / 1000}
        result["first_write_from"] = "repartition" if repartition_first is not None else "output"
    return result


async def run_all(args: argparse.Namespace, bootstrap: str, pythons: dict[str, Path], classpath: str,
                  work: Path) -> list[dict[str, Any]]:
    data = make_input(args.lines, int(time.time() * 1000))
    input_topic = f"peers-input-{uuid.uuid4().hex[:6]}"
    await create_topics(bootstrap, [NewTopicSpec(input_topic, PARTITIONS, {"message.timestamp.type": "CreateTime"})])
    seconds = await fill(bootstrap, input_topic, data.records)
    print(f"filled {input_topic}: {len(data.records):,} lines, {data.words:,} words in {seconds:.1f} s", flush=True)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    input_ends = await consumer.end_offsets([TopicPartition(input_topic, p) for p in range(PARTITIONS)])
    await consumer.stop()
    logs = ROOT / ".cache" / "peers" / "logs" / input_topic  # kept after the run, for a failed system's story
    logs.mkdir(parents=True, exist_ok=True)
    systems = [SYSTEMS[s] for s in args.systems.split(",")]
    workloads = args.workloads.split(",")
    results: list[dict[str, Any]] = []
    given_up: set[tuple[str, str]] = set()  # a timed-out pair is not run again
    for round_ in range(1, args.rounds + 1):
        for workload in workloads:
            for system in systems:
                if workload not in system.workloads or (system.name, workload) in given_up:
                    continue
                app_id = f"peers-{system.name}-{workload}-{round_}-{uuid.uuid4().hex[:6]}"
                run = RunContext(bootstrap, app_id, input_topic, f"{app_id}-out", str(work / "state" / app_id),
                                 len(data.records), pythons, classpath)
                result = await run_one(system, workload, run, data, input_ends, args, logs)
                result["round"] = round_
                results.append(result)
                if result["status"] == "timeout":
                    given_up.add((system.name, workload))
                secs = result.get("seconds", {})
                print(f"round {round_} {workload:11s} {system.name:15s} {result['status']:8s} "
                      f"correct={result['correct']!s:5s} from start {secs.get('from_start', 0):6.2f} s, "
                      f"first write {secs.get('from_first_write', 0):6.2f} s, span {secs.get('output_span', 0):6.2f} s, "
                      f"CPU {result['cpu_seconds']:5.1f} s, RSS {result['peak_rss_mb']:5.0f} MB, "
                      f"load {result['load_average_at_start']:.2f}", flush=True)
                if not result["correct"]:
                    print(f"    {result['diff']}, {result['output_records']} output records; log {result['log']}", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 lines, one round, 90 s per run at most")
    parser.add_argument("--lines", type=int, default=50_000, help="input lines of 10 words (500k words)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--run-timeout", type=float, default=90.0, help="seconds a run may take before it is stopped")
    parser.add_argument("--quiet", type=float, default=2.0, help="seconds without output growth that end a run")
    parser.add_argument("--profile", metavar="SYSTEM", help="py-spy a Python system's runs into .cache/peers/profiles/ "
                        "(pip install py-spy into .venv; summarize with bench/runtime_throughput.py --summarize RAW)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--render", type=Path, metavar="JSON", help="only redo a result's summary, Markdown and PNG")
    args = parser.parse_args(argv)
    if args.render:
        import install
        import report

        document = json.loads(args.render.read_text())
        document["summary"] = report.summarize(document["runs"])
        document["ratios"] = report.ratios(document["summary"])
        write_results(document, args.render.with_suffix(""), install.CACHE / "chart" / "bin" / "python")
        return 0
    if args.quick:
        args.lines, args.rounds, args.run_timeout = 2000, 1, 90.0
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    started, load_start = time.time(), os.getloadavg()

    import install

    from bench.bench_broker import bench_broker

    versions = install.install_all()
    pythons = {"quix": install.CACHE / "quix" / "bin" / "python", "faust": install.CACHE / "faust" / "bin" / "python"}
    classpath = install.kstreams_classpath()
    install_s = time.time() - started
    versions |= {"python": platform.python_version(), "aiokafka (ours)": install.installed_version(Path(sys.executable), "aiokafka"),
                 "pyspark": install.installed_version(Path(sys.executable), "pyspark"),
                 "java": subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]}
    print(f"installs ready in {install_s:.0f} s: {versions}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp, bench_broker(Path(tmp) / "broker") as broker:
        results = asyncio.run(run_all(args, broker.bootstrap_servers, pythons, classpath, Path(tmp)))
    import report

    date = datetime.date.today().isoformat()
    document = {
        "date": date, "started_utc": datetime.datetime.fromtimestamp(started, datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "processor": platform.processor()},
        "load_average": {"start": load_start, "end": os.getloadavg()}, "versions": versions,
        "settings": SETTINGS | {"lines": args.lines, "words": args.lines * WORDS_PER_LINE, "rounds": args.rounds,
                                "run_timeout_s": args.run_timeout, "quiet_s": args.quiet, "quick": args.quick},
        "install_seconds": install_s, "total_seconds": time.time() - started,
        "summary": report.summarize(results), "runs": results,
    }
    document["ratios"] = report.ratios(document["summary"])
    args.out.mkdir(parents=True, exist_ok=True)
    write_results(document, args.out / f"peers-{date}{'-quick' if args.quick else ''}", install.CACHE / "chart" / "bin" / "python")
    print(f"done in {time.time() - started:.0f} s", flush=True)
    return 0


def write_results(document: dict[str, Any], stem: Path, chart_python: Path) -> None:
    """<stem>.json, its Markdown tables <stem>.md and its chart <stem>.png (matplotlib in its own venv)."""
    import report

    json_path, md_path, png_path = (stem.with_name(stem.name + suffix) for suffix in (".json", ".md", ".png"))
    json_path.write_text(json.dumps(document, indent=1, default=str) + "\n")
    md_path.write_text(report.markdown(document))
    subprocess.run([str(chart_python), str(HERE / "chart.py"), str(json_path), str(png_path)], check=True)
    print(report.markdown(document))
    print(f"wrote {json_path}, {md_path.name} and {png_path.name}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
