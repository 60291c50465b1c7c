"""Heartbeats during long rebalance callbacks (KIP-1071), against the fake coordinator's session timeout.

The fake coordinator removes a member not heard from for its session timeout, as the broker does. A
listener callback (a commit, closing or creating tasks, a restoration) longer than that must not get
the member fenced: heartbeats go on meanwhile, one in flight at a time (the fake transport raises on
a second), reporting the tasks owned so far, and the assignment is acknowledged only once installed.
"""

from __future__ import annotations

import asyncio
import time

from streams_core.clients.streams_group_consumer import StreamsGroupConsumer
from streams_core.clients.streams_group_membership import MemberState
from streams_core.clients.streams_group_protocol import HeartbeatRequestData, TaskAssignment
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.testing import FakeKafkaClientSupplier, FakeKafkaCluster
from streams_core.testing.fake_streams_group import FakeStreamsGroupTransport, fake_streams_group
from tests.unit.clients.test_streams_group_member import (
    Events,
    RecordingAssignor,
    RecordingListener,
    cluster_with,
    config,
    holders,
    until,
)

SESSION_MS = 400
SLOW_S = 1.2  # three session timeouts


class SlowListener(RecordingListener):
    """Sleeps in the chosen callback (the event loop stays free, as an awaited commit or restore leaves it),
    recording when it ran."""

    def __init__(self, name: str, events: Events, *, slow: str) -> None:
        super().__init__(name, events)
        self.slow = slow
        self.spans: list[tuple[str, float, float]] = []

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        start = time.monotonic()
        if self.slow == "revoked" and revoked:
            await asyncio.sleep(SLOW_S)
        await super().on_partitions_revoked(revoked)
        self.spans.append(("revoked", start, time.monotonic()))

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        start = time.monotonic()
        if self.slow == "assigned" and assigned:
            await asyncio.sleep(SLOW_S)
        await super().on_partitions_assigned(assigned)
        self.spans.append(("assigned", start, time.monotonic()))


class TimedRequests:
    """The member's heartbeats with the time each was sent (the coordinator records only the requests)."""

    def __init__(self, consumer: StreamsGroupConsumer) -> None:
        transport = consumer.member._transport
        assert isinstance(transport, FakeStreamsGroupTransport)
        transport.round_trip_s = 0.01  # long enough for a second heartbeat to overlap, were one sent
        self.sent = transport.sent

    def between(self, start: float, end: float) -> list[HeartbeatRequestData]:
        return [data for at, data in self.sent if start <= at <= end]


async def started(cluster: FakeKafkaCluster, name: str, port: int, listener: RecordingListener) -> tuple[StreamsGroupConsumer, TimedRequests]:
    consumer = FakeKafkaClientSupplier(cluster).get_main_consumer(config(), assignor=RecordingAssignor(name, port), client_id=name)
    assert isinstance(consumer, StreamsGroupConsumer)
    consumer.subscribe(["in"], listener)
    timed = TimedRequests(consumer)
    await consumer.start()
    return consumer, timed


def tasks(*partitions: int) -> frozenset[TaskId]:
    return frozenset(TaskId(0, p) for p in partitions)


async def test_a_slow_assignment_callback_is_not_fenced_and_is_acknowledged_once_installed() -> None:
    cluster, events = cluster_with(), Events()
    coordinator = fake_streams_group(cluster, "app")
    coordinator.session_timeout_ms = SESSION_MS
    listener = SlowListener("a", events, slow="assigned")
    a, timed = await started(cluster, "a", 9000, listener)
    await until(lambda: a.member.membership.state is MemberState.STABLE and len(a.assignment()) == 4, "a runs all", timeout=10)

    assert coordinator.expired == [], "the member was fenced while its callback ran"
    assert not any(kind == "lost" for _, kind, _ in events)
    member_id = a.member.membership.member_id
    assert [r.member_epoch for r in coordinator.requests if r.member_id == member_id].count(0) == 1, "joined once"
    _, start, end = next(span for span in listener.spans if span[0] == "assigned")
    assert end - start >= SLOW_S
    during = timed.between(start, end)
    assert len(during) >= 3, f"heartbeats went on while the callback ran: {len(during)} in {end - start:.2f} s"
    assert all(r.tasks in (None, TaskAssignment.EMPTY) for r in during), "nothing acknowledged before it was installed"
    acknowledged = next(at for at, r in timed.sent if r.tasks is not None and r.tasks.active == tasks(0, 1, 2, 3))
    assert acknowledged >= end, "the assignment is acknowledged once the callback finished"
    await a.stop()
    assert a.member.error is None


async def test_a_slow_revocation_is_not_fenced_and_reports_the_tasks_owned_so_far() -> None:
    cluster, events = cluster_with(), Events()
    coordinator = fake_streams_group(cluster, "app")
    listener = SlowListener("a", events, slow="revoked")
    a, timed = await started(cluster, "a", 9000, listener)
    await until(lambda: len(a.assignment()) == 4, "a owns every partition")
    coordinator.session_timeout_ms = SESSION_MS
    b, _ = await started(cluster, "b", 9001, RecordingListener("b", events))
    await until(lambda: len(a.assignment()) == len(b.assignment()) == 2, "the split", timeout=10)
    await until(lambda: a.member.membership.state is MemberState.STABLE, "a acknowledged")

    assert coordinator.expired == [], "a member was fenced while a's revocation ran"
    assert not any(kind == "lost" for _, kind, _ in events)
    holders(events)  # no partition held by both at once
    _, start, end = next(span for span in listener.spans if span[0] == "revoked" and end_ok(span))
    during = timed.between(start, end)
    assert len(during) >= 3, f"heartbeats went on while the revocation ran: {len(during)} in {end - start:.2f} s"
    assert all(r.tasks is None for r in during), "the tasks being revoked are still owned until revoked"
    after = [r.tasks.active for _, r in timed.sent if r.tasks is not None]
    assert tasks(0, 1, 2, 3) - frozenset(b.member.membership.owned.active) in after, "the acknowledged split"
    await b.stop()
    await a.stop()


def end_ok(span: tuple[str, float, float]) -> bool:
    return span[2] - span[1] >= SLOW_S


async def test_a_member_fenced_during_a_slow_callback_abandons_the_assignment_and_rejoins() -> None:
    cluster, events = cluster_with(), Events()
    coordinator = fake_streams_group(cluster, "app")
    listener = SlowListener("a", events, slow="assigned")
    a, _ = await started(cluster, "a", 9000, listener)
    membership = a.member.membership
    await until(lambda: membership.state is MemberState.RECONCILING, "a installs its first assignment")
    coordinator.members[membership.member_id].epoch += 5  # the broker moved on: the next heartbeat is fenced
    await until(lambda: any(kind == "lost" for _, kind, _ in events), "the partitions lost", timeout=10)
    await until(lambda: membership.state is MemberState.STABLE and len(a.assignment()) == 4, "a back", timeout=10)
    kinds = [kind for _, kind, _ in events]
    assert kinds[:3] == ["assigned", "lost", "assigned"], kinds
    rejoins = [r for r in coordinator.requests if r.member_id == membership.member_id and r.member_epoch == 0]
    assert len(rejoins) == 2, "rejoined once, with epoch 0"
    assert a.member.error is None
    await a.stop()
