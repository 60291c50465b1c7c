"""Exactly-once without wipes against the real broker (issue 35 item 3; docs/state.md).

The counting application (`tests/integration/apps/counting_app.py`) runs under exactly-once as a
real process and is killed with SIGKILL while input arrives. Its SQLite store file holds the
changelog offsets its committed data reflects; the restart (in this event loop, to look at the
tasks) must restore only the committed changelog records from there, not the whole changelog,
and the result must still be exactly-once: every key's committed outputs are 1..n and the store
holds the true counts.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from streams_core import TaskId
from tests.integration.apps.counting_app import build_topology, streams_config
from tests.integration.apps.harness import (
    AppProcesses,
    InputFeeder,
    changelog_topic,
    not_one_to_n,
    read_latest,
    restored_by_task,
    running_instance,
    sequences_by_key,
    store_contents,
    wait_all_committed,
)
from tests.kafka_utils import create_topic, read_all, unique_topic

pytestmark = pytest.mark.broker

PARTITIONS = 2
KEYS = [f"key-{i:03d}" for i in range(200)]
ALL_TASKS = [TaskId(0, p) for p in range(PARTITIONS)]


def stored_offsets(state_dir: Path, app_id: str, changelog: str) -> dict[int, int]:
    """Changelog partition -> the next offset each task's store file says its committed data reflects."""
    found: dict[int, int] = {}
    for path in sorted((state_dir / app_id).glob("*/counts.sqlite")):
        conn = sqlite3.connect(path)  # the instance is dead: a plain connection is safe
        try:
            for partition, offset in conn.execute(
                "SELECT partition, next_offset FROM changelog_offsets WHERE topic = ?", (changelog,)
            ):
                found[int(partition)] = int(offset)
        finally:
            conn.close()
    return found


@pytest.mark.slow
async def test_kill_9_under_exactly_once_restores_only_the_tail_and_stays_exactly_once(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("txstate"), unique_topic("txstate-in"), unique_topic("txstate-out")
    changelog = changelog_topic(app_id)
    await create_topic(bootstrap, source, PARTITIONS)
    await create_topic(bootstrap, sink, PARTITIONS)
    feeder = InputFeeder(bootstrap, source, KEYS, 24_000, chunk=400, pause=0.1, seed=35)
    try:
        with AppProcesses(tmp_path, bootstrap, app_id, source, sink) as procs:
            first = procs.start("a", "exactly_once")
            await first.wait_running(timeout=90)
            feeder.start()
            # Long enough for a changelog of thousands of records, with input still arriving after.
            await asyncio.sleep(4.0)
            assert not feeder.done, "input finished before the kill: make the feeder slower"
            first.kill()
        # A commit the kill interrupted finishes on the broker within moments; one still open
        # stays invisible to read_committed and is aborted when the restart's producer fences it.
        await asyncio.sleep(1.0)
        stored = stored_offsets(tmp_path / "a", app_id, changelog)
        committed = await read_all(bootstrap, changelog, isolation_level="read_committed", timeout=30)
        whole = {p: sum(1 for r in committed if r.partition == p) for p in range(PARTITIONS)}
        tail = {p: sum(1 for r in committed if r.partition == p and r.offset >= stored.get(p, 0)) for p in range(PARTITIONS)}
        assert set(stored) == set(range(PARTITIONS)), f"every store file holds its offsets: {stored}"

        config = streams_config(bootstrap, app_id, tmp_path / "a", "exactly_once")
        async with running_instance(build_topology(source, sink), config, timeout=90, tasks=ALL_TASKS) as streams:
            restored = restored_by_task(streams)
            truth = await feeder.wait()
            await wait_all_committed(bootstrap, app_id, source, timeout=90)
            store = store_contents(streams)
    finally:
        await feeder.aclose()

    # Restored exactly the committed changelog records past the stored offsets: the tail, not all.
    assert restored == {TaskId(0, p): tail[p] for p in range(PARTITIONS)}, (stored, tail, whole)
    assert sum(whole.values()) > 1000, whole
    assert sum(tail.values()) < sum(whole.values()) / 2, (tail, whole)

    outputs = await read_all(bootstrap, sink, isolation_level="read_committed", timeout=30)
    sequences = sequences_by_key(outputs)
    wrong = not_one_to_n(sequences, truth)
    assert not wrong, f"keys whose committed outputs are not exactly 1..n: (outputs, n) = {wrong}"
    assert len(outputs) == sum(truth.values())
    assert store == dict(truth)
    assert await read_latest(bootstrap, changelog, "read_committed") == dict(truth)
    print(
        f"\nkill -9 under exactly-once: {sum(truth.values())} records; the restart restored "
        f"{sum(restored.values())} of {sum(whole.values())} committed changelog records (stored offsets {stored})"
    )
