"""Word count on one instance: one stream thread against two, in-process or as worker processes.

    flock /tmp/bench.lock .venv/bin/python bench/stream_threads.py --lines 100000 --repeat 3   (the recorded run)
    .venv/bin/python bench/stream_threads.py --lines 5000                                     (a quick run)

One run starts its own local broker, fills one input topic once (`--lines` lines of
`--words-per-line` words, Zipf-like over `--vocabulary`, `--partitions` partitions) and runs
app/wordcount.py's plain word count (`build_topology(..., windowed=False)`: flat_map_values ->
group_by -> count, one repartition topic, two sub-topologies, default 10 MB cache) once per
variant and round, in the order given, each with its own application.id, output topic and state
dir over the same input:

  inline-1     num.stream.threads=1 (the default: the baseline)
  inline-2     num.stream.threads=2 on the instance's event loop (stream.threads.mode=inline)
  process-2    num.stream.threads=2 as two worker processes (stream.threads.mode=process)
  process-1    num.stream.threads=1 as one worker process

Timing counts start-up, as a user waits for it: from `start()` until every record is processed
(the threads' `processed_records` reach lines + words; polled every `--poll-ms`, 20 ms; a worker answers the
poll between its processing slices). The store is
then checked against the expected counts with a get per word (not timed). CPU is the instance
process's plus each worker's (from /proc, read before close), over the timed span; CPU/wall says
how many cores the instance kept busy.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.wordcount import STORE, build_topology
from bench.bench_broker import bench_broker
from bench.wordcount_guarantees import create_topics, filled_input, run_line
from streams_core.runtime.kafka_streams import KafkaStreams, State

VARIANTS: dict[str, dict[str, Any]] = {
    "inline-1": {"num.stream.threads": 1},
    "inline-2": {"num.stream.threads": 2, "stream.threads.mode": "inline"},
    "process-2": {"num.stream.threads": 2, "stream.threads.mode": "process"},
    "process-1": {"num.stream.threads": 1, "stream.threads.mode": "process"},
}
POLL_S = 0.02
"""How often the threads' metrics are read to see the end (`--poll-ms`)."""
CLIENT_OVERRIDES: dict[str, Any] = {}
"""Given to every variant alike (`--linger-ms`); empty: the library's client defaults."""
_TICK_S = os.sysconf("SC_CLK_TCK")
LOAD_AT_START = os.getloadavg()[0]


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a live process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK_S


@dataclass
class Result:
    variant: str
    seconds: float
    broker_cpu: float  # the broker JVM's CPU seconds over the same span
    worker_cpu: list[float]  # each worker's CPU seconds (empty inline)
    startup: float  # start() -> first processed record (as seen in the metrics)
    cpu: float
    workers: int

    def rate(self, lines: int) -> float:
        return lines / self.seconds


def processed(streams: KafkaStreams) -> int:
    return sum(int(t.get("processed_records", 0)) for t in streams.metrics()["threads"])


