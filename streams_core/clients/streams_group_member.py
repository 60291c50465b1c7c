"""StreamsGroupMember: one stream thread as a member of a streams group (KIP-1071), driving its consumer.

It runs the heartbeat loop of a `StreamsGroupMembership` over a `StreamsGroupTransport` (the broker
through `StreamsGroupChannel`, or the fake coordinator in unit tests) and applies what the broker
decides to the thread, through the same objects the classic protocol uses: the thread's assignor
gets the tasks and endpoints (`StreamsGroupAssignor.on_streams_group_assignment`, the classic
`on_assignment`'s counterpart), the main consumer is assigned their partitions by hand, and the
thread's `RebalanceListener` is called, revocation always before assignment:

- a new target: the partitions of the active tasks it drops are revoked (the listener commits and
  closes those tasks), the membership is told, then the whole target is installed and assigned;
- fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID): every partition is lost (closed without
  committing) and the member rejoins with epoch 0 and the same member id;
- endpoints that changed alone: the assignor's map is renewed and the assignment re-announced;
- a fatal error: the loop stops and `check()` raises it (the consumer raises it from `getmany`,
  so the thread fails with it).

Two asyncio tasks: the heartbeat loop sends heartbeats at the broker's interval, at once when the
membership is `urgent`, one in flight at a time (every exchange has a deadline; a failed one is
retried after `retry.backoff.ms`); the callback loop applies the answers to the thread. So the
heartbeats go on while a callback runs (a commit, closing or creating tasks, a restoration, a batch
run's start), as Java's do from the consumer's background thread: they report the tasks owned so far,
and the new assignment is acknowledged only once it is installed.

The poll timer (`max.poll.interval.ms`) bounds the thread instead, as Java's consumer bounds its
application thread: it is reset by the thread's polls (`polled`) and by records restored
(`restored`, restoration runs inside the assignment callback here); when it expires the heartbeat
loop leaves the group (epoch -1), the callbacks lose the tasks once the thread is free, and the
member rejoins when the thread polls again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol

from streams_core.clients.kafka_clients import CommitFailedError, KafkaError
from streams_core.clients.ports import Consumer, RebalanceListener, StreamsGroupAssignor
from streams_core.clients.streams_group_membership import (
    IN_GROUP,
    MemberState,
    Reconciliation,
    StreamsGroupError,
    StreamsGroupMembership,
)
from streams_core.clients.streams_group_offset_commit import STALE_MEMBER_EPOCH
from streams_core.clients.streams_group_poll_timer import PollTimer
from streams_core.clients.streams_group_protocol import (
    EndpointPartitions,
    GroupStatus,
    HeartbeatRequestData,
    HeartbeatResponseData,
    StatusCode,
    StreamsGroupDescription,
    TaskAssignment,
)
from streams_core.clients.streams_group_topology_diff import topology_difference
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.topic_partition import TopicPartition

__all__ = ["StreamsGroupMember", "StreamsGroupTransport"]

log = logging.getLogger(__name__)

DEFAULT_HEARTBEAT_INTERVAL_MS = 5000
"""Until the broker has said its interval (the first answer carries it)."""


def _stopping(statuses: Iterable[GroupStatus]) -> frozenset[GroupStatus]:
    """The statuses announced as soon as they change: a shutdown a member asked for. (Missing or wrongly
    partitioned source topics come with a new assignment or endpoint map, which announces them.)"""
    return frozenset(status for status in statuses if status.code == StatusCode.SHUTDOWN_APPLICATION)


def _names(tasks: Iterable[object]) -> str:
    return ", ".join(sorted(str(t) for t in tasks)) or "(none)"


class StreamsGroupTransport(Protocol):
    """How a member reaches its group coordinator (`StreamsGroupChannel` over aiokafka, or a fake)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def heartbeat(self, data: HeartbeatRequestData) -> HeartbeatResponseData: ...

    async def commit_offsets(
        self, membership: StreamsGroupMembership, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
    ) -> dict[TopicPartition, int]:
        """Commit as the member (its id and epoch); the partitions refused, with their error codes."""
        ...

    async def describe(self) -> StreamsGroupDescription | None:
        """The group as its coordinator describes it (None where the transport cannot)."""
        ...


