"""Standby tasks the streams group assigns (KIP-1071), on the fake cluster's fake coordinator.

The standby count is the group's (`FakeStreamsGroupCoordinator.num_standby_replicas`, the broker's group
config `streams.num.standby.replicas`), not the client's. The member hands the standbys to the thread
as the classic assignor's standbys: they follow the changelog, and a task promoted to active restores
only what its standby has not read yet. Only stateful tasks get standbys, as on the broker: a read-only
store's task too, whose changelog is its source topic (the topology lists it, as Java's does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streams_core import Processor, ProcessorContext, Record, Serdes, Stores, Topology
from streams_core.common.task_id import TaskId
from streams_core.testing.fake_streams_group import fake_streams_group

from .harness import (
    APP,
    Instance,
    cluster_with,
    eventually,
    output_counts,
    passthrough_topology,
    produce_rounds,
    streams_config,
)
from .test_streams_group_runtime import last_counts, start

ALL = {TaskId(0, p) for p in range(4)}


async def each_holds_a_standby_of_the_others_tasks(*instances: Instance) -> None:
    def done() -> bool:
        return all(
            i.tasks() and i.standby_tasks() == ALL - i.tasks() and i.streams.state.name == "RUNNING" for i in instances
        ) and sum(len(i.tasks()) for i in instances) == len(ALL)

    await eventually(done, timeout=5, what="each instance RUNNING with the other's tasks as standbys")


def restored(instance: Instance) -> dict[TaskId, int]:
    return {t: task.restored_records for thread in instance.streams.threads if thread.task_manager
            for t, task in thread.task_manager.tasks.items()}  # fmt: skip


async def test_the_groups_standbys_follow_the_changelog_and_a_promoted_task_restores_nothing(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    fake_streams_group(cluster, APP).num_standby_replicas = 1  # the client's num.standby.replicas stays 0
    first = await start(cluster, tmp_path, 0)
    second = await start(cluster, tmp_path, 1)
    await each_holds_a_standby_of_the_others_tasks(first, second)
    sent = produce_rounds(cluster, 3)
    await eventually(lambda: last_counts(cluster) == dict(sent), what="the counts")
    promoted = ALL - second.tasks()

    def standbys_caught_up() -> bool:
        tm = second.streams.threads[0].task_manager
        return tm is not None and all(tm.standby_tasks[t].updated_records > 0 for t in promoted if t in tm.standby_tasks)

    await eventually(standbys_caught_up, what="the standbys read the changelog")
    await eventually(lambda: first.checkpoint(str(next(iter(promoted)))) != {}, what="the first's checkpoint")
    await first.close()
    await eventually(lambda: second.tasks() == ALL and not second.standby_tasks(), what="the second runs every task")
    assert {t: n for t, n in restored(second).items() if t in promoted} == dict.fromkeys(promoted, 0)
    sent += produce_rounds(cluster, 2, start_ts=1000)
    await eventually(lambda: last_counts(cluster) == dict(sent), what="counts after the takeover")
    await second.close()
    for key, values in output_counts(cluster).items():
        assert values == list(range(1, sent[key] + 1)), f"{key}: {values}"


async def test_a_stateless_task_gets_no_standby(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    coordinator = fake_streams_group(cluster, APP)
    coordinator.num_standby_replicas = 1
    config = {"group.protocol": "streams"}
    instances = [Instance(cluster, passthrough_topology(), streams_config(tmp_path, config, instance=i)) for i in range(2)]
    for instance in instances:
        await instance.start(wait=False)
    await eventually(lambda: all(i.tasks() for i in instances), what="both run tasks")
    assert not any(i.standby_tasks() for i in instances) and not any(coordinator.standby_target.values())
    for instance in instances:
        await instance.close()


class _Writer(Processor[str, str, None, None]):
    def init(self, context: ProcessorContext[None, None]) -> None:
        self.store: Any = context.get_state_store("facts-store")

    def process(self, record: Record[str, str]) -> None:
        self.store.put(record.key, record.value)


async def test_a_read_only_stores_task_is_stateful_to_the_group_and_gets_a_standby(tmp_path: Path) -> None:
    """Its changelog is its source topic: left out of the topology, the broker saw a stateless task."""
    cluster = cluster_with(4)
    fake_streams_group(cluster, APP).num_standby_replicas = 1

    def topology() -> Topology:
        store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("facts-store"), Serdes.String(), Serdes.String())
        return Topology().add_read_only_state_store(store, "source", "in", "writer", _Writer)

    config = {"group.protocol": "streams"}
    instances = [Instance(cluster, topology(), streams_config(tmp_path, config, instance=i)) for i in range(2)]
    for instance in instances:
        await instance.start(wait=False)
    await each_holds_a_standby_of_the_others_tasks(*instances)
    for instance in instances:
        await instance.close()
