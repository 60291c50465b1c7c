"""Standby tasks the broker assigns (issue 39, KIP-1071): always under `group.protocol=streams`.

Under the streams protocol the standby count is the group's (`streams.num.standby.replicas`, set on
the group before its members join; the test broker's default is 0), and our member takes the standby
tasks the broker gives it. Two instances of the counting app over two partitions, exactly-once: the
broker gives each one active task and a standby of the other's (StreamsGroupDescribe shows it), the
in-process instance's standby store follows the changelog, and when the other instance (a process)
is killed with SIGKILL or closes, the broker promotes the standby, which restores only the tail of
the changelog; every count stays exact.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from streams_core import State, TaskId
from streams_core.clients.streams_group_channel import StreamsGroupChannel
from streams_core.clients.streams_group_protocol import StreamsGroupDescription
from streams_core.common.partitioner import default_partition
from streams_core.common.topic_partition import TopicPartition
from tests.integration.apps.counting_app import build_topology, streams_config
from tests.integration.apps.harness import (
    AppProcesses,
    InputFeeder,
    changelog_topic,
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
from tests.integration.group_protocol import GROUP_STANDBY_REPLICAS, set_group_configs
from tests.integration.streams_testkit import wait_until
from tests.kafka_utils import create_topic, read_all, unique_topic

pytestmark = pytest.mark.broker

PARTITIONS = 2
ALL_TASKS = frozenset(TaskId(0, p) for p in range(PARTITIONS))
KEYS = [f"key-{i:04d}" for i in range(500)]
STREAMS = {"group.protocol": "streams"}


async def _describe(bootstrap: str, group: str) -> StreamsGroupDescription:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return await StreamsGroupChannel(admin, group).describe()
    finally:
        await admin.close()


def _each_has_a_standby_of_the_other(group: StreamsGroupDescription) -> bool:
    """Two members, reconciled, each running one task and holding the other's as a standby."""
    members = group.members
    if len(members) != 2 or any(m.assignment != m.target_assignment for m in members):
        return False
    first, second = (m.assignment for m in members)
    return (
        len(first.active) == 1
        and first.active | second.active == ALL_TASKS
        and first.standby == second.active
        and second.standby == first.active
    )


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["kill -9", "close"])
async def test_the_brokers_standby_follows_the_changelog_and_takes_over_restoring_only_the_tail(
    bootstrap_servers: str, tmp_path: Path, ending: str
) -> None:
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("sg-standby"), unique_topic("sg-standby-in"), unique_topic("sg-standby-out")
    changelog = changelog_topic(app_id)
    await create_topic(bootstrap, source, PARTITIONS)
    await create_topic(bootstrap, sink, PARTITIONS)
    await set_group_configs(bootstrap, app_id, {GROUP_STANDBY_REPLICAS: 1})
    # num.standby.replicas=0 on our side: the broker's group config alone decides the standbys.
    config = streams_config(bootstrap, app_id, tmp_path / "b", "exactly_once", extra=STREAMS)
    feeder = InputFeeder(bootstrap, source, KEYS, 4_000, chunk=200, pause=0.1, seed=3)
    figures: dict[str, object] = {"ending": ending}
    try:
        with AppProcesses(tmp_path, bootstrap, app_id, source, sink) as procs:
            other = procs.start("a", "exactly_once", "--group-protocol", "streams")
            await other.wait_running()
            async with running_instance(build_topology(source, sink), config) as survivor:
                tm = survivor.threads[0].task_manager
                assert tm is not None

                def split() -> bool:
                    return (
                        survivor.state is State.RUNNING
                        and len(tm.tasks) == 1
                        and set(tm.tasks) | set(tm.standby_tasks) == ALL_TASKS
                    )

                await wait_until(split, 45, message=lambda: f"tasks {set(tm.tasks)}, standbys {set(tm.standby_tasks)}")
                group: StreamsGroupDescription | None = None

                async def described() -> bool:
                    nonlocal group
                    group = await _describe(bootstrap, app_id)
                    return _each_has_a_standby_of_the_other(group)

                await wait_until(described, 30, message=lambda: f"the broker's assignment: {group}")
                (standby_id,) = tm.standby_tasks
                standby_tp = TopicPartition(changelog, standby_id.partition)

                # A changelog of ~10,000 records per partition: the standby store follows it.
                initial = await InputFeeder(bootstrap, source, KEYS, 20_000, pause=0, seed=2).run()
                await wait_all_committed(bootstrap, app_id, source)
                ends = await next_offsets_after_records(bootstrap, changelog)

                def standby_caught_up() -> bool:
                    standby = tm.standby_tasks.get(standby_id)
                    return (
                        standby is not None
                        and standby.state_manager.changelog_offsets.get(standby_tp) == ends[standby_id.partition]
                    )

                await wait_until(standby_caught_up, 30, message=lambda: f"standby at {tm.standby_tasks[standby_id].state_manager.changelog_offsets}, ends {ends}")  # fmt: skip
                standby_store: Any = tm.standby_tasks[standby_id].state_manager.get_store("counts")
                expected = {
                    k: v for k, v in dict(initial).items() if default_partition(k.encode(), PARTITIONS) == standby_id.partition
                }
                assert dict(standby_store.all()) == expected, "the standby store is not the changelog's latest values"
                figures["standby replicated"] = tm.standby_tasks[standby_id].updated_records

                # More input while the other instance ends: its task's changelog grows past the standby's checkpoint.
                feeder.start()
                await asyncio.sleep(1.0)
                assert not feeder.done
                if ending == "kill -9":
                    figures["killed in open transaction"] = await kill_in_open_transaction(other, bootstrap, [sink, changelog])
                else:
                    assert await other.terminate() == 0, other.log_tail()
                ended = time.monotonic()
                await wait_until(
                    lambda: survivor.state is State.RUNNING and set(tm.tasks) == ALL_TASKS,
                    45,
                    message=lambda: f"survivor {survivor.state.name} with tasks {set(tm.tasks)}",
                )
                figures["takeover seconds"] = round(time.monotonic() - ended, 1)
                restored = tm.tasks[standby_id].restored_records
                changelog_size = (await end_offsets(bootstrap, changelog))[standby_id.partition]
                extra = await feeder.wait()
                await wait_all_committed(bootstrap, app_id, source)
                store = store_contents(survivor)
                after = await _describe(bootstrap, app_id)
    finally:
        await feeder.aclose()

    figures |= {"restored on takeover": restored, "changelog size": changelog_size}
    print(f"\nstreams group standby takeover: {figures}")
    (member,) = after.members
    assert member.assignment.active == ALL_TASKS and not member.assignment.standby, after
    # Without the standby the promoted task would restore the whole partition (~10,000 records).
    assert changelog_size > 5_000, figures
    assert restored < changelog_size / 10, figures
    truth = initial + extra
    assert store == dict(truth)
    assert store == await read_latest(bootstrap, changelog, "read_committed")
    committed = await read_all(bootstrap, sink, isolation_level="read_committed")
    assert not not_one_to_n(sequences_by_key(committed), truth), "duplicates or gaps in the committed output"
