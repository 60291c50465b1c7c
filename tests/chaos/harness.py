"""Chaos harness (issue 15): word-count processes under seeded faults, checked against a known truth.

`run_scenario` runs one `Scenario` (tests/chaos/scenarios.py):

- N `python -m app wordcount` processes of one fresh application id, started by
  `WordCountCluster.start_process` (PR_SET_PDEATHSIG, free ports; STREAMS_<PROPERTY> variables
  set the guarantee, caching off, a short session timeout, `autostop.at`);
- a producer of seeded text (`make_text`, words with a run-unique suffix, so other tests' input
  on the shared TextLinesTopic never mixes in) whose word count is the truth;
- a seeded scheduler (`FaultPlan`) that kill -9s and SIGTERMs random live instances at random
  moments and restarts them after a random delay, and can stall the broker (SIGSTOP/SIGCONT of
  its JVM; SIGCONT always follows, also on failure);
- the checker (tests/chaos/checker.py): the output topic read read_committed (exactly-once: each
  key's values must be exactly 1, 2, ..., N; at-least-once: never below the truth) and every word
  asked over HTTP from a random instance.

The seed (CHAOS_SEED reproduces it) fixes the text, the fault times, the victims' draws and the
restart delays; process timing is the machine's, so a seed replays the same plan, not the same
interleaving. Every failure message starts with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
import signal
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import OffsetAndMetadata

from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.autostop.autostop_metadata import AutostopLog, RunState, metadata_topic_name
from tests.chaos.checker import OutputChecker, check_stores
from tests.chaos.scenarios import Scenario
from tests.integration.apps.harness import committed_offsets
from tests.integration.rest_cluster import Instance, WordCountCluster, make_text
from tests.kafka_utils import create_topic, read_all, topic_partitions

__all__ = ["SEED_ENV", "ChaosReport", "FaultPlan", "chaos_seed", "run_scenario"]

log = logging.getLogger("chaos")

SEED_ENV = "CHAOS_SEED"
TOPIC_PARTITIONS = 4
"""The partitions `python -m app wordcount` creates its topics with (a batch run's input exists before it)."""
_RESTORED = re.compile(r"restored (\d+) records from .* in ([\d.]+) s")
_FAILED_START = re.compile(r" failed to start \(\d+ in a row\)")
_INCIDENT = re.compile(r" (WARNING|ERROR|CRITICAL) |rebalance: assigned|restored [1-9]|task migrated|state \w+ -> (ERROR|PENDING_SHUTDOWN)")
_INCIDENT_LINES = 40


def chaos_seed() -> int:
    """$CHAOS_SEED, or a fresh random seed (printed in every failure message)."""
    text = os.environ.get(SEED_ENV)
    return int(text) if text else random.SystemRandom().randrange(2**32)


# -- the plan -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fault:
    at: float
    """Seconds after the input started."""
    kind: str
    """kill (SIGKILL), term (SIGTERM), kill-worker (SIGKILL of one worker process) or stall (the broker SIGSTOPped)."""
    draw: float
    """Which live instance: index = int(draw * number of live instances)."""
    restart_after: float


@dataclass(frozen=True, slots=True)
class FaultPlan:
    faults: tuple[Fault, ...]

    @staticmethod
    def of(scenario: Scenario, rnd: random.Random) -> FaultPlan:
        window = scenario.window
        faults = [
            Fault(rnd.uniform(0.1, 0.9) * window, kind, rnd.random(), rnd.uniform(*scenario.restart_delay))
            for kind in ["kill"] * scenario.kills + ["term"] * scenario.terms + ["kill-worker"] * scenario.worker_kills
        ]
        if scenario.stall_seconds:
            faults.append(Fault(rnd.uniform(0.3, 0.6) * window, "stall", 0.0, 0.0))
        return FaultPlan(tuple(sorted(faults, key=lambda f: f.at)))


# -- the report ---------------------------------------------------------------------------------


@dataclass
class ChaosReport:
    """The figures of one run and what the checker found wrong (`problems`)."""

    scenario: Scenario
    seed: int
    application_id: str = ""
    records: int = 0
    words: int = 0
    occurrences: int = 0
    """Words in the input (the updates an exactly-once output holds)."""
    kills: int = 0
    worker_kills: int = 0
    terms: int = 0
    restarts: int = 0
    skipped_faults: int = 0
    stall_seconds: float = 0.0
    produce_seconds: float = 0.0
    total_seconds: float = 0.0
    settle_seconds: float = 0.0
    output_records: int = 0
    wrong_counts: int = 0
    duplicates: int = 0
    below_truth: int = 0
    store_wrong: int = 0
    ready_after_restart: list[float] = field(default_factory=list)
    restore_seconds: list[float] = field(default_factory=list)
    restored_records: int = 0
    failed_thread_starts: int = 0
    """Stream threads (worker processes) that died or failed while starting, each replaced."""
    problems: list[str] = field(default_factory=list)

    def fail(self, problem: str) -> None:
        self.problems.append(problem)

    def figures(self) -> dict[str, object]:
        def spread(values: list[float]) -> str:
            if not values:
                return "-"
            return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"

        return {
            "scenario": self.scenario.name, "guarantee": self.scenario.guarantee, "seed": self.seed,
            "instances": self.scenario.instances, "records": self.records, "words": self.words,
            "kills": self.kills, "worker kills": self.worker_kills, "terms": self.terms, "restarts": self.restarts, "skipped faults": self.skipped_faults,
            "broker stall s": round(self.stall_seconds, 1), "output records": self.output_records,
            "wrong counts": self.wrong_counts, "duplicates": self.duplicates, "below truth": self.below_truth,
            "store answers wrong": self.store_wrong, "input s": round(self.produce_seconds, 1),
            "settle s": round(self.settle_seconds, 1), "total s": round(self.total_seconds, 1),
            "restart -> ready s (min/median/max)": spread(self.ready_after_restart),
            "restores (count, records)": f"{len(self.restore_seconds)}, {self.restored_records}",
            "restore s (min/median/max)": spread(self.restore_seconds),
            "thread starts failed": self.failed_thread_starts,
        }  # fmt: skip

    def raise_if_failed(self) -> None:
        if self.problems:
            raise AssertionError(
                f"chaos scenario {self.scenario.name!r} failed with seed {self.seed} "
                f"(reproduce: {SEED_ENV}={self.seed}): " + "; ".join(self.problems)
            )


# -- the instances ------------------------------------------------------------------------------


class Fleet:
    """The scenario's instances: spawn, kill -9, SIGTERM, restart, and wait until they serve."""

    def __init__(self, cluster: WordCountCluster, report: ChaosReport) -> None:
        self.cluster = cluster
        self.report = report
        self._restarts: list[asyncio.Task[None]] = []

    def alive(self) -> list[str]:
        return sorted(n for n, i in self.cluster.instances.items() if _running(i))

    async def spawn(self, name: str) -> Instance:
        return await self.cluster.start_process(name, wait_ready=False)

    async def wait_ready(self, name: str, timeout: float) -> float | None:
        """Seconds until the instance answers /ready (None if the scheduler killed or stopped it
        meanwhile); AssertionError if it exits by itself or times out first."""
        instance = self.cluster.instances[name]
        began = time.monotonic()
        async with httpx.AsyncClient(timeout=2) as http:
            while True:
                process = instance.process
                assert process is not None
                if instance.stopped:
                    return None
                if process.poll() is not None:
                    raise AssertionError(f"{name} exited with {process.returncode}:\n{instance.log_tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(instance.url + "/ready")).status_code == 200:
                        return time.monotonic() - began
                if time.monotonic() - began > timeout:
                    raise AssertionError(f"{name} not ready in {timeout} s:\n{instance.log_tail()}")
                await asyncio.sleep(0.2)

    def crashed(self) -> list[str]:
        """Instances that exited by themselves (the scheduler neither killed nor stopped them):
        name, exit code and the last line of the log of each."""
        out = []
        for name, instance in sorted(self.cluster.instances.items()):
            process = instance.process
            if process is None or instance.stopped or process.poll() is None:
                continue
            if self.report.scenario.autostop and process.returncode == 0:
                continue  # a batch run that finished
            last = instance.log_tail(1).strip()
            out.append(f"{name} exited with {process.returncode} ({last[-300:]})")
        return out

    def kill(self, name: str) -> None:
        self.cluster.kill(name)
        self.report.kills += 1

    def kill_worker(self, name: str, draw: float) -> bool:
        """SIGKILL one worker process of instance `name` (its children); False when it has none now."""
        process = self.cluster.instances[name].process
        assert process is not None
        try:
            workers = sorted(int(p) for p in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split())
        except OSError:
            return False
        if not workers:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(workers[int(draw * len(workers))], signal.SIGKILL)
        self.report.worker_kills += 1
        return True

    async def term(self, name: str) -> None:
        await self.cluster.stop(name)
        self.report.terms += 1

    def restart_later(self, name: str, delay: float, *, unless: Callable[[], bool] | None = None) -> None:
        self._restarts.append(asyncio.create_task(self._restart(name, delay, unless)))

    async def _restart(self, name: str, delay: float, unless: Callable[[], bool] | None) -> None:
        await asyncio.sleep(delay)
        if unless is not None and unless():
            return
        await self.spawn(name)
        self.report.restarts += 1
        if not self.report.scenario.autostop:  # a batch instance may finish before it ever says ready
            ready = await self.wait_ready(name, 120.0)
            if ready is not None:
                self.report.ready_after_restart.append(ready)

    async def restarts_done(self) -> None:
        for task in self._restarts:
            await task

    async def cancel_restarts(self) -> None:
        """After a failure: no restart comes after the cleanup."""
        for task in self._restarts:
            task.cancel()
        await asyncio.gather(*self._restarts, return_exceptions=True)


def _running(instance: Instance) -> bool:
    return instance.process is not None and instance.process.poll() is None and not instance.stopped


# -- input --------------------------------------------------------------------------------------


async def produce_lines(bootstrap: str, lines: list[str], seconds: float) -> float:
    """Produce `lines` to the input topic spread evenly over `seconds` (0: at once); returns the time taken."""
    began = time.monotonic()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=256 * 1024)
    await producer.start()
    try:
        ticks = max(1, int(seconds * 20))
        per_tick = max(1, -(-len(lines) // ticks))
        for start in range(0, len(lines), per_tick):
            for line in lines[start : start + per_tick]:
                await producer.send(INPUT_TOPIC, line.encode())
            if seconds:
                due = began + seconds * (start + per_tick) / len(lines)
                await asyncio.sleep(max(0.0, due - time.monotonic()))
        await producer.flush()
    finally:
        await producer.stop()
    return time.monotonic() - began


async def _start_at_the_end(bootstrap: str, group: str) -> None:
    """Commit the new application's input offsets at the input's end: the shared TextLinesTopic
    holds earlier tests' and scenarios' lines, which a fresh group would read from the start."""
    partitions = await topic_partitions(bootstrap, INPUT_TOPIC)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        await consumer.commit({tp: OffsetAndMetadata(offset, "") for tp, offset in ends.items()})
    finally:
        await consumer.stop()


# -- faults -------------------------------------------------------------------------------------


@contextlib.contextmanager
def _continue_on_exit(pid: int | None) -> Iterator[None]:
    """Whatever happens, a stalled broker is continued."""
    try:
        yield None
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


async def run_faults(
    plan: FaultPlan, fleet: Fleet, broker_pid: int | None, *, stop_when: Callable[[], bool] = lambda: False
) -> None:
    """Carry out the plan from now; a fault without a live victim (or once `stop_when()`) is skipped."""
    report = fleet.report
    began = time.monotonic()
    for fault in plan.faults:
        await asyncio.sleep(max(0.0, began + fault.at - time.monotonic()))
        if stop_when():
            report.skipped_faults += 1
            continue
        if fault.kind == "stall":
            assert broker_pid is not None, "a broker stall needs the broker's pid"
            log.info("chaos: broker SIGSTOP for %.1f s", report.scenario.stall_seconds)
            with _continue_on_exit(broker_pid):
                os.kill(broker_pid, signal.SIGSTOP)
                stalled = time.monotonic()
                await asyncio.sleep(report.scenario.stall_seconds)
            report.stall_seconds += time.monotonic() - stalled
            continue
        alive = fleet.alive()
        if not alive:
            report.skipped_faults += 1
            continue
        victim = alive[int(fault.draw * len(alive))]
        log.info("chaos: %s %s at %.1f s", fault.kind, victim, time.monotonic() - began)
        if fault.kind == "kill-worker":  # the instance replaces its worker: no restart
            if not fleet.kill_worker(victim, fault.draw):
                report.skipped_faults += 1
            continue
        if fault.kind == "kill":
            fleet.kill(victim)
        else:
            await fleet.term(victim)
        fleet.restart_later(victim, fault.restart_after, unless=stop_when)


# -- the run ------------------------------------------------------------------------------------


async def run_scenario(
    scenario: Scenario, *, seed: int, bootstrap: str, tmp_path: Path, broker_pid: int | None = None
) -> ChaosReport:
    """Run `scenario` to its end and check it; the report's `problems` say what was wrong."""
    rnd = random.Random(seed)
    tag = uuid.uuid4().hex[:6]
    report = ChaosReport(scenario, seed, application_id=f"chaos-{scenario.name}-{tag}")
    text, truth = make_text(rnd, words=scenario.words, lines=scenario.lines, suffix=f"~{scenario.name}{tag}")
    plan = FaultPlan.of(scenario, rnd)
    report.records, report.words, report.occurrences = len(text), len(truth), sum(truth.values())
    env = {
        "STREAMS_PROCESSING_GUARANTEE": scenario.guarantee,
        "STREAMS_STATESTORE_CACHE_MAX_BYTES": "0",  # every count update reaches the output: 1, 2, ..., N
        "STREAMS_SESSION_TIMEOUT_MS": "4000",  # a killed member leaves the group soon
        "STREAMS_HEARTBEAT_INTERVAL_MS": "500",
        "STREAMS_NUM_STREAM_THREADS": str(scenario.threads),
    }
    if scenario.autostop:
        env["STREAMS_AUTOSTOP_AT"] = "eol"
    cluster = WordCountCluster(bootstrap, tmp_path, report.application_id, env=env)
    fleet = Fleet(cluster, report)
    names = [f"i{n}" for n in range(scenario.instances)]
    for topic in (INPUT_TOPIC, OUTPUT_TOPIC):
        await create_topic(bootstrap, topic, TOPIC_PARTITIONS)
    await _start_at_the_end(bootstrap, report.application_id)
    began = time.monotonic()
    try:
        with _continue_on_exit(broker_pid if scenario.stall_seconds else None):
            if scenario.autostop:
                await _batch_run(scenario, report, fleet, plan, names, text, rnd, bootstrap, broker_pid, truth)
            else:
                await _streaming_run(scenario, report, fleet, plan, names, text, bootstrap, broker_pid, truth)
    finally:
        report.total_seconds = time.monotonic() - began
        try:
            await fleet.cancel_restarts()
            for name in fleet.alive():  # checked already: no clean shutdown needed (it takes seconds under EOS)
                cluster.kill(name)
            await cluster.close()
        finally:
            _read_restores(cluster, report)
            if report.problems:
                _print_incidents(cluster)
    return report


async def _streaming_run(
    scenario: Scenario, report: ChaosReport, fleet: Fleet, plan: FaultPlan, names: list[str],
    text: list[str], bootstrap: str, broker_pid: int | None, truth: Counter[str],
) -> None:  # fmt: skip
    for name in names:
        await fleet.spawn(name)
    await asyncio.gather(*(fleet.wait_ready(name, 90.0) for name in names))
    producing = asyncio.create_task(produce_lines(bootstrap, text, scenario.produce_seconds))
    await run_faults(plan, fleet, broker_pid)
    report.produce_seconds = await producing
    await fleet.restarts_done()
    settle = time.monotonic()
    checker = OutputChecker(bootstrap, truth, exact=scenario.exact)
    try:
        await checker.settle(scenario.settle_timeout)
    finally:
        await checker.close()
    checker.into(report)
    live = [fleet.cluster.instances[n] for n in fleet.alive()]
    await check_stores(live, truth, report, exact=scenario.exact, timeout=scenario.settle_timeout)
    report.settle_seconds = time.monotonic() - settle
    for crash in fleet.crashed():
        report.fail(f"crashed: {crash}")


async def _batch_run(
    scenario: Scenario, report: ChaosReport, fleet: Fleet, plan: FaultPlan, names: list[str],
    text: list[str], rnd: random.Random, bootstrap: str, broker_pid: int | None, truth: Counter[str],
) -> None:  # fmt: skip
    """KIP-95 with kills: the text before the start is the truth; lines written after it must not count."""
    report.produce_seconds = await produce_lines(bootstrap, text, 0.0)
    app_id = report.application_id
    for name in names:
        await fleet.spawn(name)
    run = await _wait_for_run(bootstrap, app_id, timeout=90.0)
    # The same words (counted, they would show) plus a marker word of their own, truth 0.
    marker = f"late~{app_id}"
    truth[marker] = 0
    late = [f"{line} {marker}" for line in rnd.sample(text, min(len(text), 500))]
    await produce_lines(bootstrap, late, 0.0)
    finished = _FinishedWatch(bootstrap, app_id)
    watcher = asyncio.create_task(finished.watch())
    try:
        await run_faults(plan, fleet, broker_pid, stop_when=finished.seen)
        await fleet.restarts_done()
        settle = time.monotonic()
        deadline = settle + scenario.settle_timeout
        while fleet.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        report.settle_seconds = time.monotonic() - settle
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    if fleet.alive():
        report.fail(f"instances {fleet.alive()} still running {scenario.settle_timeout:.0f} s after the last fault")
        return
    for crash in fleet.crashed():
        report.fail(f"crashed: {crash}")
    state = await _metadata(bootstrap, app_id)
    if not state.finished:
        report.fail("no finished marker in the metadata topic")
    if dict(state.stop_offsets) != run:
        report.fail(
            f"the run's stop offsets changed: {run} at the start, {dict(state.stop_offsets)} at the end (a new run began)"
        )
    committed = await committed_offsets(bootstrap, app_id, INPUT_TOPIC)
    expected = {tp.partition: offset for tp, offset in run.items()}
    if committed != expected:
        report.fail(f"committed input offsets {committed} != the run's stop offsets {expected}")
    checker = OutputChecker(bootstrap, truth, exact=scenario.exact)
    try:
        await checker.settle(10.0)
    finally:
        await checker.close()
    checker.into(report)


async def _metadata(bootstrap: str, app_id: str) -> RunState:
    log_ = AutostopLog(app_id)
    for record in await read_all(bootstrap, metadata_topic_name(app_id), isolation_level="read_committed"):
        log_.apply(record.key, record.value)
    return log_.state()


async def _wait_for_run(bootstrap: str, app_id: str, timeout: float) -> dict[TopicPartition, int]:
    """The stop offsets of the run the instances started (once the completed marker is written)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            state = await _metadata(bootstrap, app_id)
            if state.valid:
                return dict(state.stop_offsets)
        await asyncio.sleep(0.2)
    raise AssertionError(f"no autostop run in {metadata_topic_name(app_id)} after {timeout} s")


class _FinishedWatch:
    """Polls the metadata topic: once the run is finished no instance is restarted (a start then
    would begin a new run, over the input written since)."""

    def __init__(self, bootstrap: str, app_id: str) -> None:
        self._bootstrap, self._app_id = bootstrap, app_id
        self._finished = False

    def seen(self) -> bool:
        return self._finished

    async def watch(self) -> None:
        while not self._finished:
            with contextlib.suppress(Exception):
                self._finished = (await _metadata(self._bootstrap, self._app_id)).finished
            await asyncio.sleep(0.1)


def _read_restores(cluster: WordCountCluster, report: ChaosReport) -> None:
    """Restore durations and sizes from the instances' logs (StoreChangelogReader's 'restored' lines),
    and the thread starts that failed (StreamThreads' 'failed to start' lines)."""
    for instance in cluster.instances.values():
        if instance.log_path is None or not instance.log_path.exists():
            continue
        text = instance.log_path.read_text(errors="replace")
        for match in _RESTORED.finditer(text):
            report.restored_records += int(match.group(1))
            report.restore_seconds.append(float(match.group(2)))
        report.failed_thread_starts += len(_FAILED_START.findall(text))


def _print_incidents(cluster: WordCountCluster) -> None:
    """A failed run's evidence, shown by pytest with the failure: each instance's last warnings,
    errors, rebalances and restores (the instances' logs go with the test's temporary directory)."""
    for name, instance in cluster.instances.items():
        if instance.log_path is None or not instance.log_path.exists():
            continue
        lines = [line[:400] for line in instance.log_path.read_text(errors="replace").splitlines() if _INCIDENT.search(line)]
        print(f"--- {name}: last {min(len(lines), _INCIDENT_LINES)} of {len(lines)} incident lines")
        print("\n".join(lines[-_INCIDENT_LINES:]))
