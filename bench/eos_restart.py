"""Restart after kill -9 under exactly-once with a large store: time from restart to RUNNING.

    flock /tmp/bench.lock .venv/bin/python bench/eos_restart.py --keys 1000000 --repeat 3 \
        --before /work/main                                  (the recorded run)
    .venv/bin/python bench/eos_restart.py --keys 50000 --repeat 1 --before /work/main   (a quick run)

One run starts its own local broker (LocalKafkaBroker in a temp dir, stopped at the end even on
error), creates a 1-partition input and output topic, and produces `--keys` records with
distinct keys into the input. Then the counting application (`tests/integration/apps/
counting_app.py`: a logged persistent key-value store `counts`, one count per key, each update
forwarded) runs under exactly-once as a process of this tree until every input record is
committed: its store holds `--keys` keys, its changelog `--keys` records. A trickle of input
(updates of existing keys) then starts and the process is killed with SIGKILL while it
processes it; the trickle stops, and the state directory as the kill left it is saved.

Then `--repeat` rounds, each restarting every variant, in alternating order, on a fresh copy of
the saved state directory (after the killed member's session expired, so no restart waits for
the group to drop it):

  after    this tree: the store file holds the changelog offsets of its committed data
           (docs/state.md, "Exactly-once without wipes"): the restart restores the tail
  before   the tree given by `--before` (main): under exactly-once a task without a checkpoint
           is wiped and restored from the whole changelog

Each restart is a new `python -m tests.integration.apps.counting_app` process of its tree
(PYTHONPATH), timed from `Popen` to its `RUNNING` line (the instance reaches RUNNING once its
task is restored); the restore's own line ("restored N records ... in S s") is read from its
log. The process is then stopped with SIGTERM (a clean close) before the next restart.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import importlib
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as KafkaTopicPartition

from bench.bench_broker import bench_broker, work_dir

log = logging.getLogger("eos_restart")

HERE = Path(__file__).resolve().parents[1]
APP = "bench-eos-restart"
SOURCE, SINK = "eos-restart-in", "eos-restart-out"
SESSION_EXPIRY_S = 8.0
"""The counting app's session timeout is 6 s: a restart after this never waits for the killed member."""
_RESTORED = re.compile(r"restored (\d+) records from .* in ([0-9.]+) s")
_STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*"
_STARTED = re.compile(_STAMP + r"state CREATED -> REBALANCING", re.M)
_RUNNING = re.compile(_STAMP + r"state REBALANCING -> RUNNING", re.M)


def _stamp(text: str) -> datetime.datetime:
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f")


def key_of(i: int) -> bytes:
    return b"key-%010d" % i


class Variant:
    """How to start one counting application: our runtime from a source tree, or Kafka Streams."""

    def __init__(self, name: str, tree: Path | None = None, classpath: str | None = None) -> None:
        self.name = name
        self.tree = tree
        self.classpath = classpath
        self.app_id = APP + ("-kstreams" if classpath else "")

    def command(self, bootstrap: str, state_dir: Path) -> tuple[list[str], Path, dict[str, str]]:
        if self.classpath is not None:
            return (["java", "-Xms256m", "-Xmx1g", "-cp", self.classpath, "EosRestart", bootstrap, self.app_id, SOURCE,
                     SINK + "-kstreams", str(state_dir)], HERE, dict(os.environ))
        assert self.tree is not None
        return ([sys.executable, "-m", "tests.integration.apps.counting_app", "--bootstrap", bootstrap, "--app-id",
                 self.app_id, "--input", SOURCE, "--output", SINK, "--state-dir", str(state_dir), "--guarantee",
                 "exactly_once"], self.tree, {**os.environ, "PYTHONPATH": str(self.tree)})


