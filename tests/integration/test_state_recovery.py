"""State recovery of a counting application against the real broker (issue 5).

The application (`tests/integration/apps/counting_app.py`) counts records per key in a logged
persistent store and writes `(key, count)` to its output. Instances run as real processes that
are killed with SIGKILL, or in this event loop when a test must look into tasks and stores
(restored record counts, store contents). Both use the same state directory layout, so a
process and an in-process instance can take turns on one `state.dir`.
"""

from __future__ import annotations

import asyncio
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streams_core import TaskId
from tests.integration.apps.counting_app import build_topology, streams_config
from tests.integration.apps.harness import (
    AppProcesses,
    InputFeeder,
    changelog_topic,
    checkpoints,
    committed_offsets,
    end_offsets,
    read_latest,
    restored_by_task,
    running_instance,
    sqlite_store_contents,
    store_contents,
    wait_all_committed,
)
from tests.kafka_utils import create_topic, unique_topic

pytestmark = pytest.mark.broker

PARTITIONS = 2
ALL_TASKS = [TaskId(0, p) for p in range(PARTITIONS)]
KEYS = [f"key-{i:03d}" for i in range(100)]


class Case:
    """Topics and names of one test's application."""

    def __init__(self, bootstrap: str, tmp_path: Path) -> None:
        self.bootstrap = bootstrap
        self.tmp_path = tmp_path
        self.app_id = unique_topic("counting")
        self.input = unique_topic("counting-in")
        self.output = unique_topic("counting-out")
        self.changelog = changelog_topic(self.app_id)

    async def create_topics(self) -> None:
        await create_topic(self.bootstrap, self.input, PARTITIONS)
        await create_topic(self.bootstrap, self.output, PARTITIONS)

    def processes(self) -> AppProcesses:
        return AppProcesses(self.tmp_path, self.bootstrap, self.app_id, self.input, self.output)

    def config(self, instance: str, guarantee: str = "at_least_once", **extra: Any) -> dict[str, Any]:
        """Configuration of an in-process instance on `<tmp>/<instance>` (as the process uses)."""
        return streams_config(self.bootstrap, self.app_id, self.tmp_path / instance, guarantee, extra=extra)

    def topology(self, caching: bool = False) -> Any:
        return build_topology(self.input, self.output, caching=caching)

    def feeder(self, total: int, **kwargs: Any) -> InputFeeder:
        return InputFeeder(self.bootstrap, self.input, KEYS, total, **kwargs)


@pytest.fixture
async def case(bootstrap_servers: str, tmp_path: Path) -> Case:
    s = Case(bootstrap_servers, tmp_path)
    await s.create_topics()
    return s


async def process_to_the_end_and_stop(case: Case, total: int) -> Counter[str]:
    """One process counts `total` records, then stops cleanly (SIGTERM); returns the truth."""
    with case.processes() as procs:
        app = procs.start("a")
        await app.wait_running()
        truth = await case.feeder(total, pause=0).run()
        await wait_all_committed(case.bootstrap, case.app_id, case.input)
        assert await app.terminate() == 0, app.log_tail()
    return truth


@pytest.mark.slow
async def test_kill_9_mid_stream_then_restart_counts_at_least_truth_and_state_equals_changelog(
    case: Case,
) -> None:
    """At-least-once: kill -9 while input arrives; the restarted instance ends with counts >= truth."""
    feeder = case.feeder(20_000, chunk=500, pause=0.1, seed=1)
    try:
        with case.processes() as procs:
            # Commits once a second: the kill lands with processed but uncommitted records.
            first = procs.start("a", "at_least_once", "--commit-interval-ms", "1000")
            await first.wait_running()
            feeder.start()
            await asyncio.sleep(random.uniform(1.5, 3.0))
            assert not feeder.done, "input finished before the kill: make the feeder slower"
            first.kill()
        # What the dead instance left: committed input offsets, checkpoints of its last commit,
        # and changelog records past them.
        committed_at_kill = await committed_offsets(case.bootstrap, case.app_id, case.input)
        left = checkpoints(case.tmp_path / "a", case.app_id)
        ends_at_kill = await end_offsets(case.bootstrap, case.changelog)

        async with running_instance(case.topology(), case.config("a"), tasks=ALL_TASKS) as streams:
            restored = restored_by_task(streams)
            truth = await feeder.wait()
            await wait_all_committed(case.bootstrap, case.app_id, case.input)
            store = store_contents(streams)
        changelog = await read_latest(case.bootstrap, case.changelog)
        output = await read_latest(case.bootstrap, case.output)
    finally:
        await feeder.aclose()

    # The restart replayed exactly the changelog tail past each task's last checkpoint.
    assert restored == {
        TaskId(0, p): ends_at_kill[p] - left.get(TaskId(0, p), {}).get((case.changelog, p), 0)
        for p in range(PARTITIONS)
    }, (left, ends_at_kill)
    assert set(store) == set(truth)
    below = {k: (store[k], n) for k, n in truth.items() if store[k] < n}
    assert not below, f"counts below the truth (lost updates): {below}"
    assert store == changelog, "the restarted store differs from the changelog"
    assert output == store, "the last output count per key differs from the store"
    # Exact at-least-once accounting: each input record writes one changelog record, so the
    # changelog of partition p holds the effects of its first ends_at_kill[p] records; the
    # restart restores them all and reprocesses from the committed offset: the records in
    # between are counted twice, no more, no fewer.
    duplicates = sum(store.values()) - sum(truth.values())
    assert duplicates == sum(ends_at_kill[p] - committed_at_kill.get(p, 0) for p in range(PARTITIONS)), (
        duplicates, ends_at_kill, committed_at_kill, left,
    )
    print(
        f"\nkill -9 at-least-once: {sum(truth.values())} records, {duplicates} counted twice; "
        f"at the kill: committed {committed_at_kill}, checkpoints {left}, changelog ends {ends_at_kill}; "
        f"restart restored {sum(restored.values())} of {sum(ends_at_kill.values())} changelog records"
    )


