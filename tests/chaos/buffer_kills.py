"""The DSL's buffers under kill -9 and task migration, at any size (issue 35).

Two scenarios on the apps of tests/integration/apps/buffers_app.py, run small by
tests/chaos/test_buffer_kills.py and full size by bench/chaos/buffers.py:

- `suppress_kills`: a windowed count suppressed until its windows close, one process killed with
  SIGKILL `kills` times and restarted on its state directory: first right after everything
  produced so far was committed (every key's last window then waits in the suppression buffer,
  complete but not closed: only the restored buffer can emit it), then alternately while a
  transaction holds records (exactly-once; at random under at-least-once) and at random while
  input arrives. Every window's final count must be in the output read with read_committed:
  exactly once each and nothing else under exactly-once; none missing and none below the truth
  under at-least-once.
- `join_migration_and_kills`: a versioned stream-table join with a grace period; a second
  instance joins mid-stream (a task and its buffered records move to it), then the first is
  killed with SIGKILL mid-stream `kills` times, in an open transaction when one is caught, and
  restarted. Every stream record must be joined exactly once with the table version as of its
  timestamp, as without faults.

Each returns a `BufferReport`: its figures and the problems found (empty when all is right).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.apps.buffers_app import WINDOW_MS
from tests.integration.apps.harness import AppProcess, AppProcesses, kill_in_open_transaction, wait_all_committed
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic

__all__ = ["BufferReport", "join_migration_and_kills", "suppress_kills"]

MODULE = "tests.integration.apps.buffers_app"
PARTITIONS = 2
KEYS = [f"k{i}" for i in range(8)]
RECORD_SPACING_MS = 25
"""Event time between two input records of the suppress scenario (keys in turn)."""


@dataclass
class BufferReport:
    """What a scenario did and what it found wrong."""

    scenario: str
    seed: int
    kills: list[str] = field(default_factory=list)
    figures: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def raise_if_failed(self) -> None:
        if self.problems:
            raise AssertionError(f"{self.scenario} (seed {self.seed}, kills {self.kills}): " + "; ".join(self.problems))


def base_time() -> int:
    """Ten minutes ago, on a minute: event times inside the topics' and stores' retention."""
    return (int(time.time() * 1000) // 60_000 - 10) * 60_000


async def produce_slowly(bootstrap: str, topic: str, records: Sequence[Rec], chunk: int = 50, pause: float = 0.05) -> None:
    """In chunks with pauses, so that a kill lands while input is still arriving."""
    for start in range(0, len(records), chunk):
        await produce(bootstrap, topic, records[start : start + chunk])
        await asyncio.sleep(pause)


def windowed_input(base: int, count: int) -> tuple[list[Rec], Counter[str]]:
    """`count` records, one every 25 ms of event time, keys in turn; the final count per `key@start`."""
    records, truth = [], Counter[str]()
    for i in range(count):
        key, timestamp = KEYS[i % len(KEYS)], base + i * RECORD_SPACING_MS
        records.append(Rec(key.encode(), b"x", timestamp_ms=timestamp))
        truth[f"{key}@{timestamp - timestamp % WINDOW_MS}"] += 1
    return records, truth


def _phases(records: Sequence[Rec], count: int) -> list[Sequence[Rec]]:
    size = -(-len(records) // count)
    return [records[i * size : (i + 1) * size] for i in range(count)]


async def _restart(procs: AppProcesses, guarantee: str, *args: str) -> AppProcess:
    app = procs.start("a", guarantee, *args)
    await app.wait_running(timeout=90)
    return app


async def suppress_kills(
    bootstrap: str, tmp_path: Path, guarantee: str, *, seconds: int = 60, kills: int = 3, seed: int | None = None
) -> BufferReport:
    """`seconds` of event time (40 records a second, 8 keys, 1 s windows) and `kills` kill -9s (at least 2)."""
    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    report = BufferReport(f"suppress ({guarantee})", seed)
    app_id, source, sink = unique_topic("supp-kill"), unique_topic("supp-in"), unique_topic("supp-out")
    await create_topic(bootstrap, source, PARTITIONS)
    await create_topic(bootstrap, sink, PARTITIONS)
    base = base_time()
    records, truth = windowed_input(base, seconds * 1000 // RECORD_SPACING_MS)
    # far ahead, one per key (so every partition): they close every window above and stay buffered
    flush = [Rec(key.encode(), b"x", timestamp_ms=base + seconds * 1000 + 240_000) for key in KEYS]
    phases = _phases(records, max(kills, 2))
    phases[-1] = [*phases[-1], *flush]
    changelogs = [f"{app_id}-final-store-changelog", f"{app_id}-counts-changelog"]
    with AppProcesses(tmp_path, bootstrap, app_id, source, sink, MODULE) as procs:
        app = await _restart(procs, guarantee)
        await produce(bootstrap, source, phases[0])
        await wait_all_committed(bootstrap, app_id, source, timeout=60)
        app.kill()
        report.kills.append("after a commit, windows waiting in the buffer")
        for number, phase in enumerate(phases[1:], start=1):
            app = await _restart(procs, guarantee)
            feeding = asyncio.create_task(produce_slowly(bootstrap, source, phase))
            await asyncio.sleep(rng.uniform(0.3, 1.5))
            if number % 2 and guarantee == "exactly_once":
                in_txn = await kill_in_open_transaction(app, bootstrap, [sink, *changelogs])
                report.kills.append(f"{'in' if in_txn else 'no'} open transaction")
            else:
                app.kill()
                report.kills.append("at random while input arrives")
            await feeding
        last = await _restart(procs, guarantee)
        await wait_all_committed(bootstrap, app_id, source, timeout=120)
        if await last.terminate() != 0:
            report.problems.append(f"the last instance did not close cleanly: {last.log_tail()}")

    isolation = "read_committed" if guarantee == "exactly_once" else "read_uncommitted"
    output = [((r.key or b"").decode(), int.from_bytes(r.value or b"", "big"))
              for r in await read_all(bootstrap, sink, isolation_level=isolation, timeout=30)]  # fmt: skip
    emitted = Counter(key for key, _ in output)
    report.figures = {"windows": len(truth), "results": len(output), "records": len(records)}

    def relative(window: str) -> str:
        key, start = window.split("@")
        return f"{key}@{int(start) - base}"

    missing = sorted(set(truth) - set(emitted))
    if missing:
        report.problems.append(f"final results never emitted: {[relative(w) for w in missing]}")
    if guarantee == "exactly_once":
        wrong = sorted(set(output) ^ set(truth.items()))
        twice = sorted(w for w, n in emitted.items() if n > 1)
        if wrong or twice:
            report.problems.append(f"not each final count once: wrong {wrong[:10]}, emitted twice {twice[:10]}")
    else:
        last_counts = dict(output)
        low = {relative(w): (last_counts[w], n) for w, n in truth.items() if w in last_counts and last_counts[w] < n}
        if low:
            order = {w: [v for k, v in output if relative(k) == w] for w in low}
            report.problems.append(f"final counts below the truth (emitted, truth): {low}, emitted in order {order}")
    return report


def join_input(base: int, count: int) -> tuple[list[Rec], list[Rec], Counter[str]]:
    """Table: each key's version j at base + 2 s * j (20 versions); stream: `count` records, one
    every 30 ms of event time from base + 0.5 s. Expected: each stream value joined with its key's
    version as of its timestamp."""
    table = [Rec(key.encode(), f"{key}-v{j}".encode(), timestamp_ms=base + 2_000 * j) for j in range(20) for key in KEYS]
    stream, expected = [], Counter[str]()
    for i in range(count):
        key, timestamp = KEYS[i % len(KEYS)], base + 500 + i * 30
        stream.append(Rec(key.encode(), f"s{i}".encode(), timestamp_ms=timestamp))
        expected[f"s{i}+{key}-v{min((timestamp - base) // 2_000, 19)}"] += 1
    return table, stream, expected


def tasks_created(process: AppProcess) -> int:
    return process.log_path.read_text(errors="replace").count("created task")


async def join_migration_and_kills(
    bootstrap: str, tmp_path: Path, *, records: int = 1_200, kills: int = 1, seed: int | None = None
) -> BufferReport:
    """`records` stream records (at least 3 per kill phase) joined under exactly-once through a
    task migration and `kills` kill -9s of the first instance."""
    seed = random.randrange(1 << 30) if seed is None else seed
    rng = random.Random(seed)
    report = BufferReport("versioned join with grace", seed)
    app_id, source, table_topic, sink = (unique_topic("gj-kill"), unique_topic("gj-stream"), unique_topic("gj-table"),
                                         unique_topic("gj-out"))  # fmt: skip
    for topic in (source, table_topic, sink):
        await create_topic(bootstrap, topic, PARTITIONS)
    base = base_time()
    table, stream, expected = join_input(base, records)
    flush = [Rec(key.encode(), b"flush", timestamp_ms=base + 500 + records * 30 + 240_000) for key in KEYS]
    args = ("--topology", "join", "--table", table_topic)
    await produce(bootstrap, table_topic, table)
    third = len(stream) // 3
    moved = 0
    with AppProcesses(tmp_path, bootstrap, app_id, source, sink, MODULE) as procs:
        a = await _restart(procs, "exactly_once", *args)
        await wait_all_committed(bootstrap, app_id, table_topic, timeout=60)
        await produce(bootstrap, source, stream[:third])
        await wait_all_committed(bootstrap, app_id, source, timeout=60)
        # a second instance joins mid-stream: a task (and its buffered records) moves to it
        feeding = asyncio.create_task(produce_slowly(bootstrap, source, stream[third : 2 * third], chunk=40, pause=0.1))
        b = procs.start("b", "exactly_once", *args)
        await b.wait_running(timeout=90)
        await feeding
        await wait_all_committed(bootstrap, app_id, source, timeout=60)
        moved = tasks_created(b)
        # kill -9 the first mid-stream, in an open transaction if one is caught, `kills` times
        for phase in _phases(stream[2 * third :], max(kills, 1)):
            feeding = asyncio.create_task(produce_slowly(bootstrap, source, phase, chunk=40, pause=0.1))
            await asyncio.sleep(rng.uniform(0.3, 0.8))
            in_txn = await kill_in_open_transaction(a, bootstrap, [sink, f"{app_id}-graced-Buffer-changelog"])
            report.kills.append(f"{'in' if in_txn else 'outside'} an open transaction")
            await feeding
            a = await _restart(procs, "exactly_once", *args)
        await produce(bootstrap, source, flush)
        await wait_all_committed(bootstrap, app_id, source, timeout=120)
        await wait_all_committed(bootstrap, app_id, table_topic, timeout=60)
        for process in (b, a):
            if await process.terminate() != 0:
                report.problems.append(f"instance {process.name} did not close cleanly: {process.log_tail()}")
    if moved < 1:
        report.problems.append(f"no task moved to the second instance:\n{b.log_tail()}")
    output = Counter(
        (r.value or b"").decode() for r in await read_all(bootstrap, sink, isolation_level="read_committed", timeout=30)
    )
    missing, extra = expected - output, output - expected
    report.figures = {"records": len(stream), "joined": sum(output.values()), "tasks moved": moved}
    if missing or extra:
        report.problems.append(f"missing {sorted(missing)[:10]}, extra {sorted(extra)[:10]}")
    return report
