"""StreamsGroupMember and StreamsGroupConsumer over the fake coordinator: what the heartbeat loop does to a thread.

A recording listener and assignor stand in for the stream thread: the order of their calls is what
KIP-1071 prescribes (revocation before assignment, across members too), epochs move as the broker
says, a fenced member loses its partitions and rejoins with epoch 0, closing leaves with epoch -1,
a failed heartbeat is retried, and a commit with a stale epoch is refused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pytest

from streams_core.clients import CommitFailedError, KafkaConnectionError, MemberAssignment
from streams_core.clients.streams_group_consumer import StreamsGroupConsumer
from streams_core.clients.streams_group_membership import MemberInfo, MemberState
from streams_core.clients.streams_group_protocol import (
    EndpointPartitions,
    GroupStatus,
    StatusCode,
    StreamsGroupTopology,
    Subtopology,
    TaskAssignment,
)
from streams_core.common.host_info import HostInfo
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.errors import ConfigError
from streams_core.testing import FakeKafkaClientSupplier, FakeKafkaCluster
from streams_core.testing.fake_streams_group import fake_streams_group

TOPOLOGY = StreamsGroupTopology(0, (Subtopology("0", ("in",)),))
class Events(list[tuple[str, str, frozenset[TopicPartition]]]):
    """(member, callback, partitions), in call order, shared by every member's listener."""


class RecordingAssignor:
    """The thread's assignor as the member sees it; records the assignments it is given."""

    def __init__(self, name: str, port: int) -> None:
        self.name = name
        self.port = port
        self.assignments: list[tuple[TaskAssignment, tuple[EndpointPartitions, ...]]] = []
        self.statuses: list[tuple[GroupStatus, ...]] = []

    def subscription(self) -> bytes:
        return b""

    def assign(self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, bytes]) -> dict[str, MemberAssignment[Any]]:
        raise AssertionError("the broker assigns under the streams protocol")

    def on_assignment(self, user_data: bytes) -> None:
        raise AssertionError("the broker assigns under the streams protocol")

    def streams_group_member_info(self) -> MemberInfo:
        return MemberInfo(f"process-{self.name}", TOPOLOGY, HostInfo("127.0.0.1", self.port))

    def streams_group_partitions(self, tasks: Iterable[TaskId]) -> frozenset[TopicPartition]:
        return frozenset(TopicPartition("in", t.partition) for t in tasks)

    def on_streams_group_assignment(
        self, tasks: TaskAssignment, endpoints: Sequence[EndpointPartitions], statuses: Sequence[GroupStatus] = ()
    ) -> None:
        self.assignments.append((tasks, tuple(endpoints)))
        self.statuses.append(tuple(statuses))


class RecordingListener:
    """Records (member, callback, partitions) in one list shared by every member."""

    def __init__(self, name: str, events: Events, on_revoked: Callable[[], None] | None = None) -> None:
        self.name = name
        self.events = events
        self.on_revoked = on_revoked

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        await asyncio.sleep(0.02)  # a commit takes time: the other member must not get these meanwhile
        self.events.append((self.name, "revoked", revoked))

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        self.events.append((self.name, "assigned", assigned))

    async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
        self.events.append((self.name, "lost", lost))


def config() -> StreamsConfig:
    return StreamsConfig({"application.id": "app", "bootstrap.servers": "fake:9092", "group.protocol": "streams"})


def cluster_with(partitions: int = 4) -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", partitions)
    return cluster


async def started(cluster: FakeKafkaCluster, name: str, port: int, events: Events) -> StreamsGroupConsumer:
    supplier = FakeKafkaClientSupplier(cluster)
    consumer = supplier.get_main_consumer(config(), assignor=RecordingAssignor(name, port), client_id=name)
    assert isinstance(consumer, StreamsGroupConsumer)
    consumer.subscribe(["in"], RecordingListener(name, events))
    await consumer.start()
    return consumer


