"""Revoke and reassign across instances on one fake cluster, standby tasks, and stale members."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from streams_core import KafkaStreams
from streams_core.common.topic_partition import TopicPartition
from streams_core.testing import FakeKafkaCluster

from .harness import (
    APP,
    CHANGELOG,
    ROUND_WORDS,
    Instance,
    cluster_with,
    eventually,
    output_counts,
    produce_rounds,
    start_counting,
)

EOS = {"processing.guarantee": "exactly_once_v2"}
WORDS = ROUND_WORDS


start = start_counting


async def all_running(cluster: FakeKafkaCluster, *instances: Instance) -> None:
    await eventually(
        lambda: cluster.group_stable(APP)
        and all(i.streams.state is KafkaStreams.State.RUNNING for i in instances),
        what="every instance RUNNING",
    )


async def test_a_second_instance_takes_half_of_the_tasks(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    first = await start(cluster, tmp_path, 0)
    await all_running(cluster, first)
    assert len(first.tasks()) == 4
    second = await start(cluster, tmp_path, 1)
    await all_running(cluster, first, second)
    assert len(first.tasks()) == len(second.tasks()) == 2
    assert first.tasks() | second.tasks() == {t for t in first.tasks() | second.tasks()} and len(first.tasks() | second.tasks()) == 4
    assert ("RUNNING", "REBALANCING") in first.states and first.states[-1] == ("REBALANCING", "RUNNING")
    await second.close()
    await all_running(cluster, first)
    assert len(first.tasks()) == 4, "the tasks come back when the second leaves"
    await first.close()


async def test_at_least_once_handover_loses_nothing_and_counts_once(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    first = await start(cluster, tmp_path, 0)
    await all_running(cluster, first)
    sent = produce_rounds(cluster, 3)
    second = await start(cluster, tmp_path, 1)
    sent += produce_rounds(cluster, 3, start_ts=1000)
    await all_running(cluster, first, second)
    sent += produce_rounds(cluster, 2, start_ts=2000)
    await eventually(lambda: {k: v[-1] for k, v in output_counts(cluster).items()} == dict(sent), what="final counts")
    await asyncio.gather(first.close(), second.close())
    for key, values in output_counts(cluster).items():
        assert values == list(range(1, sent[key] + 1)), f"{key}: {values}"


async def test_exactly_once_join_and_leave_under_load_count_every_record_once(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    first = await start(cluster, tmp_path, 0, EOS)
    await all_running(cluster, first)
    sent: Counter[str] = Counter()

    async def feed() -> None:
        for r in range(12):
            sent.update(produce_rounds(cluster, 1, start_ts=r * 100))
            await asyncio.sleep(0.01)

    feeding = asyncio.create_task(feed())
    second = await start(cluster, tmp_path, 1, EOS)
    await all_running(cluster, first, second)
    await second.close()
    await feeding
    await eventually(lambda: {k: v[-1] for k, v in output_counts(cluster).items()} == dict(sent), what="final counts")
    await first.close()
    for key, values in output_counts(cluster).items():
        assert values == list(range(1, sent[key] + 1)), f"{key}: {values} (duplicates or gaps in committed output)"
    assert cluster.end_offsets("in") == cluster.committed(APP)


async def test_standby_task_follows_the_changelog(tmp_path: Path) -> None:
    cluster = cluster_with(1)
    extra = {"num.standby.replicas": 1}
    first = await start(cluster, tmp_path, 0, extra)
    await all_running(cluster, first)
    second = await start(cluster, tmp_path, 1, extra)
    await all_running(cluster, first, second)
    active, standby = (first, second) if first.tasks() else (second, first)
    assert {str(t) for t in standby.standby_tasks()} == {"0_0"} and not standby.tasks()
    sent = produce_rounds(cluster, 2)
    await eventually(lambda: standby.streams.store("counts", stale=True).get("w3") == 2, what="the standby store")
    assert active.streams.store("counts").get("w3") == 2
    end = cluster.end_offsets(CHANGELOG)[TopicPartition(CHANGELOG, 0)]
    await eventually(lambda: standby.checkpoint() == {(CHANGELOG, 0): end}, what="the standby checkpoint")
    await active.close()
    await all_running(cluster, standby)
    assert {str(t) for t in standby.tasks()} == {"0_0"}
    assert standby.metric("restored_records") == 0, "the standby was current: nothing to restore"
    cluster.produce("in", "w3", "w3", timestamp=10_000)
    await eventually(lambda: output_counts(cluster)["w3"][-1] == sent["w3"] + 1, what="processing on the new owner")
    await standby.close()


async def test_stale_member_commit_fails_and_records_are_reprocessed_not_lost(tmp_path: Path) -> None:
    cluster = cluster_with(1)
    first = await start(cluster, tmp_path, 0, {"commit.interval.ms": 60_000})
    await all_running(cluster, first)
    sent = produce_rounds(cluster, 1)
    await eventually(lambda: len(cluster.records("out")) == len(WORDS), what="processing")
    consumer = first.supplier.main_consumers[0]
    cluster.kick(APP, consumer.member_id)  # the group moved on; this member's commit is refused
    await eventually(lambda: cluster.members(APP) == [consumer.member_id] and cluster.group_stable(APP), what="rejoin")
    assert any(e.kind == "kicked" for e in cluster.events)
    sent += produce_rounds(cluster, 1, start_ts=1000)
    await eventually(lambda: len(cluster.records("out")) >= 3 * len(WORDS), what="reprocessing and new records")
    await first.close()
    assert cluster.committed(APP) == cluster.end_offsets("in")
    out = output_counts(cluster)
    assert len(cluster.records("out")) == 3 * len(WORDS), "the uncommitted first round was processed again"
    for key, values in out.items():
        assert values[-1] is not None and values[-1] >= sent[key], f"{key}: {values} (a record was lost)"