class StreamsGroupMember:
    """The heartbeat loop of one member and what it does to its thread (see module doc)."""

    def __init__(
        self,
        membership: StreamsGroupMembership,
        transport: StreamsGroupTransport,
        consumer: Consumer,
        assignor: StreamsGroupAssignor,
        *,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        max_poll_interval_ms: int = 300_000,
        log_prefix: str = "",
    ) -> None:
        self.membership = membership
        self._transport = transport
        self._consumer = consumer
        self._assignor = assignor
        self._timeout_s = request_timeout_ms / 1000
        self._backoff_s = retry_backoff_ms / 1000
        self._log_prefix = log_prefix
        self.listener: RebalanceListener | None = None
        self.error: BaseException | None = None
        self._heartbeats: asyncio.Task[None] | None = None
        self._callbacks: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # heartbeat now (if one can go)
        self._changed = asyncio.Event()  # a heartbeat answered, or the thread asked to reinstall
        self._last_sent = 0.0
        self._announced_endpoints: tuple[EndpointPartitions, ...] | None = None
        self._announced_stop: frozenset[GroupStatus] = frozenset()
        self._reinstall = False
        self.poll_timer = PollTimer(max_poll_interval_ms)
        self._callback: str | None = None  # what the callback loop is doing, for the poll timer's warning
        self._callback_started = 0.0
        self._stale_lost = False  # STALE: the tasks were lost; the member rejoins at the next poll
        self._polled = False  # the thread polled since the member left as the poll timer expired

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Join: the loop sends the joining heartbeat at once."""
        await self._transport.start()
        self.poll_timer.reset()
        self.membership.join()
        self._heartbeats = asyncio.create_task(self._send_heartbeats(), name=f"{self._log_prefix}streams-group-heartbeat")
        self._callbacks = asyncio.create_task(self._run_callbacks(), name=f"{self._log_prefix}streams-group-callbacks")

    async def stop(self) -> None:
        """Leave the group (epoch -1), within the request timeout; the thread closed its tasks before."""
        for task in (self._callbacks, self._heartbeats):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._callbacks = self._heartbeats = None
        membership = self.membership
        try:
            if membership.state not in (MemberState.UNJOINED, MemberState.LEFT, MemberState.FATAL):
                membership.leave()
                await self._heartbeat()
        finally:
            await self._transport.close()

    def check(self) -> None:
        """Raise the error that ended the member (fatal for the thread)."""
        if self.error is not None:
            raise self.error

    def polled(self) -> None:
        """The thread polled: reset the poll timer; a member that left as it expired rejoins (once its
        tasks are lost)."""
        self.poll_timer.reset()
        self._polled = True
        if self.membership.state is MemberState.STALE:
            self._changed.set()

    def restored(self) -> None:
        """The thread restored records (inside the assignment callback): as alive as a poll, without
        rejoining (the thread has not polled yet)."""
        self.poll_timer.reset()

    @property
    def out_of_group(self) -> bool:
        """Left as the poll timer expired (LEAVING or STALE): the partitions are no longer the member's,
        the consumer returns no records until the tasks are lost and the member rejoins."""
        return self.membership.state in (MemberState.LEAVING, MemberState.STALE)

    def request_reinstall(self) -> None:
        """The thread closed every task (a task migrated): install the owned tasks again, from their commits."""
        self._reinstall = True
        self._changed.set()

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit as the member; a refused partition raises `CommitFailedError` naming the errors."""
        async with asyncio.timeout(self._timeout_s):
            errors = await self._transport.commit_offsets(self.membership, offsets)
        if errors:
            stale = any(code == STALE_MEMBER_EPOCH for code in errors.values())
            if stale:
                self._wake.set()  # heartbeat now: the epoch moved on
            raise CommitFailedError(
                f"streams group {self.membership.group_id!r} refused the offset commit of member "
                f"{self.membership.member_id} epoch {self.membership.member_epoch}: "
                + ", ".join(f"{tp} error {code}" for tp, code in sorted(errors.items()))
            )

    # -- the two loops ------------------------------------------------------------------------

    async def _send_heartbeats(self) -> None:
        """The heartbeat loop: at the broker's interval (at once when urgent), one in flight at a
        time, also while the callbacks run (a callback longer than the session timeout would get the
        member fenced otherwise; Java heartbeats from the consumer's background thread)."""
        try:
            while self.membership.state not in (MemberState.FATAL, MemberState.LEFT):
                await self._wait_for_heartbeat()
                self._check_poll_timer()
                await self._heartbeat()
                self._changed.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an answer the membership refuses: the thread fails with it
            log.exception("%sstreams group heartbeat loop failed", self._log_prefix)
            self.error = exc
            self._changed.set()  # the callback loop ends too

    async def _run_callbacks(self) -> None:
        """The callback loop: applies what the heartbeats changed to the thread, one step at a time."""
        try:
            while await self._step():
                pass
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a listener or assignor error: the thread fails with it
            log.exception("%sstreams group member failed", self._log_prefix)
            self.error = exc
        if self.error is not None and self._heartbeats is not None:
            self._heartbeats.cancel()  # a failed member takes no further part; the thread's close leaves

    async def _step(self) -> bool:
        """Act on the membership's state, or wait until a heartbeat changes it; False once it is over."""
        membership = self.membership
        if self.error is not None:
            return False
        if membership.state is MemberState.FATAL:
            self.error = await self._explained(membership.fatal_error)
            return False
        if membership.state is MemberState.FENCED:
            await self._lose_all("fenced")
            membership.rejoin()
        elif membership.state is MemberState.STALE:
            if not self._stale_lost:
                await self._lose_all("left the group as the poll timer expired")
                self._stale_lost = True
            elif not self._polled:  # until the thread polls again
                await self._changed.wait()
                self._changed.clear()
                return True
            else:
                log.info("%sstreams group: the thread polls again; rejoining", self._log_prefix)
                self._stale_lost = False
                membership.rejoin()
        elif membership.reconciliation is not None:
            await self._reconcile(membership.reconciliation)
        elif self._reinstall:
            self._reinstall = False
            await self._install(membership.owned, frozenset())
        elif self._announces_endpoints() or self._announces_stop():
            await self._install(membership.owned, self._consumer.assignment())
        else:
            await self._changed.wait()
            self._changed.clear()
            return True
        self._wake.set()  # the membership moved on (rejoining, acknowledging): heartbeat now if urgent
        return True

    def _announces_endpoints(self) -> bool:
        """Whether the endpoint map changed alone and is to be announced: not while the broker holds the
        assignment back (ASSIGNMENT_DELAYED; the first one would otherwise be announced as an empty
        assignment before the real one, and a batch run would start on it, KIP-95)."""
        membership = self.membership
        return (
            membership.state is MemberState.STABLE
            and self._announced_endpoints != membership.endpoints
            and not any(status.code == StatusCode.ASSIGNMENT_DELAYED for status in membership.statuses)
        )

    def _announces_stop(self) -> bool:
        """Whether a shutdown another member asked for (status SHUTDOWN_APPLICATION) came since the last
        announcement: the assignor makes it the assignment's error, which the listener raises, as
        Java's stream thread checks the statuses at each poll."""
        if self.membership.state not in (MemberState.STABLE, MemberState.ACKNOWLEDGING):
            return False
        return _stopping(self.membership.statuses) != self._announced_stop

    async def _wait_for_heartbeat(self) -> None:
        """Until the next heartbeat is due: at once when urgent, else the interval after the last one
        (a wake-up, e.g. a commit that found the epoch stale, cuts it short); while nothing can be
        sent (fenced, until the callbacks lost the tasks and rejoined), until woken. A member in the
        group also wakes when its poll timer would expire (a poll since then puts the deadline back)."""
        membership = self.membership
        while not membership.urgent:
            interval_s = (membership.heartbeat_interval_ms or DEFAULT_HEARTBEAT_INTERVAL_MS) / 1000
            remaining = self._last_sent + interval_s - time.monotonic() if membership.can_heartbeat else None
            if remaining is not None and remaining <= 0:
                return
            poll_due = self.poll_timer.remaining_s if membership.state in IN_GROUP else None
            if poll_due is not None and poll_due <= 0:
                return
            timeout = poll_due if remaining is None else remaining if poll_due is None else min(remaining, poll_due)
            woken = False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):  # not wait_for: 3.11's can swallow a cancellation racing the wake-up
                    await self._wake.wait()
                    woken = True
            self._wake.clear()
            if woken:
                return

    def _check_poll_timer(self) -> None:
        """Leave the group when the thread has neither polled nor restored for `max.poll.interval.ms`
        (Java's `AbstractHeartbeatRequestManager` on an expired poll timer): the next heartbeat sends
        epoch -1, the broker gives the tasks to the other members."""
        membership, timer = self.membership, self.poll_timer
        if membership.state not in IN_GROUP or not timer.expired or not membership.can_heartbeat:
            return
        if self._callback is not None:
            doing = f"the rebalance callback {self._callback} has run for {time.monotonic() - self._callback_started:.1f} s"
        else:
            doing = "no rebalance callback runs: processing, a punctuation or a commit takes that long"
        owned = sorted(str(t) for t in membership.owned.active)
        log.warning(
            "%sstreams group %r: the stream thread has neither polled nor restored a record for %.1f s, "
            "over max.poll.interval.ms=%d (%s); member %s leaves the group and its active tasks %s go to "
            "other members; it rejoins when the thread polls again",
            self._log_prefix, membership.group_id, timer.elapsed_s, timer.interval_ms, doing, membership.member_id, owned,
        )
        self._stale_lost = self._polled = False
        membership.leave_stale()
        self._changed.set()

    async def _heartbeat(self) -> None:
        """Send the next heartbeat, if any, with a deadline; a failure is retried after the backoff."""
        membership = self.membership
        data = membership.heartbeat_request()
        if data is None:
            return
        self._last_sent = time.monotonic()
        try:
            async with asyncio.timeout(self._timeout_s):
                response = await self._transport.heartbeat(data)
        except (KafkaError, OSError, TimeoutError) as exc:
            membership.on_request_failed()
            log.warning("%sstreams group heartbeat failed (%r); retrying", self._log_prefix, exc)
            await asyncio.sleep(self._backoff_s)
            return
        except BaseException:
            membership.on_request_failed()
            raise
        membership.on_response(response)

    async def _reconcile(self, reconciliation: Reconciliation) -> None:
        """Revoke the dropped active tasks, then install the whole target (KIP-1071's order)."""
        membership, listener = self.membership, self.listener
        if reconciliation.revoke:
            revoked = self._assignor.streams_group_partitions(reconciliation.revoke) & self._consumer.assignment()
            log.info("%sstreams group: revoking %s", self._log_prefix, sorted(str(t) for t in reconciliation.revoke))
            if listener is not None:
                with self._running(f"revoking tasks {_names(reconciliation.revoke)}"):
                    await listener.on_partitions_revoked(revoked)
        if not membership.revoked(reconciliation):
            return  # fenced (or left) while the listener ran: the next step loses every task
        await self._install(reconciliation.assignment, self._consumer.assignment())
        if not membership.assigned(reconciliation):
            return
        log.info(
            "%sstreams group epoch %d: active %s, standby %s, warm-up %s",
            self._log_prefix,
            reconciliation.member_epoch,
            sorted(str(t) for t in reconciliation.assignment.active),
            sorted(str(t) for t in reconciliation.assignment.standby),
            sorted(str(t) for t in reconciliation.assignment.warmup),
        )

    async def _install(self, tasks: TaskAssignment, previous: frozenset[TopicPartition]) -> None:
        """Give the assignor the tasks, assign their partitions (keeping the positions of those the
        consumer keeps) and call the listener with the whole assignment."""
        membership = self.membership
        self._announced_endpoints = membership.endpoints
        self._announced_stop = _stopping(membership.statuses)
        self._assignor.on_streams_group_assignment(tasks, membership.endpoints, membership.statuses)
        partitions = self._assignor.streams_group_partitions(tasks.active)
        if partitions != previous:
            positions = await self._positions(previous & partitions)
            self._consumer.assign(partitions)
            for tp, offset in positions.items():
                self._consumer.seek(tp, offset)
        if self.listener is not None:
            with self._running(f"assigning active tasks {_names(tasks.active)}"):
                await self.listener.on_partitions_assigned(partitions)

    async def _positions(self, partitions: frozenset[TopicPartition]) -> dict[TopicPartition, int]:
        """The positions of partitions the consumer keeps: a new assignment would forget them (and
        go back to the last commit, reprocessing what the kept tasks processed since)."""
        positions = {}
        for tp in partitions:
            try:
                async with asyncio.timeout(self._timeout_s):
                    positions[tp] = await self._consumer.position(tp)
            except (KafkaError, TimeoutError) as exc:  # no position yet: the committed offset is right
                log.info("%sno position for %s (%r): it starts from its committed offset", self._log_prefix, tp, exc)
        return positions

    @contextlib.contextmanager
    def _running(self, callback: str) -> Iterator[None]:
        """Name the callback that runs, for the poll timer's warning."""
        self._callback, self._callback_started = callback, time.monotonic()
        try:
            yield
        finally:
            self._callback = None

    async def _lose_all(self, why: str) -> None:
        """Fenced, or left as the poll timer expired: the tasks belong to others now; close them without committing."""
        lost = self._consumer.assignment()
        listener = self.listener
        rejoin = "rejoining" if self.membership.state is MemberState.FENCED else "rejoining at the thread's next poll"
        log.warning("%sstreams group: %s, %d partitions lost; %s", self._log_prefix, why, len(lost), rejoin)
        if listener is not None:
            on_lost = getattr(listener, "on_partitions_lost", None)
            with self._running("losing every task"):
                await (on_lost(lost) if on_lost is not None else listener.on_partitions_revoked(lost))
        self._consumer.assign(())
        self._assignor.on_streams_group_assignment(TaskAssignment.EMPTY, self.membership.endpoints)
        self._announced_endpoints = None
        self._announced_stop = frozenset()

    async def _explained(self, error: StreamsGroupError | None) -> BaseException:
        """The fatal error, with the topology difference named when the broker refused ours."""
        if error is None:
            return StreamsGroupError(self.membership.group_id, -1, "the member failed")
        if error.error_name not in ("INVALID_REQUEST", "STREAMS_INVALID_TOPOLOGY"):
            return error
        try:
            async with asyncio.timeout(self._timeout_s):
                description = await self._transport.describe()
        except Exception as exc:  # the explanation is a courtesy: the broker's error stands
            log.info("%scannot describe the group to explain %s: %r", self._log_prefix, error, exc)
            return error
        if description is None or description.topology is None:
            return error
        difference = topology_difference(description.topology, self.membership.info.topology)
        if not difference:
            return error
        detail = f"{error.message}; " if error.message else ""
        return StreamsGroupError(
            self.membership.group_id, error.code, f"{detail}the group's topology differs from this application's: {difference}"
        )
