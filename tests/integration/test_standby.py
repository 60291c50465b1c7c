"""Standby replicas (issue 5): a killed instance's tasks move to the standby holder, which resumes
with only the changelog tail to restore.

Two instances of the counting app with `num.standby.replicas=1` over two partitions: each runs
one task and keeps a standby of the other's. The instance to kill is a real process (kill -9);
the survivor runs in this event loop so the test can read its tasks' `restored_records`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from streams_core import State, TaskId
from streams_core.common.topic_partition import TopicPartition
from tests.integration.apps.counting_app import build_topology, streams_config
from tests.integration.apps.harness import (
    AppProcesses,
    InputFeeder,
    changelog_topic,
    checkpoints,
    end_offsets,
    kill_in_open_transaction,
    next_offsets_after_records,
    not_one_to_n,
    read_latest,
    running_instance,
    sequences_by_key,
    store_contents,
    wait_all_committed,
)
from tests.integration.group_protocol import standby_replicas_of_the_group
from tests.integration.streams_testkit import wait_until
from tests.kafka_utils import create_topic, read_all, unique_topic

pytestmark = pytest.mark.broker

PARTITIONS = 2
ALL_TASKS = {TaskId(0, p) for p in range(PARTITIONS)}
KEYS = [f"key-{i:04d}" for i in range(500)]


@pytest.mark.slow
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_killed_active_moves_to_the_standby_holder_which_restores_only_the_tail(
    bootstrap_servers: str, tmp_path: Path, guarantee: str
) -> None:
    bootstrap = bootstrap_servers
    exactly_once = guarantee == "exactly_once"
    isolation = "read_committed" if exactly_once else "read_uncommitted"
    app_id, source, sink = unique_topic("standby"), unique_topic("standby-in"), unique_topic("standby-out")
    changelog = changelog_topic(app_id)
    await create_topic(bootstrap, source, PARTITIONS)
    await create_topic(bootstrap, sink, PARTITIONS)
    config = streams_config(bootstrap, app_id, tmp_path / "b", guarantee, standby=1)
    feeder = InputFeeder(bootstrap, source, KEYS, 4_000, chunk=200, pause=0.1, seed=3)
    figures: dict[str, object] = {"guarantee": guarantee}
    await standby_replicas_of_the_group(bootstrap, app_id, 1)
    try:
        with AppProcesses(tmp_path, bootstrap, app_id, source, sink) as procs:
            victim = procs.start("a", guarantee, "--standby", "1")
            await victim.wait_running()
            async with running_instance(build_topology(source, sink), config) as survivor:
                tm = survivor.threads[0].task_manager
                assert tm is not None

                def split() -> bool:
                    return (
                        survivor.state is State.RUNNING
                        and len(tm.tasks) == 1
                        and set(tm.tasks) | set(tm.standby_tasks) == ALL_TASKS
                    )

                await wait_until(split, 45, message=lambda: f"survivor tasks {set(tm.tasks)}, standbys {set(tm.standby_tasks)}")
                (standby_id,) = tm.standby_tasks
                standby_tp = TopicPartition(changelog, standby_id.partition)

                # A changelog of ~10,000 records per partition, replicated by the standby.
                initial = await InputFeeder(bootstrap, source, KEYS, 20_000, pause=0, seed=2).run()
                await wait_all_committed(bootstrap, app_id, source)
                ends = await next_offsets_after_records(bootstrap, changelog, isolation)

                def standby_caught_up() -> bool:
                    standby = tm.standby_tasks.get(standby_id)
                    return standby is not None and standby.state_manager.changelog_offsets.get(standby_tp) == ends[standby_id.partition]

                await wait_until(
                    standby_caught_up, 30, message=lambda: f"standby at {tm.standby_tasks[standby_id].state_manager.changelog_offsets}, ends {ends}"
                )
                figures["standby replicated"] = tm.standby_tasks[standby_id].updated_records
                assert tm.standby_tasks[standby_id].updated_records > 0
                # The standby checkpoints on commit (not only on close).
                await wait_until(
                    lambda: checkpoints(tmp_path / "b", app_id).get(standby_id)
                    == {(changelog, standby_id.partition): ends[standby_id.partition]},
                    10,
                    message=lambda: f"standby checkpoint {checkpoints(tmp_path / 'b', app_id).get(standby_id)}, ends {ends}",
                )

                # More input while the victim dies: its task's changelog grows past the standby's checkpoint.
                feeder.start()
                await asyncio.sleep(1.0)
                assert not feeder.done
                if exactly_once:  # with records of an open transaction on the broker, if it can
                    figures["killed in open transaction"] = await kill_in_open_transaction(
                        victim, bootstrap, [sink, changelog]
                    )
                else:
                    victim.kill()
                killed_at = time.monotonic()
                await wait_until(
                    lambda: survivor.state is State.RUNNING and set(tm.tasks) == ALL_TASKS,
                    45,
                    message=lambda: f"survivor {survivor.state.name} with tasks {set(tm.tasks)}",
                )
                figures["takeover seconds"] = round(time.monotonic() - killed_at, 1)
                restored = tm.tasks[standby_id].restored_records
                changelog_size = (await end_offsets(bootstrap, changelog))[standby_id.partition]

                extra = await feeder.wait()
                await wait_all_committed(bootstrap, app_id, source)
                store = store_contents(survivor)
    finally:
        await feeder.aclose()

    truth = initial + extra
    figures |= {"restored on takeover": restored, "changelog size": changelog_size}
    print(f"\nstandby takeover: {figures}")
    # Without the standby the task would replay the whole changelog partition; with it only the
    # records written since the standby's last checkpoint (a fraction of a second of output).
    assert restored < changelog_size / 10, figures
    assert changelog_size > 5_000, figures
    assert store == await read_latest(bootstrap, changelog, isolation)
    if exactly_once:
        assert store == dict(truth)
        committed = await read_all(bootstrap, sink, isolation_level="read_committed")
        assert not not_one_to_n(sequences_by_key(committed), truth), "duplicates or gaps in the committed output"
    else:
        assert set(store) == set(truth)
        assert not {k: (store[k], n) for k, n in truth.items() if store[k] < n}, "lost updates"


async def test_exactly_once_standby_over_state_left_by_a_crash_starts_from_a_wiped_store(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """Under exactly-once a task directory without a checkpoint may hold writes of aborted
    transactions; a standby opened over it must wipe it, as an active task does, or those writes
    survive (and follow the task when it becomes active there).
    """
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("eos-standby"), unique_topic("eos-standby-in"), unique_topic("eos-standby-out")
    changelog = changelog_topic(app_id)
    await create_topic(bootstrap, source, 1)
    await create_topic(bootstrap, sink, 1)
    task = TaskId(0, 0)
    truth = await InputFeeder(bootstrap, source, KEYS[:50], 500, pause=0, seed=5).run()
    await standby_replicas_of_the_group(bootstrap, app_id, 1)

    def config(instance: str) -> dict[str, object]:
        return streams_config(bootstrap, app_id, tmp_path / instance, "exactly_once", standby=1)

    # Instance b counts everything and stops cleanly; then make its directory look like a crash
    # during a transaction: no checkpoint, and a store write that never reached the changelog.
    async with running_instance(build_topology(source, sink), config("b")):
        await wait_all_committed(bootstrap, app_id, source)
    task_dir = tmp_path / "b" / app_id / str(task)
    (task_dir / ".checkpoint").unlink()
    with contextlib.closing(sqlite3.connect(task_dir / "counts.sqlite")) as db, db:
        db.execute("INSERT INTO key_value (key, value) VALUES (?, ?)", (b"phantom", struct.pack(">q", 99)))

    # a owns the task (it starts first); b, with that directory, gets the standby.
    async with running_instance(build_topology(source, sink), config("a"), tasks={task}) as active:
        assert set(active.threads[0].task_manager.tasks) == {task}  # type: ignore[union-attr]
        async with running_instance(build_topology(source, sink), config("b")) as holder:
            tm = holder.threads[0].task_manager
            assert tm is not None
            expected = await read_latest(bootstrap, changelog, "read_committed")
            assert expected == dict(truth)

            def standby_store() -> dict[str, int]:
                standby = tm.standby_tasks.get(task)
                if standby is None:
                    return {}
                store: Any = standby.state_manager.get_store("counts")
                return dict(store.all())

            await wait_until(
                lambda: {k: v for k, v in standby_store().items() if k != "phantom"} == expected,
                30,
                message=lambda: f"standby store {len(standby_store())} keys, tasks {set(tm.tasks)}",
            )
            assert "phantom" not in standby_store(), "the standby kept a write of an aborted transaction"