async def until(condition: Callable[[], object], what: str, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def holders(events: Events) -> dict[TopicPartition, set[str]]:
    """Who holds each partition after replaying the events; fails if two ever hold one at once."""
    held: dict[TopicPartition, set[str]] = {}
    for name, kind, partitions in events:
        if kind == "assigned":
            for tp in partitions:
                held.setdefault(tp, set()).add(name)
        else:
            for tp in partitions:
                held.get(tp, set()).discard(name)
        for tp, names in held.items():
            assert len(names) <= 1, f"{tp} held by {names} at once: {events}"
        for tp in [tp for tp, names in held.items() if not names]:
            del held[tp]
    return held


async def test_a_joining_member_gets_its_tasks_only_after_the_other_revoked_them() -> None:
    cluster, events = cluster_with(), Events()
    a = await started(cluster, "a", 9000, events)
    await until(lambda: len(a.assignment()) == 4, "a owns every partition")
    b = await started(cluster, "b", 9001, events)
    await until(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, "the split")
    held = holders(events)
    assert {tp: names.pop() for tp, names in held.items()} == {
        **{tp: "a" for tp in a.assignment()},
        **{tp: "b" for tp in b.assignment()},
    }
    revoked_at = next(i for i, e in enumerate(events) if e[:2] == ("a", "revoked"))
    assert events[revoked_at][2] == b.assignment(), "a revoked exactly what b got"
    assert all(i > revoked_at for i, e in enumerate(events) if e[0] == "b" and e[2]), "b got tasks only after a revoked them"
    assert a.member.membership.state is MemberState.STABLE and b.member.membership.member_epoch >= 2
    await a.stop()
    await b.stop()


async def test_every_member_hears_both_endpoints_and_the_assignor_gets_them() -> None:
    cluster, events = cluster_with(), Events()
    a = await started(cluster, "a", 9000, events)
    b = await started(cluster, "b", 9001, events)
    await until(lambda: len(a.assignment()) == len(b.assignment()) == 2, "the split")
    assignor = a.member._assignor
    assert isinstance(assignor, RecordingAssignor)

    def announced() -> dict[int, frozenset[TopicPartition]]:
        return {e.endpoint.port: e.active for e in assignor.assignments[-1][1]}

    await until(lambda: announced() == {9000: a.assignment(), 9001: b.assignment()}, "both endpoints announced to a")
    assert events[-1][1] == "assigned", "an endpoint change alone is announced as the same assignment"
    await b.stop()
    await a.stop()


async def test_closing_leaves_with_epoch_minus_1_and_the_other_takes_everything() -> None:
    cluster, events = cluster_with(), Events()
    a = await started(cluster, "a", 9000, events)
    b = await started(cluster, "b", 9001, events)
    await until(lambda: len(a.assignment()) == len(b.assignment()) == 2, "the split")
    coordinator = fake_streams_group(cluster, "app")
    a_id = a.member.membership.member_id
    await a.stop()
    assert coordinator.requests[-1].member_id == a_id and coordinator.requests[-1].member_epoch == -1
    assert a_id not in coordinator.members
    await until(lambda: len(b.assignment()) == 4, "b owns everything")
    await b.stop()


async def test_a_fenced_member_loses_its_partitions_and_rejoins_with_epoch_0_and_the_same_id() -> None:
    cluster, events = cluster_with(), Events()
    a = await started(cluster, "a", 9000, events)
    await until(lambda: len(a.assignment()) == 4, "a owns every partition")
    coordinator = fake_streams_group(cluster, "app")
    member_id = a.member.membership.member_id
    coordinator.members[member_id].epoch += 5
    await until(lambda: any(e[1] == "lost" for e in events), "the partitions lost")
    assert next(e for e in events if e[1] == "lost")[2] == frozenset(TopicPartition("in", p) for p in range(4))
    await until(lambda: len(a.assignment()) == 4 and a.member.membership.state is MemberState.STABLE, "a back")
    lost_at = next(i for i, e in enumerate(events) if e[1] == "lost")
    assert events[lost_at + 1][1] == "assigned" and events[lost_at + 1][2], "assigned again after the loss"
    rejoins = [r for r in coordinator.requests if r.member_id == member_id and r.member_epoch == 0]
    assert len(rejoins) == 2 and rejoins[1].topology == TOPOLOGY, "rejoined with epoch 0, the topology and the same id"
    await a.stop()


async def test_a_shutdown_another_member_asked_for_is_announced_to_the_thread() -> None:
    """The SHUTDOWN_APPLICATION status alone (no new tasks, no endpoint change) reaches the assignor, whose
    assignment error the listener raises, as Java's stream thread checks the statuses at each poll."""
    cluster, events = cluster_with(), Events()
    a = await started(cluster, "a", 9000, events)
    await until(lambda: len(a.assignment()) == 4 and a.member.membership.state is MemberState.STABLE, "a owns every partition")
    assignor = a.member._assignor
    assert isinstance(assignor, RecordingAssignor)
    announced = len(events)
    fake_streams_group(cluster, "app").shutdown_requested_by = "another-member"
    await until(lambda: any(s.code == StatusCode.SHUTDOWN_APPLICATION for s in assignor.statuses[-1]), "the status announced")
    assert events[announced:] == [("a", "assigned", a.assignment())], "the same assignment, announced with the status"
    assert assignor.assignments[-1][0].active == frozenset(TaskId(0, p) for p in range(4))
    await a.stop()


async def test_a_failed_heartbeat_is_retried_and_the_member_still_joins() -> None:
    cluster, events = cluster_with(), Events()
    cluster.fail_next("streams_group_heartbeat", KafkaConnectionError("broker gone"), times=2)
    a = await started(cluster, "a", 9000, events)
    await until(lambda: len(a.assignment()) == 4, "a joined after two failed heartbeats")
    await a.stop()


async def test_a_commit_with_a_stale_epoch_is_refused() -> None:
    cluster, events = cluster_with(), Events()
    a = await started(cluster, "a", 9000, events)
    await until(lambda: len(a.assignment()) == 4, "a owns every partition")
    tp = TopicPartition("in", 0)
    await a.commit({tp: OffsetAndMetadata(3, "")})
    assert cluster.committed("app")[tp] == 3
    fake_streams_group(cluster, "app").members[a.member.membership.member_id].epoch += 1
    with pytest.raises(CommitFailedError, match="error 113"):
        await a.commit({tp: OffsetAndMetadata(5, "")})
    assert cluster.committed("app")[tp] == 3
    await a.stop()


async def test_a_topology_the_group_refuses_is_raised_by_the_next_poll() -> None:
    cluster, events = cluster_with(), Events()
    a = await started(cluster, "a", 9000, events)
    await until(lambda: len(a.assignment()) == 4, "a joined")
    other = StreamsGroupTopology(0, (Subtopology("0", ("in",)), Subtopology("1", ("in",))))
    supplier = FakeKafkaClientSupplier(cluster)
    assignor = RecordingAssignor("b", 9001)
    assignor.streams_group_member_info = lambda: MemberInfo("process-b", other)  # type: ignore[method-assign]
    b = supplier.get_main_consumer(config(), assignor=assignor, client_id="b")
    assert isinstance(b, StreamsGroupConsumer)
    b.subscribe(["in"], RecordingListener("b", events))
    await b.start()
    await until(lambda: b.member.error is not None, "b refused")
    with pytest.raises(Exception, match="STREAMS_INVALID_TOPOLOGY"):
        await b.getmany(timeout_ms=10)
    await b.stop()
    await a.stop()


def test_the_streams_protocol_needs_an_assignor_that_speaks_it() -> None:
    class Classic:
        def subscription(self) -> bytes:
            return b""

    supplier = FakeKafkaClientSupplier(cluster_with())
    with pytest.raises(ConfigError, match=r"group\.protocol"):
        supplier.get_main_consumer(config(), assignor=Classic())  # type: ignore[arg-type]
