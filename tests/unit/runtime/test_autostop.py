"""KIP-95 `autostop.at=eol` on the fake cluster: the instance processes up to the stop offsets
(past a trailing transaction marker too), commits them, writes the finished marker and stops."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from streams_core import KafkaStreams, clients
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.runtime.assignment.subscription_info import SubscriptionInfo
from streams_core.runtime.autostop.autostop_manager import AutostopManager
from streams_core.runtime.autostop.autostop_metadata import COMPLETED, IntermediateWriters, stop_key
from streams_core.testing import FakeKafkaClientSupplier, FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeProducer

from .harness import APP, Instance, eventually, passthrough_topology, streams_config


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_a_batch_run_stops_by_itself_at_the_end_of_the_input(tmp_path: Path, guarantee: str) -> None:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out"):
        cluster.create_topic(topic, 2)
    for i in range(6):
        cluster.produce("in", b"k%d" % i, b"plain-%d" % i)
    upstream = FakeProducer(cluster, client_id="upstream", transactional_id="upstream")
    await upstream.start()
    await upstream.begin_transaction()
    batch = upstream.create_batch()
    batch.append(timestamp=1, key=b"t", value=b"transactional", headers=[])
    await upstream.send_batch(batch, "in", partition=1)
    await upstream.commit_transaction()  # partition 1 now ends with a commit marker

    instance = Instance(cluster, passthrough_topology(), streams_config(tmp_path, {"autostop.at": "eol", "processing.guarantee": guarantee}))
    await instance.streams.start()
    try:
        await eventually(lambda: instance.streams.state is KafkaStreams.State.NOT_RUNNING, what="the run to stop itself")
        cluster.produce("in", b"late", b"after the stop offsets", partition=0)
    finally:
        await instance.close()
    assert instance.streams.errors == []
    assert sorted(r.value or b"" for r in cluster.records("out")) == sorted([b"plain-%d" % i for i in range(6)] + [b"transactional"])
    ends = cluster.end_offsets("in")
    assert cluster.committed(APP) == {TopicPartition("in", 0): ends[TopicPartition("in", 0)] - 1, TopicPartition("in", 1): ends[TopicPartition("in", 1)]}
    assert (bytes(APP, "ascii"), b"1") in [(r.key, r.value) for r in cluster.records(f"{APP}-autostop-metadata")], "the finished marker"


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_a_restart_into_a_run_under_way_never_processes_past_its_stop_offsets(tmp_path: Path, guarantee: str) -> None:
    """After a kill -9 the run's stop offsets are in the metadata topic and the input has grown:
    the restarted instance's first fetches after its assignment must already be cut at them (the
    tracker learnt the stop offsets only in its first `update`, after the first batch was queued)."""
    cluster = FakeKafkaCluster()
    for topic in ("in", "out"):
        cluster.create_topic(topic, 2)
    for i in range(4):
        cluster.produce("in", b"k%d" % i, b"before-%d" % i, partition=i % 2)
    metadata = f"{APP}-autostop-metadata"
    cluster.create_topic(metadata, 1)
    for p in range(2):
        cluster.produce(metadata, stop_key(TopicPartition("in", p)), b"2")  # the killed first start's stop offsets
    cluster.produce(metadata, APP.encode(), COMPLETED)
    for i in range(10):
        cluster.produce("in", b"k%d" % i, b"after-%d" % i, partition=i % 2)  # written after the run started

    instance = Instance(cluster, passthrough_topology(), streams_config(tmp_path, {"autostop.at": "eol", "processing.guarantee": guarantee}))
    await instance.streams.start()
    try:
        await eventually(lambda: instance.streams.state is KafkaStreams.State.NOT_RUNNING, what="the run to stop itself")
    finally:
        await instance.close()
    assert instance.streams.errors == []
    assert sorted(r.value or b"" for r in cluster.records("out")) == [b"before-%d" % i for i in range(4)]
    assert cluster.committed(APP) == {TopicPartition("in", 0): 2, TopicPartition("in", 1): 2}


async def test_the_finished_marker_is_written_when_a_rebalance_during_the_close_resets_the_threads_flag(tmp_path: Path) -> None:
    """The last instance of a run closes once its threads finished; the others leaving as they
    finish make a rebalance that reaches its thread during the close and resets its flag (the
    chaos autostop scenario in CI). The committed offsets, not that flag, decide the marker."""
    cluster = FakeKafkaCluster()
    for topic in ("in", "out"):
        cluster.create_topic(topic, 2)
    for i in range(6):
        cluster.produce("in", b"k%d" % i, b"v%d" % i, partition=i % 2)
    instance = Instance(cluster, passthrough_topology(), streams_config(tmp_path, {"autostop.at": "eol"}))

    def revoked_during_the_close(new: Any, old: Any) -> None:
        if new is KafkaStreams.State.PENDING_SHUTDOWN:
            for thread in instance.streams.threads:
                thread._run_end.on_revoked()  # what on_partitions_revoked does

    instance.streams.set_state_listener(revoked_during_the_close)
    await instance.streams.start()
    try:
        await eventually(lambda: instance.streams.state is KafkaStreams.State.NOT_RUNNING, what="the run to stop itself")
    finally:
        await instance.close()
    assert cluster.committed(APP) == {TopicPartition("in", 0): 3, TopicPartition("in", 1): 3}
    assert (APP.encode(), b"1") in [(r.key, r.value) for r in cluster.records(f"{APP}-autostop-metadata")], "the finished marker"


class _KilledMember:
    """A group member whose process was killed right after it joined: it keeps the partitions it is
    given, never processes or commits them, and stays in the group until its session expires."""

    def __init__(self, subscription: bytes) -> None:
        self.member_id = "killed-member"
        self.topics = ("in",)
        self.assignor = self  # what the leader reads of it: its subscription
        self.partitions: frozenset[TopicPartition] = frozenset()
        self._subscription = subscription

    def subscription(self) -> bytes:
        return self._subscription

    def assign(self, partition_counts: Any, subscriptions: Any) -> Any:
        raise AssertionError("it joins after the live instance, which leads the group")

    async def _revoke_for_rebalance(self) -> None:
        return None

    async def _receive_assignment(self, generation: int, partitions: frozenset[TopicPartition], user_data: bytes | None) -> None:
        self.partitions = partitions


async def test_an_instance_whose_partitions_are_done_stays_to_take_over_those_of_a_killed_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chaos autostop scenario in CI: a member killed just after a rebalance holds its
    partitions until its session expires. Had the live instance closed once its own partitions
    were done, nobody would have taken them over and the run would have ended unfinished, with no
    finished marker. It stays in the group instead, takes them over and finishes the run."""
    cluster = FakeKafkaCluster()
    for topic in ("in", "out"):
        cluster.create_topic(topic, 2)
    for i in range(6):
        cluster.produce("in", b"k%d" % i, b"v%d" % i, partition=i % 2)
    killed = _KilledMember(SubscriptionInfo(process_id=str(uuid.uuid4())).encode())
    join = cluster._join

    def join_with_the_killed_member(group_id: str, member: Any) -> None:
        join(group_id, member)
        if group_id == APP and member is not killed:
            join(group_id, killed)  # before the first rebalance runs: the live instance leads it

    monkeypatch.setattr(cluster, "_join", join_with_the_killed_member)
    instance = Instance(cluster, passthrough_topology(), streams_config(tmp_path, {"autostop.at": "eol"}))
    await instance.streams.start()
    try:
        await eventually(lambda: len(killed.partitions) == 1, what="the killed member's assignment")
        live = {TopicPartition("in", p) for p in range(2)} - killed.partitions
        await eventually(lambda: set(cluster.committed(APP)) == live, what="the live instance's partition committed")
        await asyncio.sleep(0.3)
        assert instance.streams.state is KafkaStreams.State.RUNNING, "closed with a partition of the run unfinished"
        cluster.kick(APP, killed.member_id)  # its session expires
        await eventually(lambda: instance.streams.state is KafkaStreams.State.NOT_RUNNING, what="the run to finish")
    finally:
        await instance.close()
    assert instance.streams.errors == []
    assert cluster.committed(APP) == {TopicPartition("in", 0): 3, TopicPartition("in", 1): 3}
    assert sorted(r.value or b"" for r in cluster.records("out")) == sorted(b"v%d" % i for i in range(6))
    assert (APP.encode(), b"1") in [(r.key, r.value) for r in cluster.records(f"{APP}-autostop-metadata")], "the finished marker"


