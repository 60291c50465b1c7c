"""Issue 15: state damaged while an instance is down is noticed, wiped and restored exactly.

A counting application (`tests/integration/apps/counting_app.py`: count per key in a logged
SQLite store, 1,000 keys over 2 partitions, so each store file has several pages) runs once;
two snapshots of its state directory are kept: one taken mid-stream, as a kill -9 leaves it
(WAL file, the checkpoint of the last commit, no digest), and one after a clean close.

Each case copies a snapshot, damages task 0_0 one way and task 0_1 another (`tests/chaos/faults.py`),
restarts an instance on the copy, and checks that it runs, that a damaged task was rebuilt
from its whole changelog, that every key answers its exact count through the interactive
query API (a planted row the changelog never had does not survive), and that the counts go on
correctly with more input. The truth accumulates over the cases (they share one application).
"""

from __future__ import annotations

import random
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from streams_core import QueryableStoreTypes, TaskId
from tests.chaos.faults import DAMAGES, STALE_KEY
from tests.integration.apps.counting_app import STORE, build_topology, streams_config
from tests.integration.apps.harness import (
    InputFeeder,
    changelog_topic,
    checkpoints,
    end_offsets,
    read_latest,
    restored_by_task,
    running_instance,
    wait_all_committed,
)
from tests.kafka_utils import create_topic, unique_topic

pytestmark = [pytest.mark.broker, pytest.mark.chaos]

PARTITIONS = 2
KEYS = [f"word-{i:04d}" for i in range(1000)]


@dataclass
class Origin:
    """The application all cases share, its two snapshots and the truth so far."""

    bootstrap: str
    root: Path
    app_id: str = field(default_factory=lambda: unique_topic("damage"))
    input: str = field(default_factory=lambda: unique_topic("damage-in"))
    output: str = field(default_factory=lambda: unique_topic("damage-out"))
    truth: Counter[str] = field(default_factory=Counter)
    seed: int = 0

    @property
    def changelog(self) -> str:
        return changelog_topic(self.app_id)

    def config(self, state_dir: Path) -> dict[str, Any]:
        return streams_config(self.bootstrap, self.app_id, state_dir)

    async def feed(self, total: int) -> None:
        self.seed += 1
        feeder = InputFeeder(self.bootstrap, self.input, KEYS, total, chunk=1000, pause=0, seed=self.seed)
        self.truth.update(await feeder.run())


@pytest.fixture(scope="module")
async def origin(bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory) -> Origin:
    o = Origin(bootstrap_servers, tmp_path_factory.mktemp("damage"))
    await create_topic(o.bootstrap, o.input, PARTITIONS)
    await create_topic(o.bootstrap, o.output, PARTITIONS)
    live = o.root / "live"
    async with running_instance(build_topology(o.input, o.output), o.config(live)):
        await o.feed(6_000)
        await wait_all_committed(o.bootstrap, o.app_id, o.input)
        await o.feed(500)  # processed but maybe not committed nor checkpointed: the kill lands here
        # The stream thread is a task of this event loop and nothing awaits here: the copy is the
        # files exactly as a kill -9 at this moment would leave them (page cache included).
        shutil.copytree(live, o.root / "kill", ignore=shutil.ignore_patterns(".lock"))
        await wait_all_committed(o.bootstrap, o.app_id, o.input)
    shutil.copytree(live, o.root / "clean", ignore=shutil.ignore_patterns(".lock"))
    assert not list((o.root / "kill").rglob("*.crc32")), "a running store has no digest"
    assert len(list((o.root / "clean").rglob("*.crc32"))) == PARTITIONS
    return o


CASES = [
    # snapshot, damage of task 0_0, damage of task 0_1
    ("clean", "none", "none"),
    ("clean", "sqlite-deleted", "sqlite-truncated-0"),
    ("clean", "sqlite-truncated-half", "sqlite-header-garbage"),
    ("clean", "sqlite-middle-garbage", "sqlite-one-bit-in-a-count"),
    ("clean", "checkpoint-garbage", "checkpoint-truncated"),
    ("clean", "checkpoint-wrong-version", "state-dir-deleted"),
    ("kill", "none", "checkpoint-deleted"),
    # Not garbage in the file of a killed instance: its WAL may hold newer copies of the damaged
    # pages, which SQLite reads instead (harmless, and the next WAL checkpoint overwrites them).
    ("kill", "sqlite-truncated-0", "sqlite-deleted"),
    ("kill", "checkpoint-past-the-end", "checkpoint-garbage"),
]


@pytest.mark.parametrize(("snapshot", "damage0", "damage1"), CASES, ids=[f"{s}:{a}+{b}" for s, a, b in CASES])
async def test_damaged_state_is_noticed_wiped_and_restored_exactly(
    origin: Origin, snapshot: str, damage0: str, damage1: str
) -> None:
    o = origin
    case_dir = o.root / f"{snapshot}-{damage0}-{damage1}"
    shutil.copytree(o.root / snapshot, case_dir)
    app_dir = case_dir / o.app_id
    left = checkpoints(case_dir, o.app_id)
    rnd = random.Random(f"{damage0}/{damage1}")
    for partition, name in enumerate((damage0, damage1)):
        task_dir = app_dir / str(TaskId(0, partition))
        if name == "state-dir-deleted":
            shutil.rmtree(task_dir)
        else:
            DAMAGES[name].apply(task_dir, rnd)
    full = {p for p, name in enumerate((damage0, damage1)) if name == "state-dir-deleted" or DAMAGES[name].expect_full_restore}
    ends = await end_offsets(o.bootstrap, o.changelog)

    async with running_instance(build_topology(o.input, o.output), o.config(case_dir)) as streams:
        restored = restored_by_task(streams)
        task_manager = streams.threads[0].task_manager
        assert task_manager is not None
        wiped = task_manager.corrupted_tasks
        store = streams.store(STORE, QueryableStoreTypes.key_value_store())
        wrong = {k: (store.get(k), o.truth[k]) for k in KEYS if store.get(k) != o.truth[k]}
        assert not wrong, f"{len(wrong)} wrong answers after the restart, e.g. {list(wrong.items())[:5]}"
        assert store.get(STALE_KEY) is None, "a row the changelog never had survived"
        await o.feed(300)
        await wait_all_committed(o.bootstrap, o.app_id, o.input)
        wrong = {k: (store.get(k), o.truth[k]) for k in KEYS if store.get(k) != o.truth[k]}
        assert not wrong, f"{len(wrong)} counts went on wrong, e.g. {list(wrong.items())[:5]}"

    for p in range(PARTITIONS):
        if p in full:
            assert restored[TaskId(0, p)] == ends[p], f"task 0_{p} ({(damage0, damage1)[p]}) was not rebuilt from scratch"
        else:
            tail = ends[p] - left[TaskId(0, p)][(o.changelog, p)]
            assert restored[TaskId(0, p)] == tail, f"task 0_{p} restored more than its changelog tail"
    # Corrupted tasks are noticed and wiped, not failed: only the corrupt files count (a missing
    # checkpoint or directory is a normal full restore, no wipe).
    detected = {"none", "state-dir-deleted", "checkpoint-deleted"}
    assert wiped == sum(1 for name in (damage0, damage1) if name not in detected)


async def test_the_changelog_agrees_with_the_truth_after_all_cases(origin: Origin) -> None:
    """Last (it runs after the cases): every case's counting went into the changelog exactly."""
    changelog = await read_latest(origin.bootstrap, origin.changelog)
    assert changelog == dict(origin.truth)
