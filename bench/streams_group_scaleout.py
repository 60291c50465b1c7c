"""Scale-out 1 -> 2 -> 3 instances: time until every task is RUNNING, classic against streams protocol.

    flock /tmp/bench.lock .venv/bin/python bench/streams_group_scaleout.py --repeat 3      (the recorded run)
    .venv/bin/python bench/streams_group_scaleout.py --repeat 1 --variants ours-classic,ours-streams  (quick)

One run starts its own local broker (LocalKafkaBroker in a temp dir with the launcher's settings,
stopped at the end even on error; the streams-group settings are the broker's defaults: first
assignment delayed 3 s, assignment interval 1 s, heartbeat interval 5 s), creates an 8-partition
input topic and writes `--lines` lines of words into it. Each variant is the same word count
(flatMapValues, groupBy word, count, to the sink: two sub-topologies, 16 tasks):

  ours-classic   our runtime, `group.protocol=classic`, a process of this script (`--instance`)
  ours-streams   our runtime, `group.protocol=streams` (KIP-1071)
  java-classic   Kafka Streams 4.3 (tests/integration/java/streams_group_peer/StreamsGroupPeer.java)
  java-streams   the same with `group.protocol=streams`

Every instance prints `TASKS <state> <active task ids>` whenever its state or active tasks
change (polled every 20 ms). A round of a variant, on a fresh application id and state dirs,
starts one instance, then a second, then a third; each step waits until every instance started
so far is RUNNING with a non-empty set of active tasks and the sets partition the 16 tasks
(every task owned exactly once). A step's time runs from the new instance's `Popen` to the
arrival of the line that completed that condition, and also from the new instance's first
line (its `start()`: the interpreter's or JVM's start-up left out). The instances then close
(ours on SIGTERM, Java on the end of its standard input). Rounds alternate the variants' order.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

log = logging.getLogger("streams_group_scaleout")

HERE = Path(__file__).resolve().parents[1]
PARTITIONS = 8
ALL_TASKS = frozenset(f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS))
VARIANTS = ("ours-classic", "ours-streams", "java-classic", "java-streams")
PEER = HERE / "tests" / "integration" / "java" / "streams_group_peer" / "StreamsGroupPeer.java"
STEP_DEADLINE_S = 120.0


# --- one of our instances (`--instance`): the word count, printing its state and tasks ---------------------------


async def run_instance(bootstrap: str, app: str, source: str, sink: str, state_dir: str, protocol: str) -> int:
    """Our word count as one instance until SIGTERM; prints `TASKS <state> <ids>` on every change."""
    from streams_core import KafkaStreams, Materialized, Serdes, State, StreamsBuilder

    builder = StreamsBuilder()
    (builder.stream(source, key_serde=Serdes.String(), value_serde=Serdes.String())
     .flat_map_values(lambda line: line.lower().split()).group_by(lambda key, word: word)
     .count(Materialized.as_("counts")).to_stream().to(sink, value_serde=Serdes.Long()))  # fmt: skip
    streams = KafkaStreams(builder.build(), {
        "application.id": app, "bootstrap.servers": bootstrap, "group.protocol": protocol, "state.dir": state_dir,
        "default.key.serde": Serdes.String(), "default.value.serde": Serdes.String(),
    })  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await streams.start()
    last = ""
    try:
        while not stop.is_set() and streams.state is not State.ERROR:
            ids = sorted(str(t.task_id) for m in streams.metadata_for_local_threads() for t in m.active_tasks)
            line = f"TASKS {streams.state.name} {','.join(ids)}"
            if line != last:
                print(line, flush=True)
                last = line
            try:
                await asyncio.wait_for(stop.wait(), 0.02)
            except TimeoutError:
                pass
    finally:
        await streams.close(timeout=30)
    return 1 if streams.state is State.ERROR else 0


# --- the bench --------------------------------------------------------------------------------------------------


class Instance:
    """One instance process; a thread keeps its latest `TASKS` line and when it arrived."""

    def __init__(self, command: list[str], log_path: Path, env: dict[str, str], changed: threading.Event) -> None:
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "wb")
        self.changed = changed
        self.popen_at = time.perf_counter()
        self.proc = subprocess.Popen(command, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=self._log,
                                     stdin=subprocess.PIPE, text=True)  # fmt: skip
        self.first_line_at: float | None = None
        self.state = "CREATED"
        self.tasks: frozenset[str] = frozenset()
        self.at = self.popen_at
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with open(self.log_path.with_suffix(".out"), "w") as out:  # the lines with their arrival, for a look
            for line in self.proc.stdout:
                now = time.perf_counter()
                out.write(f"{now - self.popen_at:8.3f} {line}")
                self._line(line, now)

    def _line(self, line: str, now: float) -> None:
        if self.first_line_at is None:
            self.first_line_at = now
        parts = line.split()
        if parts and parts[0] == "TASKS":
            self.state, self.tasks, self.at = parts[1], frozenset(parts[2].split(",") if len(parts) > 2 else ()), now
            self.changed.set()

    def stop(self, java: bool) -> None:
        """Close cleanly (a leave), killed if not within 45 s."""
        if java:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        else:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(45)
        except subprocess.TimeoutExpired:
            log.warning("%s did not close within 45 s: killed", self.log_path.name)
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


def settled(instances: list[Instance]) -> float | None:
    """When every instance became RUNNING with its share of a partition of all tasks (None: not yet)."""
    owned: list[str] = []
    for instance in instances:
        if instance.state != "RUNNING" or not instance.tasks:
            return None
        owned.extend(instance.tasks)
    if len(owned) != len(ALL_TASKS) or set(owned) != ALL_TASKS:
        return None
    return max(instance.at for instance in instances)


class Round:
    """One variant's scale-out 1 -> 2 -> 3 on a fresh application id."""

    def __init__(self, variant: str, bootstrap: str, source: str, work: Path, classpath: str | None) -> None:
        self.variant, self.bootstrap, self.source = variant, bootstrap, source
        self.runtime, self.protocol = variant.split("-")
        self.app = f"scaleout-{variant}-{uuid.uuid4().hex[:8]}"
        self.work, self.classpath = work / self.app, classpath
        self.work.mkdir(parents=True)
        self.instances: list[Instance] = []
        self.changed = threading.Event()

    def start_instance(self) -> Instance:
        n = len(self.instances) + 1
        state_dir = str(self.work / f"state-{n}")
        sink = f"{self.source}-out"
        if self.runtime == "java":
            assert self.classpath is not None
            command = ["java", "-cp", self.classpath, "StreamsGroupPeer", self.bootstrap, self.app, self.source, sink,
                       state_dir, f"127.0.0.1:{18180 + n}", "word-count", self.protocol]  # fmt: skip
        else:
            command = [sys.executable, str(Path(__file__).resolve()), "--instance", "--bootstrap", self.bootstrap,
                       "--app", self.app, "--source", self.source, "--sink", sink, "--state-dir", state_dir,
                       "--protocol", self.protocol]  # fmt: skip
        instance = Instance(command, self.work / f"instance-{n}.log", {**os.environ, "PYTHONPATH": str(HERE)}, self.changed)
        self.instances.append(instance)
        return instance

    def step(self) -> tuple[float, float]:
        """Start one more instance; seconds until settled from its Popen and from its first line."""
        new = self.start_instance()
        deadline = time.monotonic() + STEP_DEADLINE_S
        while (at := settled(self.instances)) is None or new.first_line_at is None:
            for instance in self.instances:
                if instance.proc.poll() is not None:
                    raise RuntimeError(f"{instance.log_path} exited {instance.proc.returncode}")
            if time.monotonic() > deadline:
                got = [(i.state, sorted(i.tasks)) for i in self.instances]
                raise RuntimeError(f"{self.variant}: {len(self.instances)} instances not settled: {got}; see {self.work}")
            self.changed.wait(0.05)
            self.changed.clear()
        return at - new.popen_at, at - new.first_line_at

    def close(self) -> None:
        for instance in reversed(self.instances):
            instance.stop(self.runtime == "java")