async def run_variant(
    variant: str,
    bootstrap: str,
    broker_pid: int,
    topic: str,
    partitions: int,
    lines: int,
    expected: Counter[str],
    state_dir: Path,
) -> Result:
    app_id = f"bench-threads-{variant}-{uuid.uuid4().hex[:6]}"
    config = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "state.dir": str(state_dir / app_id),
        "commit.interval.ms": 1000,
        **VARIANTS[variant],
        **CLIENT_OVERRIDES,
    }
    await create_topics(bootstrap, [f"{app_id}-out"], partitions)
    streams = KafkaStreams(build_topology(topic, f"{app_id}-out", windowed=False), config)
    total = lines + sum(expected.values())
    cpu_before, broker_before = time.process_time(), process_cpu(broker_pid)
    started = time.perf_counter()
    await streams.start()
    first: float | None = None
    try:
        while (done := processed(streams)) < total:
            if first is None and done:
                first = time.perf_counter() - started
            if streams.errors:
                raise RuntimeError(f"{variant} failed: {streams.errors[0]!r}")
            await asyncio.sleep(POLL_S)
        seconds = time.perf_counter() - started
        pids = [t["pid"] for t in streams.metrics()["threads"] if t.get("pid")]
        workers = [process_cpu(pid) for pid in pids]
        cpu = time.process_time() - cpu_before + sum(workers)
        broker_cpu = process_cpu(broker_pid) - broker_before
        await streams.wait_for_state(State.RUNNING)
        tasks = {m.thread_name[-14:]: sorted(str(t.task_id) for t in m.active_tasks) for m in streams.metadata_for_local_threads()}
        per_thread = {
            t["thread"][-14:]: (
                t.get("processed_records"),
                f"poll {t.get('poll_latency_ms_total', 0) / 1000:.1f} s, process {t.get('process_latency_ms_total', 0) / 1000:.1f} s, "
                f"commit {t.get('commit_latency_ms_avg', 0) * t.get('commit_count', 0) / 1000:.1f} s",
            )
            for t in streams.metrics()["threads"]
        }
        print(f"  {variant}: tasks {tasks}; processed, time in poll/process/commit {per_thread}", flush=True)
        store = streams.store(STORE)
        wrong = {w: (n, store.get(w)) for w, n in expected.items() if store.get(w) != n}
        if wrong:
            raise RuntimeError(f"{variant}: {len(wrong)} wrong counts, e.g. {list(wrong.items())[:3]}")
    finally:
        await streams.close(timeout=60)
    return Result(variant, seconds, broker_cpu, workers, seconds if first is None else first, cpu, len(pids))


async def main_async(args: argparse.Namespace, bootstrap: str, broker_pid: int) -> None:
    variants, topic, expected = await filled_input(args, bootstrap, VARIANTS, "bench-threads-lines")
    runs: dict[str, list[Result]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="bench-threads-state-") as state_dir:
        for round_ in range(args.repeat):
            for variant in variants:
                result = await run_variant(variant, bootstrap, broker_pid, topic, args.partitions, args.lines, expected, Path(state_dir))
                runs[variant].append(result)
                print(f"round {round_ + 1} {variant}: {result.rate(args.lines) * args.words_per_line:,.0f} words/s "
                      f"({result.seconds:.2f} s from start(), first record at {result.startup:.2f} s, CPU {result.cpu:.1f} s = {result.cpu / result.seconds:.2f} "
                      f"cores; workers {', '.join(f'{w:.1f}' for w in result.worker_cpu) or '-'} s; broker {result.broker_cpu:.1f} s)", flush=True)
    chosen = {v: sorted(rs, key=lambda r: r.seconds)[len(rs) // 2] for v, rs in runs.items()}
    print(run_line(args, f"client overrides {CLIENT_OVERRIDES or 'none'}", LOAD_AT_START))
    base = chosen.get("inline-1")
    print("| variant | words/s (median) | seconds from start() | of which start-up | CPU s | cores busy (CPU/wall) "
          "| vs inline-1 (from start() / from first record) | rounds, s |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for variant, r in chosen.items():
        ratio = "-"
        if base is not None:
            ratio = f"{base.seconds / r.seconds:.2f}x / {(base.seconds - base.startup) / (r.seconds - r.startup):.2f}x"
        rounds = ", ".join(f"{x.seconds:.2f}" for x in runs[variant])
        print(f"| {variant} | {r.rate(args.lines) * args.words_per_line:,.0f} | {r.seconds:.2f} | {r.startup:.2f} | {r.cpu:.1f} | "
              f"{r.cpu / r.seconds:.2f} | {ratio} | {rounds} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--words-per-line", type=int, default=10)
    parser.add_argument("--vocabulary", type=int, default=5000)
    parser.add_argument("--partitions", type=int, default=4, help="input partitions (default 4: 8 tasks)")
    parser.add_argument("--variants", default="inline-1,process-2,inline-2")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--linger-ms", type=int, default=None, help="producer linger.ms of every variant (default: the library's)")
    parser.add_argument("--poll-ms", type=int, default=20, help="how often the end is checked (default 20)")
    args = parser.parse_args(argv)
    global POLL_S
    POLL_S = args.poll_ms / 1000
    if args.linger_ms is not None:
        CLIENT_OVERRIDES["linger.ms"] = args.linger_ms
    with bench_broker() as broker:
        assert broker.pid is not None
        asyncio.run(main_async(args, broker.bootstrap_servers, broker.pid))
    return 0


if __name__ == "__main__":
    sys.exit(main())
