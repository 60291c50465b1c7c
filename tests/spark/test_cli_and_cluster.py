"""The Spark word count as users run it: `python -m app wordcount --engine spark`, in processes of its own.

- killed with SIGKILL in the middle of a run, then rerun: the totals are right (the checkpoint
  keeps offsets and the count's state together; a batch written twice writes the same counts);
- on a standalone Spark cluster (a master and a worker started from the pyspark installation on
  127.0.0.1): user functions are shipped to executor processes, as on a real cluster.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams_core.spark.local_cluster import local_standalone_cluster
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import BASE_TS, long_be, read_table, utf8

pytestmark = pytest.mark.slow

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def text(count: int) -> list[str]:
    return [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(1 + i % 6)) for i in range(count)]


def cli(bootstrap: str, state_dir: Path, suffix: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "app", "--log-level", "WARNING", "wordcount", "--engine", "spark",
            "--bootstrap-servers", bootstrap, "--state-dir", str(state_dir), "--application-id", f"cli-{suffix}",
            "--input-topic", f"lines-{suffix}", "--output-topic", f"counts-{suffix}", *extra]


async def prepare(bootstrap: str, suffix: str, lines: list[str]) -> None:
    for topic in (f"lines-{suffix}", f"counts-{suffix}"):
        await create_topic(bootstrap, topic, partitions=4)
    await produce(bootstrap, f"lines-{suffix}", [Rec(f"l{i}".encode(), line.encode(), timestamp_ms=BASE_TS + i) for i, line in enumerate(lines)])


def run_cli(command: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr[-3000:]
    return done


async def test_a_killed_run_rerun_ends_with_the_right_totals(bootstrap_servers: str, tmp_path: Path) -> None:
    suffix = unique_topic("kill")
    lines = text(1200)
    await prepare(bootstrap_servers, suffix, lines)
    command = cli(bootstrap_servers, tmp_path, suffix, "--autostop", "eol", "--max-offsets-per-trigger", "40")
    # The word count is one native query (no repartition topic): killed once it has written the
    # counts of its first micro-batches, rerun from its checkpoint.
    output = f"counts-{suffix}"

    victim = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=Path(__file__).parents[2],
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while True:  # kill once the query has written part of its output, mid-run
            assert victim.poll() is None, "the run ended before it could be killed"
            try:
                written = len(await read_all(bootstrap_servers, output, timeout=5))
            except TimeoutError:
                written = 0
            if written > 0:
                break
            assert time.monotonic() < deadline, "no progress to kill"
            await asyncio.sleep(0.2)
    finally:
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)

    expected = Counter(word for line in lines for word in line.split())
    assert await read_table(bootstrap_servers, output, utf8, long_be) != dict(expected), "killed mid-run"
    done = await asyncio.to_thread(run_cli, command)
    assert "done:" in done.stdout
    assert await read_table(bootstrap_servers, output, utf8, long_be) == dict(expected)


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[str]:
    """A Spark master and one worker (1 core, 1 GiB) on 127.0.0.1, from the pyspark installation."""
    with local_standalone_cluster(tmp_path) as url:
        yield url


async def test_word_count_on_a_standalone_cluster(bootstrap_servers: str, tmp_path: Path, standalone_cluster: str) -> None:
    suffix = unique_topic("cluster")
    lines = text(200)
    await prepare(bootstrap_servers, suffix, lines)
    command = cli(bootstrap_servers, tmp_path / "state", suffix, "--autostop", "eol", "--spark-master", standalone_cluster)
    done = await asyncio.to_thread(run_cli, command)
    assert "done: 200 lines" in done.stdout
    expected = Counter(word for line in lines for word in line.split())
    assert await read_table(bootstrap_servers, f"counts-{suffix}", utf8, long_be) == dict(expected)
    executors = list((tmp_path / "work").glob("app-*/*/stderr"))
    assert executors, "the work ran in executor processes of the worker"