async def create_input(bootstrap: str, source: str, lines: int) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(source, PARTITIONS, 1), NewTopic(f"{source}-out", PARTITIONS, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    await producer.start()
    try:
        for i in range(lines):
            words = " ".join(f"w{(i * 7 + j) % 500}" for j in range(8))
            await producer.send(source, key=f"k{i}".encode(), value=words.encode())
        await producer.flush()
    finally:
        await producer.stop()


def java_classpath(work: Path) -> str:
    """kafka-streams' jars (bench/peers/install.py fetches them) and StreamsGroupPeer compiled into `work`."""
    sys.path.insert(0, str(HERE / "bench" / "peers"))
    libs: str = importlib.import_module("install").kstreams_classpath()
    classes = work / "peer-classes"
    subprocess.run(["javac", "-d", str(classes), "-cp", libs, str(PEER)], check=True)
    return f"{classes}:{libs}"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def run(args: argparse.Namespace, bootstrap: str, work: Path) -> None:
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; known: {', '.join(VARIANTS)}")
    classpath = java_classpath(work) if any(v.startswith("java") for v in variants) else None
    source = "scaleout-in"
    asyncio.run(create_input(bootstrap, source, args.lines))
    results: dict[str, list[list[tuple[float, float]]]] = {v: [] for v in variants}
    for round_no in range(1, args.repeat + 1):
        for variant in variants if round_no % 2 else list(reversed(variants)):
            scale = Round(variant, bootstrap, source, work, classpath)
            try:
                steps = [scale.step() for _ in range(3)]
            finally:
                scale.close()
            results[variant].append(steps)
            print(f"  {variant:12s} round {round_no}: " + ", ".join(
                f"{n} inst {popen:5.2f} s ({started:5.2f} from start)" for n, (popen, started) in enumerate(steps, 1)),
                flush=True)  # fmt: skip
    medians = {v: [_median([r[i][0] for r in runs]) for i in range(3)] for v, runs in results.items()}
    from_start = {v: [_median([r[i][1] for r in runs]) for i in range(3)] for v, runs in results.items()}
    print(
        f"\nscale-out to every task RUNNING, median of {args.repeat}, s from the new instance's Popen "
        f"(from its start()) (load {os.getloadavg()[0]:.1f}):"
    )
    for variant in variants:
        print(f"  {variant:12s} " + "  ".join(f"{n}: {m:5.2f} ({s:5.2f})" for n, (m, s) in
                                             enumerate(zip(medians[variant], from_start[variant], strict=True), 1)))  # fmt: skip
    for a, b, label in (("ours-streams", "ours-classic", "ours streams/classic"),
                        ("java-streams", "java-classic", "Java streams/classic"),
                        ("ours-classic", "java-classic", "classic ours/Java"),
                        ("ours-streams", "java-streams", "streams ours/Java")):  # fmt: skip
        if a in medians and b in medians:
            print(f"  {label:22s} " + "  ".join(f"{n}: {x / y:4.2f}x" for n, (x, y) in
                                                 enumerate(zip(medians[a], medians[b], strict=True), 1)))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--lines", type=int, default=2000, help="input lines written before the first instance")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (instance logs)")
    parser.add_argument("--instance", action="store_true", help=argparse.SUPPRESS)
    for option in ("--bootstrap", "--app", "--source", "--sink", "--state-dir", "--protocol"):
        parser.add_argument(option, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.instance:
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")  # fmt: skip
        logging.getLogger("aiokafka").setLevel(logging.WARNING)
        return asyncio.run(run_instance(args.bootstrap, args.app, args.source, args.sink, args.state_dir, args.protocol))
    logging.basicConfig(level=logging.WARNING)
    from bench.bench_broker import bench_broker, work_dir

    with work_dir("bench-sg-scaleout-", args.keep) as work, bench_broker() as broker:
        run(args, broker.bootstrap_servers, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