class App:
    """One counting application process; its stdout lines collected by a thread."""

    def __init__(self, variant: Variant, bootstrap: str, state_dir: Path, log_path: Path) -> None:
        command, cwd, env = variant.command(bootstrap, state_dir)
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "wb")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL, text=True,
        )
        self.running_at: float | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip() == "RUNNING" and self.running_at is None:
                self.running_at = time.perf_counter()

    async def wait_running(self, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while self.running_at is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"not RUNNING (exit {self.proc.returncode}); see {self.log_path}")
            await asyncio.sleep(0.01)
        return self.running_at - self.started

    def restored(self) -> tuple[int, float]:
        """Records restored and seconds, from the restore's log line (0, 0 when nothing was restored)."""
        total, seconds = 0, 0.0
        for match in _RESTORED.finditer(self.log_path.read_text(errors="replace")):
            total += int(match.group(1))
            seconds += float(match.group(2))
        return total, seconds

    def start_to_running(self) -> float:
        """Seconds from `KafkaStreams.start()` to RUNNING by the log's timestamps (the interpreter's
        start and the imports left out: the same for both trees)."""
        text = self.log_path.read_text(errors="replace")
        started, running = _STARTED.search(text), _RUNNING.search(text)
        if started is None or running is None:
            return float("nan")
        return (_stamp(running.group(1)) - _stamp(started.group(1))).total_seconds()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._log.close()

    def terminate(self, timeout: float = 60.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        self._log.close()
        return code


async def produce_keys(bootstrap: str, n: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=50, max_batch_size=1024 * 1024,
                                max_request_size=4 * 1024 * 1024)
    await producer.start()
    try:
        batch = producer.create_batch()
        for i in range(n):
            if batch.append(key=key_of(i), value=b"x", timestamp=None) is None:
                await (await producer.send_batch(batch, SOURCE, partition=0))
                batch = producer.create_batch()
                batch.append(key=key_of(i), value=b"x", timestamp=None)
        await (await producer.send_batch(batch, SOURCE, partition=0))
    finally:
        await producer.stop()


async def trickle(bootstrap: str, keys: int, stop: asyncio.Event, rate: int = 2000) -> int:
    """Updates of existing keys at about `rate` records/s until `stop`; returns how many."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
    await producer.start()
    sent = 0
    try:
        while not stop.is_set():
            for _ in range(rate // 20):
                await producer.send(SOURCE, key=key_of(sent * 7919 % keys), value=b"x", partition=0)
                sent += 1
            await asyncio.sleep(0.05)
        await producer.flush()
    finally:
        await producer.stop()
    return sent


async def committed(bootstrap: str, group: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return await consumer.committed(KafkaTopicPartition(SOURCE, 0)) or 0
    finally:
        await consumer.stop()


async def create_topics(bootstrap: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(SOURCE, 1, 1), NewTopic(SINK, 1, 1), NewTopic(SINK + "-kstreams", 1, 1)])
    finally:
        await admin.close()


async def build_state(args: argparse.Namespace, variant: Variant, bootstrap: str, work: Path) -> Path:
    """Count every input record so far (`--keys` keys) under exactly-once, then kill -9 mid-stream;
    returns the saved state dir."""
    state = work / f"state-{variant.name}"
    build_log = work / f"build-{variant.name}.log"
    app = App(variant, bootstrap, state, build_log)
    await app.wait_running(120)
    started = time.perf_counter()
    deadline = time.monotonic() + args.build_timeout
    target = await input_end(bootstrap)
    while (done := await committed(bootstrap, variant.app_id)) < target:
        if time.monotonic() > deadline or app.proc.poll() is not None:
            app.kill()
            raise RuntimeError(f"the store was not built: {done} of {target} committed; see {build_log}")
        await asyncio.sleep(1.0)
    print(f"{variant.name}: counted {target} records ({args.keys} keys) under exactly-once in "
          f"{time.perf_counter() - started:.1f} s", flush=True)
    stop = asyncio.Event()
    feeding = asyncio.create_task(trickle(bootstrap, args.keys, stop))
    await asyncio.sleep(3.0)
    app.kill()
    stop.set()
    sent = await feeding
    print(f"{variant.name}: killed -9 while processing a trickle ({sent} updates sent)", flush=True)
    await asyncio.sleep(SESSION_EXPIRY_S)
    saved = work / f"saved-{variant.name}"
    shutil.copytree(state, saved)
    return saved


async def input_end(bootstrap: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = KafkaTopicPartition(SOURCE, 0)
        return int((await consumer.end_offsets([tp]))[tp])
    finally:
        await consumer.stop()


async def restart(variant: Variant, bootstrap: str, saved: Path, work: Path, round_no: int) -> dict[str, float]:
    state = work / f"state-{variant.name}"
    shutil.rmtree(state, ignore_errors=True)
    shutil.copytree(saved, state)
    app = App(variant, bootstrap, state, work / f"{variant.name}-{round_no}.log")
    try:
        seconds = await app.wait_running(600)
    finally:
        code = app.terminate()
    restored, restore_s = app.restored() if variant.classpath is None else (-1, float("nan"))  # Kafka Streams logs nothing
    in_process = app.start_to_running()
    print(f"  {variant.name:8s} round {round_no}: RUNNING after {seconds:6.2f} s from Popen, {in_process:6.2f} s from "
          f"start(); restored {restored} records in {restore_s:.2f} s (exit {code})", flush=True)
    return {"running_s": seconds, "start_s": in_process, "restored": restored, "restore_s": restore_s}


async def main_async(args: argparse.Namespace, bootstrap: str, work: Path) -> None:
    await create_topics(bootstrap)
    started = time.perf_counter()
    await produce_keys(bootstrap, args.keys)
    print(f"produced {args.keys} input records in {time.perf_counter() - started:.1f} s", flush=True)
    variants = {"after": Variant("after", tree=HERE)}
    if args.before:
        variants["before"] = Variant("before", tree=Path(args.before).resolve())
    if args.kstreams:
        variants["kstreams"] = Variant("kstreams", classpath=kstreams_classpath(work))
    # ours builds one state (the killed instance's directory), which both trees restart from
    saved = {"after": await build_state(args, variants["after"], bootstrap, work)}
    saved["before"] = saved["after"]
    if "kstreams" in variants:
        saved["kstreams"] = await build_state(args, variants["kstreams"], bootstrap, work)
    results: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for round_no in range(1, args.repeat + 1):
        order = list(variants) if round_no % 2 else list(reversed(variants))
        for name in order:
            results[name].append(await restart(variants[name], bootstrap, saved[name], work, round_no))
    print(f"\nrestart to RUNNING after kill -9 under exactly-once, {args.keys} keys (load {os.getloadavg()[0]:.1f}):")
    for variant, runs in results.items():
        times = sorted(r["running_s"] for r in runs)
        starts = sorted(r["start_s"] for r in runs)
        print(f"  {variant:8s} from Popen median {_median(times):.2f} s {[round(t, 2) for t in times]}; from start() "
              f"median {_median(starts):.2f} s {[round(t, 2) for t in starts]}; restored {[int(r['restored']) for r in runs]}")
    after = _median([r["running_s"] for r in results["after"]])
    for other in ("before", "kstreams"):
        if other in results:
            print(f"  {other} / after, from Popen (medians): {_median([r['running_s'] for r in results[other]]) / after:.1f}x")
    if "before" in results:
        before = _median([r["start_s"] for r in results["before"]])
        print(f"  before / after, from start() (medians): {before / _median([r['start_s'] for r in results['after']]):.1f}x")


def kstreams_classpath(work: Path) -> str:
    """Kafka Streams' jars (bench/peers/install.py fetches them) and EosRestart compiled into `work`."""
    sys.path.insert(0, str(HERE / "bench" / "peers"))
    libs_classpath: str = importlib.import_module("install").kstreams_classpath()
    classes = work / "kstreams-classes"
    source = HERE / "bench" / "peers" / "kstreams" / "EosRestart.java"
    subprocess.run(["javac", "-d", str(classes), "-cp", libs_classpath, str(source)], check=True)
    return f"{classes}:{libs_classpath}"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", default=None, help="source tree of the baseline (e.g. /work/main)")
    parser.add_argument("--kstreams", action="store_true", help="also Kafka Streams (Java) on the same broker and input")
    parser.add_argument("--build-timeout", type=float, default=1800.0)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, state)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    with work_dir("bench-eos-restart-", args.keep) as work, bench_broker() as broker:
        asyncio.run(main_async(args, broker.bootstrap_servers, work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
