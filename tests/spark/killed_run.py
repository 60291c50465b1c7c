"""Runs killed with SIGKILL mid-way: a job in a process of its own, and the kill once it has written.

As a process (`kill_once_written` starts it), a SparkRunner job, `available_now`, a few records
per micro-batch (`_MAX_OFFSETS`), local[2]:

    python -m tests.spark.killed_run combine BOOTSTRAP CHECKPOINT_DIR OUTPUT SOURCE
    python -m tests.spark.killed_run join-count BOOTSTRAP CHECKPOINT_DIR OUTPUT USERS CLICKS
    python -m tests.spark.killed_run sessions BOOTSTRAP CHECKPOINT_DIR OUTPUT SOURCE
    python -m tests.spark.killed_run stream-join BOOTSTRAP CHECKPOINT_DIR OUTPUT LEFT RIGHT
    python -m tests.spark.killed_run session-aggregate BOOTSTRAP CHECKPOINT_DIR OUTPUT SOURCE
    python -m tests.spark.killed_run window-aggregate BOOTSTRAP CHECKPOINT_DIR OUTPUT SOURCE
    python -m tests.spark.killed_run fk-join BOOTSTRAP CHECKPOINT_DIR OUTPUT ORDERS CUSTOMERS
    python -m tests.spark.killed_run versioned-join BOOTSTRAP CHECKPOINT_DIR OUTPUT PRICES ORDERS

`combine`: test_native_combine's per-letter sum; `join-count`: test_native_join_count's clicks
joined with users, counted per region; `sessions`: test_native_session_count's session count;
`stream-join`: test_native_stream_join's outer join within `STREAM_JOIN_WINDOWS`;
`session-aggregate`: test_native_session_aggregate's session aggregate; `window-aggregate`:
test_native_window_aggregate's hopping aggregate (`WINDOW_AGGREGATE`); `fk-join`: test_fk_join's
foreign-key left join; `versioned-join`: test_versioned_table's stream-table join with a grace
period (`VERSIONED_GRACE_MS`). The tests that kill them:
tests/spark/test_killed_runs.py.
"""

from __future__ import annotations

import asyncio
import operator
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from streams_core import JoinWindows, Topology
from streams_core.spark import SparkRunner
from tests.kafka_utils import read_all

ROOT = Path(__file__).parents[2]
#: Records per micro-batch (Spark's `maxOffsetsPerTrigger`) of each job: several micro-batches each.
_MAX_OFFSETS = {"combine": "50", "join-count": "40", "sessions": "20", "stream-join": "40", "session-aggregate": "20",
                "window-aggregate": "20", "fk-join": "6", "versioned-join": "1"}  # fmt: skip
#: The `stream-join` job's windows: 200 ms either side, 1 s grace (matched pairs, and unmatched records
#: emitted as stream time closes their windows, both within the input's span).
STREAM_JOIN_WINDOWS = JoinWindows.of_time_difference_and_grace(200, 1_000)
#: The `window-aggregate` job's windows: size, advance and grace (ms), hopping.
WINDOW_AGGREGATE = (20_000, 10_000, 15_000)
#: The `versioned-join` job's grace period (ms): orders buffered until stream time passes them by it.
VERSIONED_GRACE_MS = 100


def command(job: str, bootstrap: str, checkpoints: Path, output: str, *topics: str) -> list[str]:
    """The command line running `job` (see the module's doc)."""
    return [sys.executable, "-m", "tests.spark.killed_run", job, bootstrap, str(checkpoints), output, *topics]


async def kill_once_written(job: list[str], bootstrap: str, output: str, *, deadline_s: float = 240) -> None:
    """Start `job`, SIGKILL its process group once `output` holds a record (mid-run: it must still be
    running then), within `deadline_s`."""
    victim = subprocess.Popen(job, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + deadline_s
        while True:
            assert victim.poll() is None, "the run ended before it could be killed"
            try:
                written = len(await read_all(bootstrap, output, timeout=5))
            except TimeoutError:
                written = 0
            if written > 0:
                return
            assert time.monotonic() < deadline, "no progress to kill"
            await asyncio.sleep(0.2)
    finally:
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)


async def run_to_end(job: list[str], *, timeout_s: float = 300) -> None:
    """Run `job` to its end (from the killed run's checkpoint); it must succeed."""
    done = await asyncio.to_thread(subprocess.run, job, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]


def _topology(job: str, output: str, topics: list[str]) -> Topology:
    if job == "combine":
        from tests.spark.test_native_combine import by_letter

        (source,) = topics
        return by_letter(operator.add)(source, output)
    if job == "sessions":
        from tests.spark.test_native_session_count import sessions_topology

        (source,) = topics
        return sessions_topology(source, output, 10_000, 20_000, origin=0)  # this process's T0 is not the test's
    if job == "stream-join":
        from tests.spark.test_native_stream_join import joined

        left, right = topics
        return joined(left, right, output, STREAM_JOIN_WINDOWS, kind="outer_join")
    if job == "session-aggregate":
        from tests.spark.test_native_session_aggregate import topology

        (source,) = topics
        return topology(source, output, 10_000, 20_000, "aggregate", origin=0)
    if job == "window-aggregate":
        from tests.spark.test_native_window_aggregate import topology as windowed

        (source,) = topics
        return windowed(source, output, *WINDOW_AGGREGATE, "aggregate", origin=0)
    if job == "fk-join":
        from tests.spark.test_fk_join import topology as fk_joined

        orders, customers = topics
        return fk_joined("left", orders, customers, output)
    if job == "versioned-join":
        from tests.spark.test_versioned_table import topology as versioned

        prices, orders = topics
        return versioned(prices, orders, output, grace_ms=VERSIONED_GRACE_MS)
    from tests.spark.test_native_join_count import per_region

    users, clicks = topics
    return per_region(users, clicks, output, "count")


def main(job: str, bootstrap: str, checkpoints: str, output: str, *topics: str) -> int:
    config = {"application.id": f"{job}-{output}", "bootstrap.servers": bootstrap, "spark.master": "local[2]",
              "spark.sql.shuffle.partitions": "2"}  # fmt: skip
    runner = SparkRunner(_topology(job, output, list(topics)), config, source_options={"maxOffsetsPerTrigger": _MAX_OFFSETS[job]},
                         progress=False)  # fmt: skip
    runner.run("available_now", checkpoints)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