def _manager(cluster: FakeKafkaCluster, tmp_path: Path, *, wait_timeout_s: float = 3.0) -> AutostopManager:
    return AutostopManager(
        StreamsConfig(streams_config(tmp_path, {"autostop.at": "eol"})),
        FakeKafkaClientSupplier(cluster),
        input_partitions=[TopicPartition("in", p) for p in range(2)],
        writers=IntermediateWriters({}),
        process_id="p1",
        wait_timeout_s=wait_timeout_s,
    )


async def test_a_waiting_thread_does_not_hold_up_its_sibling_that_leads_the_group(tmp_path: Path) -> None:
    """Two threads of one instance share its manager; the one that is not the group's leader
    asks first and waits for a run, and its sibling, the leader, must still write it (CI: both
    threads waited 60 s behind the manager's lock, and the run failed)."""
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", 2)
    cluster.create_topic(f"{APP}-autostop-metadata", 1)
    cluster.produce("in", b"k", b"v", partition=1)
    manager = _manager(cluster, tmp_path)
    await manager.start()
    try:
        follower = asyncio.create_task(manager.establish_run(leader=False))
        await asyncio.sleep(0.05)
        leader = asyncio.create_task(manager.establish_run(leader=True))
        async with asyncio.timeout(1.0):
            runs = await asyncio.gather(follower, leader)
    finally:
        await manager.close()
    assert runs[0] is runs[1] is manager.run
    assert dict(runs[0].stop_offsets) == {TopicPartition("in", 0): 0, TopicPartition("in", 1): 1}


