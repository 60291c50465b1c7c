"""Word count throughput on KafkaStreams: at-least-once vs exactly-once.

    .venv/bin/python bench/wordcount_guarantees.py --lines 50000 --repeat 2   (the recorded run)
    .venv/bin/python bench/wordcount_guarantees.py --lines 5000              (a quick run)

One run starts its own local broker (LocalKafkaBroker in a temp dir, stopped at the end even on
error), fills one input topic once (`--lines` lines of `--words-per-line` words drawn Zipf-like
from a `--vocabulary`, `--partitions` partitions) and then runs app/wordcount.py's
`build_topology(input, output)` (the DSL word count: flat_map_values -> group_by -> count into
`word-count`, plus the 1-minute windowed count into `windowed-word-count`; two repartition topics,
three sub-topologies, DSL caching on with the default 10 MB cache) once per variant, each with
its own application.id, output topic and state dir over the same input:

  alos          processing.guarantee=at_least_once, commit.interval.ms default (30 s)
  alos-100ms    at_least_once with commit.interval.ms=100 (the fair comparison)
  eos           exactly_once_v2, commit.interval.ms default under exactly-once (100 ms);
                one transactional producer per task (this runtime's exactly-once)

Timing: from the first processed record (the thread's `processed_records` metric leaves 0;
polled every 5 ms) to the moment every record is processed: `processed_records` reaches
lines + 2 x words (each line once in sub-topology 0, each word once in each of the two
aggregating sub-topologies). At that point the `word-count` store holds the final counts, which
is checked afterwards with a get per word (the check is not timed; gets do not flush the cache).
Under exactly-once a repartition record is only readable once the transaction that wrote it
committed, so the commits are on the measured path there; under at-least-once they are not.
Also shown: the time from the end of processing to the next completed commit ("+commit"), i.e.
when the results are durable / visible downstream, which is mostly the commit interval.

Throughput = input lines / seconds (words/s = that x words per line). The ratio is EOS / ALOS
for each of the two at-least-once variants.
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
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka import AIOKafkaProducer

from app.wordcount import STORE, build_topology
from bench.bench_broker import bench_broker
from streams_core.clients import InternalTopicManager, NewTopicSpec, create_admin
from streams_core.config import StreamsConfig
from streams_core.runtime.kafka_streams import KafkaStreams, State

VARIANTS: dict[str, dict[str, Any]] = {
    "alos": {"processing.guarantee": "at_least_once"},
    "alos-100ms": {"processing.guarantee": "at_least_once", "commit.interval.ms": 100},
    "eos": {"processing.guarantee": "exactly_once_v2"},
}
CLIENT_OVERRIDES: dict[str, Any] = {}
"""Given to every variant alike (`--linger-ms`); empty: the library's client defaults."""
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
LOAD_AT_START = os.getloadavg()[0]


def make_lines(n: int, per_line: int, vocabulary_size: int, seed: int = 42) -> tuple[list[bytes], Counter[str]]:
    """n lines of lower-case words, Zipf-like over the vocabulary; and the expected counts."""
    rnd = random.Random(seed)
    vocabulary: set[str] = set()
    while len(vocabulary) < vocabulary_size:
        vocabulary.add("".join(rnd.choice(_LETTERS) for _ in range(rnd.randint(3, 9))))
    ordered = sorted(vocabulary)
    weights = [1.0 / (rank + 1) for rank in range(len(ordered))]
    picked = rnd.choices(ordered, weights=weights, k=n * per_line)
    lines = [" ".join(picked[i * per_line : (i + 1) * per_line]).encode() for i in range(n)]
    return lines, Counter(picked)


async def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = create_admin(StreamsConfig({"application.id": "bench-admin", "bootstrap.servers": bootstrap}))
    await admin.start()
    try:
        await InternalTopicManager(admin).ensure_topics([NewTopicSpec(name, partitions) for name in names])
    finally:
        await admin.close()


