"""The poll timer of a streams group member (`max.poll.interval.ms`), against the fake coordinator.

Heartbeats go on while a rebalance callback runs, so only the poll timer bounds a callback that
never ends: once the thread has neither polled nor restored a record for `max.poll.interval.ms`,
the member leaves the group (epoch -1, a WARNING naming the thread, the callback and the timeout),
its tasks go to the other member, and it rejoins (epoch 0) when the thread polls again, as Java's
consumer does. A restore that goes on restoring records keeps the member in the group.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from streams_core.clients.streams_group_consumer import StreamsGroupConsumer
from streams_core.clients.streams_group_membership import MemberState
from streams_core.clients.streams_group_poll_timer import PollTimer
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.runtime.threads.thread_clients import ThreadClients
from streams_core.state.internals.processor_state_manager import ChangelogPartition
from streams_core.testing import FakeKafkaClientSupplier, FakeKafkaCluster
from streams_core.testing.fake_streams_group import FakeStreamsGroupTransport, fake_streams_group
from tests.unit.clients.test_streams_group_member import (
    Events,
    RecordingAssignor,
    RecordingListener,
    cluster_with,
    until,
)
from tests.unit.runtime.test_restore import CL0, Sink, cluster_with_changelog, reader_on

MAX_POLL_MS = 500


def config(max_poll_interval_ms: int = MAX_POLL_MS) -> StreamsConfig:
    return StreamsConfig(
        {
            "application.id": "app",
            "bootstrap.servers": "fake:9092",
            "group.protocol": "streams",
            "main.consumer.max.poll.interval.ms": max_poll_interval_ms,
        }
    )


class Thread:
    """Stands in for a stream thread: polls its consumer in a loop, except while a callback of its
    listener runs (the real thread waits for the lock the callbacks hold)."""

    def __init__(self, consumer: StreamsGroupConsumer) -> None:
        self.consumer = consumer
        self.busy = asyncio.Event()
        self.busy.set()  # set: free to poll
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await self.busy.wait()
            await self.consumer.getmany(timeout_ms=20)

    async def stop(self) -> None:
        self._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self._task
        await self.consumer.stop()


class HangingListener(RecordingListener):
    """Its first assignment callback with partitions hangs until `release` is set; or, with `restore_s`,
    each such callback restores for that long, reporting restored records every 0.1 s."""

    def __init__(self, name: str, events: Events, *, restore_s: float = 0.0) -> None:
        super().__init__(name, events)
        self.release = asyncio.Event()
        self.restore_s = restore_s
        self.hung_at: float | None = None
        self.thread: Thread | None = None
        self.consumer: StreamsGroupConsumer | None = None

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        assert self.thread is not None and self.consumer is not None
        self.thread.busy.clear()
        try:
            if assigned and self.restore_s:
                deadline = time.monotonic() + self.restore_s
                while time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                    self.consumer.member.restored()  # what the changelog reader does after each batch
            elif assigned and self.hung_at is None:
                self.hung_at = time.monotonic()
                await self.release.wait()
            await super().on_partitions_assigned(assigned)
        finally:
            self.thread.busy.set()

    async def on_partitions_lost(self, lost: frozenset[TopicPartition]) -> None:
        assert self.thread is not None
        self.thread.busy.clear()
        try:
            await super().on_partitions_lost(lost)
        finally:
            self.thread.busy.set()


async def member(
    cluster: FakeKafkaCluster, name: str, port: int, listener: RecordingListener, max_poll_interval_ms: int = MAX_POLL_MS
) -> tuple[StreamsGroupConsumer, Thread]:
    consumer = FakeKafkaClientSupplier(cluster).get_main_consumer(
        config(max_poll_interval_ms), assignor=RecordingAssignor(name, port), client_id=name
    )
    assert isinstance(consumer, StreamsGroupConsumer)
    assert consumer.member.poll_timer.interval_ms == max_poll_interval_ms
    consumer.subscribe(["in"], listener)
    await consumer.start()
    thread = Thread(consumer)
    if isinstance(listener, HangingListener):
        listener.thread, listener.consumer = thread, consumer
    return consumer, thread


def requests_of(cluster: FakeKafkaCluster, consumer: StreamsGroupConsumer) -> list[int]:
    """The member epochs of every heartbeat the member sent, in order."""
    member_id = consumer.member.membership.member_id
    return [r.member_epoch for r in fake_streams_group(cluster, "app").requests if r.member_id == member_id]


async def test_a_hung_assignment_callback_leaves_the_group_and_rejoins_when_the_thread_polls(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    cluster, events = cluster_with(), Events()
    coordinator = fake_streams_group(cluster, "app")
    b, b_thread = await member(cluster, "b", 9001, RecordingListener("b", events))
    await until(lambda: len(b.assignment()) == 4, "b owns every partition")
    listener = HangingListener("a", events)
    a, a_thread = await member(cluster, "a", 9000, listener)
    membership = a.member.membership

    await until(lambda: listener.hung_at is not None, "a's assignment callback hangs", timeout=10)
    await until(lambda: membership.state is MemberState.STALE, "a left the group", timeout=10)
    assert listener.hung_at is not None
    left_after = time.monotonic() - listener.hung_at
    assert left_after >= MAX_POLL_MS / 1000 * 0.9, f"left {left_after:.2f} s into the callback"
    await until(lambda: -1 in requests_of(cluster, a), "the coordinator got a's leaving heartbeat (epoch -1)")
    assert membership.member_id not in coordinator.members
    assert coordinator.expired == [], "a left by itself, the broker did not fence it"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "max.poll.interval.ms" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("[a] ") and f"max.poll.interval.ms={MAX_POLL_MS}" in warnings[0], warnings[0]
    assert "the rebalance callback assigning active tasks 0_" in warnings[0], warnings[0]
    await until(lambda: len(b.assignment()) == 4 and b.member.membership.state is MemberState.STABLE, "b got a's tasks back", timeout=10)

    sent = len(requests_of(cluster, a))
    await asyncio.sleep(0.3)
    assert len(requests_of(cluster, a)) == sent, "a stale member sends no heartbeat"
    assert await a.getmany(timeout_ms=0) == {}, "no records for the partitions a no longer owns"

    listener.release.set()  # the callback ends; the thread is free again: a loses its tasks, polls and rejoins
    await until(lambda: any(name == "a" and kind == "lost" for name, kind, _ in events), "a lost its tasks", timeout=10)
    await until(
        lambda: membership.state is MemberState.STABLE and len(a.assignment()) == len(b.assignment()) == 2,
        "a rejoined and the tasks split again",
        timeout=10,
    )
    epochs = requests_of(cluster, a)
    assert epochs.count(0) == 2 and epochs.index(0, 1) > epochs.index(-1), f"rejoined once, with epoch 0: {epochs}"
    assert a.member.error is None and b.member.error is None
    await a_thread.stop()
    await b_thread.stop()


async def test_a_stale_member_stays_out_until_the_thread_polls() -> None:
    cluster, events = cluster_with(), Events()
    listener = HangingListener("a", events)
    a, thread = await member(cluster, "a", 9000, listener)
    membership = a.member.membership
    await until(lambda: membership.state is MemberState.STALE, "a left the group", timeout=10)
    thread._task.cancel()  # the thread is stuck elsewhere: it does not poll after the callback
    listener.release.set()
    await until(lambda: any(kind == "lost" for _, kind, _ in events), "a lost its tasks", timeout=10)
    await asyncio.sleep(0.3)
    assert membership.state is MemberState.STALE, "no rejoin before the thread polls"
    assert await a.getmany(timeout_ms=0) == {}
    await until(lambda: membership.state is MemberState.STABLE and len(a.assignment()) == 4, "a rejoined at its poll", timeout=10)
    await a.stop()


async def test_a_long_restore_that_progresses_keeps_the_member_in_the_group(caplog: pytest.LogCaptureFixture) -> None:
    cluster, events = cluster_with(), Events()
    listener = HangingListener("a", events, restore_s=3 * MAX_POLL_MS / 1000)
    a, thread = await member(cluster, "a", 9000, listener)
    membership = a.member.membership
    await until(lambda: any(kind == "assigned" and parts for _, kind, parts in events), "a restored and installed its tasks", timeout=10)
    await until(lambda: membership.state is MemberState.STABLE and len(a.assignment()) == 4, "a runs every task")
    assert -1 not in requests_of(cluster, a), "a never left"
    assert requests_of(cluster, a).count(0) == 1, "joined once"
    assert not any(kind == "lost" for _, kind, _ in events)
    assert not [r for r in caplog.records if "max.poll.interval.ms" in r.getMessage()]
    await thread.stop()


async def test_a_poll_timer_shorter_than_the_heartbeat_interval_sends_no_extra_heartbeats() -> None:
    """The heartbeat loop wakes when the poll timer would expire; a poll since then is no reason to heartbeat."""
    cluster, events = cluster_with(), Events()
    fake_streams_group(cluster, "app").heartbeat_interval_ms = 1000
    a, thread = await member(cluster, "a", 9000, RecordingListener("a", events), max_poll_interval_ms=150)
    await until(lambda: a.member.membership.state is MemberState.STABLE and len(a.assignment()) == 4, "a runs every task")
    before, start = len(requests_of(cluster, a)), time.monotonic()
    await asyncio.sleep(1.5)  # ten poll timer periods, the thread polling all along
    sent, elapsed = len(requests_of(cluster, a)) - before, time.monotonic() - start
    assert sent <= elapsed + 2, f"{sent} heartbeats in {elapsed:.2f} s at a 1 s interval"
    assert -1 not in requests_of(cluster, a), "the thread polls: the member stays"
    await thread.stop()


async def test_the_answer_to_the_leaving_heartbeat_is_ignored_once_the_member_rejoined() -> None:
    """The leave goes out as the timer expires; the thread may poll (and the member rejoin) before its answer."""
    cluster, events = cluster_with(), Events()
    a, thread = await member(cluster, "a", 9000, RecordingListener("a", events), max_poll_interval_ms=150)
    await until(lambda: len(a.assignment()) == 4, "a runs every task")
    transport = a.member._transport
    assert isinstance(transport, FakeStreamsGroupTransport)
    transport.round_trip_s = 0.1  # the answer to the leave comes after the member rejoined
    thread.busy.clear()  # the thread stops polling
    await until(lambda: a.member.membership.state is MemberState.STALE, "a left the group")
    thread.busy.set()
    await until(lambda: requests_of(cluster, a).count(0) == 2, "a rejoined")
    await until(lambda: a.member.membership.state is MemberState.STABLE and len(a.assignment()) == 4, "a runs every task again")
    assert a.member.error is None
    await thread.stop()


async def test_the_changelog_reader_reports_each_restored_batch() -> None:
    cluster = cluster_with_changelog(*[(f"k{i}", i) for i in range(25_000)])
    reader, _ = reader_on(cluster)
    progress: list[float] = []
    reader._on_progress = lambda: progress.append(time.monotonic())
    assert (await reader.restore("0_0", [ChangelogPartition("counts", CL0, None, Sink())])).total == 25_000
    assert len(progress) == 3, "one report per batch of 10,000 records"
    assert (await reader.restore("0_0", [ChangelogPartition("counts", CL0, 25_000, Sink())])).total == 0
    assert len(progress) == 3, "nothing restored, nothing reported"


def test_a_streams_group_threads_restore_resets_its_poll_timer() -> None:
    clock = [0.0]
    timer = PollTimer(1000, clock=lambda: clock[0])
    clock[0] = 0.9
    assert not timer.expired and timer.remaining_s == pytest.approx(0.1)
    clock[0] = 1.0
    assert timer.expired and timer.remaining_s == 0
    timer.reset()
    assert not timer.expired
    cluster = cluster_with()
    kafka_clients = ThreadClients.create(FakeKafkaClientSupplier(cluster), config(), RecordingAssignor("a", 9000), thread_index=1)  # type: ignore[arg-type]
    consumer = kafka_clients.consumer
    assert isinstance(consumer, StreamsGroupConsumer)
    assert kafka_clients.changelog_reader._on_progress == consumer.member.restored