async def test_the_metadata_tailer_reads_on_after_a_failed_read(tmp_path: Path) -> None:
    """A read of the metadata topic that fails (its leader moving right after creation) must
    not end the tailer: every wait for the run depends on it."""
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", 2)
    cluster.create_topic(f"{APP}-autostop-metadata", 1)
    manager = _manager(cluster, tmp_path)
    await manager.start()
    try:
        cluster.fail_next("getmany", clients.KafkaError("NotLeaderForPartition (injected)"), times=3)
        await asyncio.sleep(0.05)
        for p in range(2):
            cluster.produce(f"{APP}-autostop-metadata", stop_key(TopicPartition("in", p)), b"0")
        cluster.produce(f"{APP}-autostop-metadata", APP.encode(), COMPLETED)
        async with asyncio.timeout(2.0):
            run = await manager.establish_run(leader=False)
    finally:
        await manager.close()
    assert dict(run.stop_offsets) == {TopicPartition("in", 0): 0, TopicPartition("in", 1): 0}


async def test_an_idle_member_does_not_wait_for_the_run_and_learns_it_later(tmp_path: Path) -> None:
    """A member without active tasks (under the streams protocol, every member's first assignment while
    the broker creates the internal topics) returns at once; `behind` adopts the run once there is one."""
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", 2)
    cluster.create_topic(f"{APP}-autostop-metadata", 1)
    manager = _manager(cluster, tmp_path)
    await manager.start()
    try:
        async with asyncio.timeout(1.0):
            assert await manager.establish_run(leader=False, wait=False) is None
        assert manager.run is None
        leader = _manager(cluster, tmp_path)
        await leader.start()
        try:
            started = await leader.establish_run(leader=True)
        finally:
            await leader.close()

        async def adopted() -> bool:
            return await manager.behind(_CommittedNothing()) is not None

        async with asyncio.timeout(2.0):
            while not await adopted():
                await asyncio.sleep(0.02)
        assert manager.run is not None and dict(manager.run.stop_offsets) == dict(started.stop_offsets)
    finally:
        await manager.close()


class _CommittedNothing:
    """The admin's committed offsets of a group that committed nothing yet."""

    async def committed_offsets(self, group_id: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {}