async def fill(bootstrap: str, topic: str, lines: list[bytes], timestamps: list[int] | None = None) -> float:
    """Produce the lines (keys line-<i>, so they spread over the partitions), with `timestamps` if
    given (else the producer's time); returns seconds."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, max_batch_size=256 * 1024)
    await producer.start()
    started = time.perf_counter()
    try:
        stamps = timestamps if timestamps is not None else [None] * len(lines)
        futures = [await producer.send(topic, value=line, key=b"line-%d" % i, timestamp_ms=ts)
                   for i, (line, ts) in enumerate(zip(lines, stamps, strict=True))]
        await producer.flush()
        for future in futures:
            future.result()
    finally:
        await producer.stop()
    return time.perf_counter() - started


@dataclass
class Result:
    variant: str
    lines: int
    seconds: float  # first processed record -> all processed
    to_commit: float | None  # all processed -> next completed commit
    startup: float  # start() -> first processed record
    cpu: float  # CPU seconds of this process over `seconds`
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.lines / self.seconds


def _totals(streams: KafkaStreams) -> tuple[int, int]:
    threads = streams.metrics()["threads"]
    return sum(t["processed_records"] for t in threads), sum(t["commit_count"] for t in threads)


async def run_variant(
    variant: str, bootstrap: str, input_topic: str, lines: int, expected: Counter[str], partitions: int,
    state_root: Path, commit_wait_s: float, profile: Path | None,
) -> Result:
    app_id = f"bench-wc-{variant}-{uuid.uuid4().hex[:8]}"
    output = f"{app_id}-out"
    await create_topics(bootstrap, [output], partitions)
    target = lines + 2 * sum(expected.values())
    streams = KafkaStreams(
        build_topology(input_topic, output),
        {"application.id": app_id, "bootstrap.servers": bootstrap, "state.dir": str(state_root / app_id),
         **VARIANTS[variant], **CLIENT_OVERRIDES},
    )

    def check_alive() -> None:
        if streams.errors:
            raise streams.errors[0]
        if streams.state in (State.ERROR, State.PENDING_ERROR, State.NOT_RUNNING, State.PENDING_SHUTDOWN):
            raise RuntimeError(f"{variant}: KafkaStreams stopped ({streams.state.name})")

    started = time.perf_counter()
    async with pyinstrument(profile):
        await streams.start()
        try:
            while True:  # first processed record
                check_alive()
                if streams.state is State.RUNNING and _totals(streams)[0] > 0:
                    first, first_cpu = time.perf_counter(), time.process_time()
                    break
                await asyncio.sleep(0.005)
            while True:  # everything processed
                check_alive()
                processed, commits_at_done = _totals(streams)
                if processed >= target:
                    done, done_cpu = time.perf_counter(), time.process_time()
                    break
                await asyncio.sleep(0.005)
        except BaseException:
            await streams.close(timeout=30)
            raise
    # not timed any more: correctness, then the next commit
    try:
        store = streams.store(STORE)
        wrong = {w: (store.get(w), c) for w, c in expected.items() if store.get(w) != c}
        if wrong:
            sample = dict(list(wrong.items())[:5])
            raise RuntimeError(f"{variant}: {len(wrong)} words have wrong counts (got, expected): {sample}")
        if processed != target:
            raise RuntimeError(f"{variant}: processed {processed} records, expected {target}")
        to_commit = None
        deadline = done + commit_wait_s
        while time.perf_counter() < deadline:
            check_alive()
            if _totals(streams)[1] > commits_at_done:
                to_commit = time.perf_counter() - done
                break
            await asyncio.sleep(0.005)
        thread = streams.metrics()["threads"][0]
    finally:
        await streams.close(timeout=30)
    extra = {k: thread[k] for k in ("poll_count", "commit_count", "commit_latency_ms_avg", "produced_records")}
    extra["tasks"] = len(thread["tasks"])
    return Result(variant, lines, done - first, to_commit, first - started, done_cpu - first_cpu, extra)


@contextlib.asynccontextmanager
async def pyinstrument(path: Path | None) -> AsyncIterator[None]:
    """Profile the block with pyinstrument (installed into .venv by hand) into path.txt/.html."""
    if path is None:
        yield
        return
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.001, async_mode="disabled")
    profiler.start()
    try:
        yield
    finally:
        profiler.stop()
        path.with_name(path.name + ".txt").write_text(profiler.output_text(unicode=True, color=False, show_all=False))
        path.with_name(path.name + ".html").write_text(profiler.output_html())
        print(f"pyinstrument profile: {path.name}.txt/.html", flush=True)


def run_line(args: argparse.Namespace, settings: str, load_at_start: float) -> str:
    """The line under a run's table: date, Python, cores, the input's flags, `settings`, load averages."""
    return (
        f"\n{datetime.date.today()} {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores; --lines {args.lines} --words-per-line {args.words_per_line} "
        f"--vocabulary {args.vocabulary} --partitions {args.partitions} --repeat {args.repeat}; {settings}; "
        f"load average {load_at_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end\n"
    )


async def filled_input(
    args: argparse.Namespace, bootstrap: str, known: Iterable[str], prefix: str
) -> tuple[list[str], str, Counter[str]]:
    """The variants asked for (`--variants`, checked against `known`), and an input topic filled with
    `--lines` lines (`--words-per-line`, `--vocabulary`, `--partitions`) with the expected counts."""
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(known)
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; choose from {list(known)}")
    input_topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    await create_topics(bootstrap, [input_topic], args.partitions)
    lines, expected = make_lines(args.lines, args.words_per_line, args.vocabulary)
    seconds = await fill(bootstrap, input_topic, lines)
    print(f"filled {input_topic}: {args.lines:,} lines, {sum(expected.values()):,} words ({len(expected):,} distinct), "
          f"{args.partitions} partitions, in {seconds:.1f} s", flush=True)
    return variants, input_topic, expected


async def main_async(args: argparse.Namespace, bootstrap: str) -> None:
    variants, input_topic, expected = await filled_input(args, bootstrap, VARIANTS, "bench-wc-lines")
    runs: dict[str, list[Result]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="bench-wc-state-") as state_dir:
        for round_ in range(args.repeat):
            for variant in variants:
                profile = None
                if args.profile and variant == args.profile_variant and round_ == 0:
                    profile = Path(f"{args.profile}.{variant}")
                result = await run_variant(variant, bootstrap, input_topic, args.lines, expected, args.partitions,
                                           Path(state_dir), args.commit_wait, profile)
                runs[variant].append(result)
                commit = (f"{result.to_commit:.2f} s" if result.to_commit is not None
                          else f"none within {args.commit_wait:.0f} s")
                print(f"round {round_ + 1} {variant}: {result.rate:,.0f} lines/s ({result.seconds:.2f} s; "
                      f"+commit {commit}; start {result.startup:.1f} s; {result.extra})", flush=True)

    chosen = {v: sorted(rs, key=lambda r: r.rate)[len(rs) // 2] for v, rs in runs.items()}
    print(run_line(args, f"client overrides {CLIENT_OVERRIDES or 'none (linger.ms=100, acks=all)'}", LOAD_AT_START))
    print("| variant | commit.interval.ms | lines/s | words/s | seconds | +commit s | CPU s | commits | rounds, lines/s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for variant, r in chosen.items():
        interval = VARIANTS[variant].get("commit.interval.ms", "30000 (default)" if variant == "alos" else "100 (default)")
        commit = f"{r.to_commit:.2f}" if r.to_commit is not None else "-"
        rounds = ", ".join(f"{x.rate:,.0f}" for x in runs[variant])
        print(f"| {variant} | {interval} | {r.rate:,.0f} | {r.rate * args.words_per_line:,.0f} | {r.seconds:.2f} | "
              f"{commit} | {r.cpu:.2f} | {r.extra['commit_count']} | {rounds} |")
    if "eos" in runs:
        print()
        for base in ("alos", "alos-100ms"):
            if base in runs:
                same_round = [e.rate / a.rate for e, a in zip(runs["eos"], runs[base], strict=False)]
                print(f"EOS / {base}: {chosen['eos'].rate / chosen[base].rate:.2f} (medians); same round: "
                      f"{', '.join(f'{x:.2f}' for x in same_round)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=50_000, help="input lines (default 50000)")
    parser.add_argument("--words-per-line", type=int, default=8)
    parser.add_argument("--vocabulary", type=int, default=5000, help="distinct words (default 5000)")
    parser.add_argument("--partitions", type=int, default=2, help="input partitions (default 2: 6 tasks)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {','.join(VARIANTS)}")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every variant (the table shows the median)")
    parser.add_argument("--commit-wait", type=float, default=35.0,
                        help="how long to wait for the commit after processing (default 35 s)")
    parser.add_argument("--linger-ms", type=int, default=None,
                        help="producer linger.ms of every variant (default: the library's, 100)")
    parser.add_argument("--profile", metavar="PREFIX", help="pyinstrument profile of --profile-variant (round 1) into PREFIX.<variant>.txt/html")
    parser.add_argument("--profile-variant", default="eos")
    parser.add_argument("--jvm-c2", action=argparse.BooleanOptionalAction, default=True,
                        help="run the broker JVM with C2 (drop -XX:TieredStopAtLevel=1); default on")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if args.linger_ms is not None:
        CLIENT_OVERRIDES["linger.ms"] = args.linger_ms
    with bench_broker(c2=args.jvm_c2) as broker:
        asyncio.run(main_async(args, broker.bootstrap_servers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