async def test_deleted_state_dir_is_rebuilt_exactly_from_the_changelog(case: Case) -> None:
    truth = await process_to_the_end_and_stop(case, 5_000)
    changelog_ends = await end_offsets(case.bootstrap, case.changelog)
    shutil.rmtree(case.tmp_path / "a")

    async with running_instance(case.topology(), case.config("a")) as streams:
        restored = restored_by_task(streams)
        store = store_contents(streams)
        metric = streams.metrics()["threads"][0]["restored_records"]
    changelog = await read_latest(case.bootstrap, case.changelog)

    # Every changelog record was replayed (no checkpoint: from the beginning, to the end).
    assert restored == {TaskId(0, p): changelog_ends[p] for p in range(PARTITIONS)}
    assert metric == sum(changelog_ends.values()) > 0
    assert store == changelog == dict(truth)


async def test_clean_shutdown_checkpoints_the_changelog_end_and_the_restart_restores_nothing(
    case: Case,
) -> None:
    truth = await process_to_the_end_and_stop(case, 5_000)
    changelog_ends = await end_offsets(case.bootstrap, case.changelog)

    assert checkpoints(case.tmp_path / "a", case.app_id) == {
        TaskId(0, p): {(case.changelog, p): changelog_ends[p]} for p in range(PARTITIONS)
    }
    assert all(changelog_ends[p] > 0 for p in range(PARTITIONS))
    assert sqlite_store_contents(case.tmp_path / "a", case.app_id) == dict(truth)

    async with running_instance(case.topology(), case.config("a")) as streams:
        restored = restored_by_task(streams)
        store = store_contents(streams)
        metric = streams.metrics()["threads"][0]["restored_records"]
    assert restored == {TaskId(0, p): 0 for p in range(PARTITIONS)}
    assert metric == 0
    assert store == dict(truth)
    # The clean close of the restarted instance checkpoints the same offsets again.
    assert checkpoints(case.tmp_path / "a", case.app_id) == {
        TaskId(0, p): {(case.changelog, p): changelog_ends[p]} for p in range(PARTITIONS)
    }


@pytest.mark.parametrize(
    ("cache_max_bytes", "caching"),
    [(0, False), (10 * 1024 * 1024, False), (0, True), (10 * 1024 * 1024, True)],
    ids=["cache0-plain", "cache10MB-plain", "cache0-caching", "cache10MB-caching"],
)
async def test_cache_on_and_off_give_the_same_final_results(
    case: Case, cache_max_bytes: int, caching: bool
) -> None:
    """Store, last output per key and changelog equal the truth, and so does a rebuild from the changelog."""
    total = 4_000
    truth = await case.feeder(total, pause=0, seed=7).run()
    config = case.config("a", **{"statestore.cache.max.bytes": cache_max_bytes})
    async with running_instance(case.topology(caching), config) as streams:
        await wait_all_committed(case.bootstrap, case.app_id, case.input)
        store = store_contents(streams)
    output = await read_latest(case.bootstrap, case.output)
    changelog = await read_latest(case.bootstrap, case.changelog)
    assert store == output == changelog == dict(truth)
    changelog_records = sum((await end_offsets(case.bootstrap, case.changelog)).values())
    print(f"\ncache {cache_max_bytes} bytes, caching {caching}: {changelog_records} changelog records for {total} inputs")
    if not caching:
        assert changelog_records == total  # one changelog write per update
    elif cache_max_bytes:
        assert changelog_records < total  # the cache compacts repeated writes of a key

    shutil.rmtree(case.tmp_path / "a")
    async with running_instance(case.topology(caching), config) as streams:
        assert sum(restored_by_task(streams).values()) == changelog_records
        assert store_contents(streams) == dict(truth)
