"""Buffers are stores on the real broker: kill -9 and task migration lose no buffered record.

- A windowed count suppressed until its windows close (tests/integration/apps/buffers_app.py),
  one process killed with SIGKILL three times and restarted on its state directory: once right
  after everything produced so far was committed (every key's last window then waits in the
  suppression buffer, complete but not closed: only the restored buffer can emit it), once while
  a transaction holds records (exactly-once) or at random (at-least-once), once at random while
  input arrives. Every window's final count must be in the output read with read_committed:
  exactly once each and nothing else under exactly-once; none missing under at-least-once.
- A versioned stream-table join with a grace period: a second instance joins mid-stream (a task
  moves to it), then the first is killed with SIGKILL mid-stream and restarted. Every stream
  record must be joined exactly once with the table version as of its timestamp, as without
  faults.

Before the buffers were stores, 6 and 9 windows of 102 were never emitted in the first scenario.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.integration.apps.buffers_app import WINDOW_MS
from tests.integration.apps.harness import AppProcess, AppProcesses, kill_in_open_transaction, wait_all_committed
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

MODULE = "tests.integration.apps.buffers_app"
PARTITIONS = 2
KEYS = [f"k{i}" for i in range(8)]


def base_time() -> int:
    """Ten minutes ago, on a minute: event times inside the topics' and stores' retention."""
    return (int(time.time() * 1000) // 60_000 - 10) * 60_000


async def produce_slowly(bootstrap: str, topic: str, records: Sequence[Rec], chunk: int = 50, pause: float = 0.05) -> None:
    """In chunks with pauses, so that a kill lands while input is still arriving."""
    for start in range(0, len(records), chunk):
        await produce(bootstrap, topic, records[start : start + chunk])
        await asyncio.sleep(pause)


# -- suppress(until_window_closes) ----------------------------------------------------------------


def windowed_input(base: int, count: int) -> tuple[list[Rec], Counter[str]]:
    """`count` records, one every 25 ms of event time, keys in turn; the final count per `key@start`."""
    records, truth = [], Counter[str]()
    for i in range(count):
        key, timestamp = KEYS[i % len(KEYS)], base + i * 25
        records.append(Rec(key.encode(), b"x", timestamp_ms=timestamp))
        truth[f"{key}@{timestamp - timestamp % WINDOW_MS}"] += 1
    return records, truth


@pytest.mark.slow
@pytest.mark.parametrize(
    "guarantee",
    [
        "exactly_once",
        pytest.param(
            "at_least_once",
            marks=pytest.mark.xfail(
                strict=False,
                reason="known bug (issue 35 stays open): under at-least-once a window is sometimes emitted early with a partial count "
                "after the kills, likely because the buffer's restored observed stream time is ahead of the reprocessed records "
                "(seen: every key's window at +33 s emitted 1-2 of 5)",
            ),
        ),
    ],
)
async def test_suppressed_final_results_survive_three_kill_9(bootstrap_servers: str, tmp_path: Path, guarantee: str) -> None:
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("supp-kill"), unique_topic("supp-in"), unique_topic("supp-out")
    await create_topic(bootstrap, source, PARTITIONS)
    await create_topic(bootstrap, sink, PARTITIONS)
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    base = base_time()
    records, truth = windowed_input(base, 2400)  # 60 s of event time: 60 windows of each of 8 keys
    # far ahead, one per key (so every partition): they close every window above and stay buffered
    flush = [Rec(key.encode(), b"x", timestamp_ms=base + 300_000) for key in KEYS]
    phases = (records[:800], records[800:1600], records[1600:] + flush)
    kills: list[str] = []
    with AppProcesses(tmp_path, bootstrap, app_id, source, sink, MODULE) as procs:
        app = procs.start("a", guarantee)
        await app.wait_running(timeout=90)
        # 1: everything so far committed: each key's last window is complete and waits in the buffer
        await produce(bootstrap, source, phases[0])
        await wait_all_committed(bootstrap, app_id, source, timeout=60)
        app.kill()
        kills.append("after a commit, windows waiting in the buffer")
        # 2: mid-stream, in an open transaction under exactly-once
        app = procs.start("a", guarantee)
        await app.wait_running(timeout=90)
        feeding = asyncio.create_task(produce_slowly(bootstrap, source, phases[1]))
        await asyncio.sleep(rng.uniform(0.5, 1.5))
        if guarantee == "exactly_once":
            changelogs = [f"{app_id}-final-store-changelog", f"{app_id}-counts-changelog"]
            in_txn = await kill_in_open_transaction(app, bootstrap, [sink, *changelogs])
            kills.append(f"{'in' if in_txn else 'no'} open transaction")
        else:
            app.kill()
            kills.append("at random mid-stream")
        await feeding
        # 3: at random while the rest arrives
        app = procs.start("a", guarantee)
        await app.wait_running(timeout=90)
        feeding = asyncio.create_task(produce_slowly(bootstrap, source, phases[2]))
        await asyncio.sleep(rng.uniform(0.3, 1.2))
        app.kill()
        kills.append("at random")
        await feeding
        last = procs.start("a", guarantee)
        await last.wait_running(timeout=90)
        await wait_all_committed(bootstrap, app_id, source, timeout=60)
        assert await last.terminate() == 0, last.log_tail()

    isolation = "read_committed" if guarantee == "exactly_once" else "read_uncommitted"
    output = [((r.key or b"").decode(), int.from_bytes(r.value or b"", "big"))
              for r in await read_all(bootstrap, sink, isolation_level=isolation, timeout=30)]  # fmt: skip
    emitted = Counter(key for key, _ in output)
    context = f"(seed {seed}, kills: {kills}, {len(truth)} windows)"

    def relative(window: str) -> str:
        key, start = window.split("@")
        return f"{key}@{int(start) - base}"

    missing = sorted(set(truth) - set(emitted))
    assert not missing, f"final results never emitted: {[relative(w) for w in missing]} {context}"
    if guarantee == "exactly_once":
        assert sorted(output) == sorted(truth.items()), f"each window's final count once, nothing else {context}"
    else:
        last_counts = dict(output)
        low = {relative(w): (last_counts[w], n) for w, n in truth.items() if last_counts[w] < n}
        assert not low, f"final counts below the truth (emitted, truth): {low} {context}"
    print(f"\nsuppress kill test ({guarantee}): {len(truth)} windows, {len(output)} results, kills: {kills}")


# -- a versioned stream-table join with a grace period ---------------------------------------------


def join_input(base: int) -> tuple[list[Rec], list[Rec], Counter[str]]:
    """Table: each key's version j at base + 2 s * j (20 versions); stream: 1,200 records, one every
    30 ms of event time from base + 0.5 s. Expected: each stream value joined with its key's version
    as of its timestamp."""
    table = [Rec(key.encode(), f"{key}-v{j}".encode(), timestamp_ms=base + 2_000 * j) for j in range(20) for key in KEYS]
    stream, expected = [], Counter[str]()
    for i in range(1_200):
        key, timestamp = KEYS[i % len(KEYS)], base + 500 + i * 30
        stream.append(Rec(key.encode(), f"s{i}".encode(), timestamp_ms=timestamp))
        expected[f"s{i}+{key}-v{min((timestamp - base) // 2_000, 19)}"] += 1
    return table, stream, expected


def tasks_created(process: AppProcess) -> int:
    return process.log_path.read_text(errors="replace").count("created task")


@pytest.mark.slow
async def test_join_grace_buffer_survives_a_task_migration_and_a_kill_9(bootstrap_servers: str, tmp_path: Path) -> None:
    bootstrap = bootstrap_servers
    app_id, source, table_topic, sink = (unique_topic("gj-kill"), unique_topic("gj-stream"), unique_topic("gj-table"),
                                         unique_topic("gj-out"))  # fmt: skip
    for topic in (source, table_topic, sink):
        await create_topic(bootstrap, topic, PARTITIONS)
    base = base_time()
    table, stream, expected = join_input(base)
    flush = [Rec(key.encode(), b"flush", timestamp_ms=base + 300_000) for key in KEYS]  # they stay buffered
    args = ("--topology", "join", "--table", table_topic)
    await produce(bootstrap, table_topic, table)
    with AppProcesses(tmp_path, bootstrap, app_id, source, sink, MODULE) as procs:
        a = procs.start("a", "exactly_once", *args)
        await a.wait_running(timeout=90)
        await wait_all_committed(bootstrap, app_id, table_topic, timeout=60)
        await produce(bootstrap, source, stream[:400])
        await wait_all_committed(bootstrap, app_id, source, timeout=60)
        # a second instance joins mid-stream: a task (and its buffered records) moves to it
        feeding = asyncio.create_task(produce_slowly(bootstrap, source, stream[400:800], chunk=40, pause=0.1))
        b = procs.start("b", "exactly_once", *args)
        await b.wait_running(timeout=90)
        await feeding
        await wait_all_committed(bootstrap, app_id, source, timeout=60)
        moved = tasks_created(b)
        # kill -9 the first mid-stream, in an open transaction if one is caught
        feeding = asyncio.create_task(produce_slowly(bootstrap, source, stream[800:], chunk=40, pause=0.1))
        await asyncio.sleep(0.5)
        in_txn = await kill_in_open_transaction(a, bootstrap, [sink, f"{app_id}-graced-Buffer-changelog"])
        await feeding
        await produce(bootstrap, source, flush)
        a = procs.start("a", "exactly_once", *args)
        await a.wait_running(timeout=90)
        await wait_all_committed(bootstrap, app_id, source, timeout=60)
        await wait_all_committed(bootstrap, app_id, table_topic, timeout=60)
        assert await b.terminate() == 0, b.log_tail()
        assert await a.terminate() == 0, a.log_tail()
    assert moved >= 1, f"no task moved to the second instance:\n{b.log_tail()}"
    output = Counter(
        (r.value or b"").decode() for r in await read_all(bootstrap, sink, isolation_level="read_committed", timeout=30)
    )
    missing, extra = expected - output, output - expected
    context = f"(kill {'in' if in_txn else 'outside'} an open transaction; {moved} task(s) created on the joiner)"
    assert not missing and not extra, f"missing {sorted(missing)[:10]}, extra {sorted(extra)[:10]} {context}"
