"""FakeStreamsGroupCoordinator: the broker side of one streams group, in memory, for broker-free unit tests.

It answers `HeartbeatRequestData` with `HeartbeatResponseData` as KIP-1071's coordinator does in the
respects a member depends on, and no more: the first join initializes the topology (a later join with
different sub-topologies is STREAMS_INVALID_TOPOLOGY); every join or leave bumps the group epoch and the
target assignment is recomputed, balanced and sticky, with `num_standby_replicas` standbys (the group's
`streams.num.standby.replicas`) of each stateful task (one with a changelog: the broker's rule) on members of
other processes, sticky too (no warm-ups); a member is given an active task only once no other member holds it
(given to it, or still reported as owned), a standby at once, and
its epoch reaches the assignment epoch only once it no longer owns tasks it must give up; an unknown member id is
UNKNOWN_MEMBER_ID, a wrong epoch FENCED_MEMBER_EPOCH; what 4.3 does not support yet (task offsets, warm-up
tasks reported, static membership) INVALID_REQUEST with the broker's message; a member not heard from for the session timeout is
removed (as the broker's session timer does; its next heartbeat is UNKNOWN_MEMBER_ID); missing source
topics are a MISSING_SOURCE_TOPICS status and no tasks; a member's ShutdownApplication (joining, heartbeating
or leaving) is a SHUTDOWN_APPLICATION status for every member until the group is empty. Tasks, statuses and endpoints are sent only when
they changed for that member.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from streams_core.clients.streams_group_membership import FENCED_MEMBER_EPOCH, INVALID_REQUEST, UNKNOWN_MEMBER_ID
from streams_core.clients.streams_group_protocol import (
    EndpointPartitions,
    GroupStatus,
    HeartbeatRequestData,
    HeartbeatResponseData,
    StatusCode,
    StreamsGroupTopology,
    TaskAssignment,
)
from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition

__all__ = ["FakeStreamsGroupCoordinator"]

STREAMS_INVALID_TOPOLOGY = 130


@dataclass(slots=True)
class _Member:
    member_id: str
    process_id: str
    endpoint: HostInfo | None
    epoch: int = 0
    owned: frozenset[TaskId] = frozenset()
    given: frozenset[TaskId] = frozenset()
    given_standby: frozenset[TaskId] = frozenset()
    sent: TaskAssignment | None = None
    sent_status: tuple[GroupStatus, ...] | None = None
    sent_endpoints: tuple[EndpointPartitions, ...] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    last_heard: float = field(default_factory=time.monotonic)


def _unsupported(data: HeartbeatRequestData) -> str | None:
    """What the 4.3 broker refuses as not supported yet (GroupCoordinatorService), with its message."""
    if data.instance_id is not None:
        return "Static membership is not yet supported."
    if data.task_offsets is not None:
        return "TaskOffsets are not supported yet."
    if data.task_end_offsets is not None:
        return "TaskEndOffsets are not supported yet."
    if data.tasks is not None and data.tasks.warmup:
        return "WarmupTasks are not supported yet."
    return None


def shutdown_detail(member_id: str) -> str:
    """The broker's detail of the SHUTDOWN_APPLICATION status (4.3's GroupMetadataManager)."""
    return f"Streams group member {member_id} encountered a fatal error and requested a shutdown for the entire application."


class FakeStreamsGroupCoordinator:
    """One streams group's coordinator over fixed source topic partition counts (see module doc)."""

    def __init__(
        self,
        group_id: str,
        partition_counts: Mapping[str, int],
        *,
        heartbeat_interval_ms: int = 5000,
        session_timeout_ms: int = 45_000,
        num_standby_replicas: int = 0,
    ) -> None:
        self.group_id = group_id
        self.partition_counts = dict(partition_counts)
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self.num_standby_replicas = num_standby_replicas  # set before members join, as the group config
        self.expired: list[str] = []  # members removed by the session timeout, in order
        self.topology: StreamsGroupTopology | None = None
        self.members: dict[str, _Member] = {}
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.target: dict[str, frozenset[TaskId]] = {}
        self.standby_target: dict[str, frozenset[TaskId]] = {}
        self.shutdown_requested_by: str | None = None  # the first member that set ShutdownApplication
        self.requests: list[HeartbeatRequestData] = []

    # -- the group's tasks --------------------------------------------------------------------

    def _statuses(self) -> tuple[GroupStatus, ...]:
        """The group's statuses: the topology's, and a shutdown a member asked for (until the group is empty)."""
        _, statuses = self._subtopology_tasks()
        if self.shutdown_requested_by is not None:
            statuses += (GroupStatus(StatusCode.SHUTDOWN_APPLICATION, shutdown_detail(self.shutdown_requested_by)),)
        return statuses

    def _subtopology_tasks(self) -> tuple[frozenset[TaskId], tuple[GroupStatus, ...]]:
        if self.topology is None:
            return frozenset(), ()
        tasks: set[TaskId] = set()
        missing = sorted(t for s in self.topology.subtopologies for t in s.source_topics if t not in self.partition_counts)
        if missing:
            return frozenset(), (
                GroupStatus(StatusCode.MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing."),
            )
        widest = max(self.partition_counts.values(), default=0)
        for sub in self.topology.subtopologies:
            counts = [self.partition_counts[t] for t in sub.source_topics]
            counts += [t.partitions or widest for t in sub.repartition_source_topics]
            tasks.update(TaskId(int(sub.subtopology_id), p) for p in range(max(counts, default=0)))
        return frozenset(tasks), ()

    def _assign(self) -> None:
        """A balanced target that keeps each member's previous target tasks where it can."""
        tasks, _ = self._subtopology_tasks()
        ids = sorted(self.members)
        self.target = {m: frozenset() for m in ids}
        if ids:
            quota, extra = divmod(len(tasks), len(ids))
            limits = {m: quota + (1 if i < extra else 0) for i, m in enumerate(ids)}
            placed: set[TaskId] = set()
            kept: dict[str, set[TaskId]] = {m: set() for m in ids}
            for m in ids:
                previous = sorted(self.members[m].given & tasks)
                kept[m].update(previous[: limits[m]])
                placed.update(kept[m])
            for task in sorted(tasks - placed):
                m = min(ids, key=lambda i: (len(kept[i]) - limits[i], len(kept[i]), i))
                kept[m].add(task)
            self.target = {m: frozenset(kept[m]) for m in ids}
        self._assign_standbys(tasks)
        self.assignment_epoch = self.group_epoch

    def _assign_standbys(self, tasks: frozenset[TaskId]) -> None:
        """`num_standby_replicas` copies of each stateful task, each on a member of a process not running the
        task nor holding a copy yet: previous holders first, then the members with the fewest standbys."""
        stateful = {int(s.subtopology_id) for s in self.topology.subtopologies if s.state_changelog_topics} if self.topology else set()
        standbys: dict[str, set[TaskId]] = {m: set() for m in self.target}
        for task in sorted(t for t in tasks if t.subtopology in stateful):
            processes = {self.members[m].process_id for m, active in self.target.items() if task in active}
            for _ in range(self.num_standby_replicas):
                free = [m for m in sorted(standbys) if self.members[m].process_id not in processes]
                if not free:
                    break
                chosen = min(free, key=lambda m: (task not in self.members[m].given_standby, len(standbys[m])))
                standbys[chosen].add(task)
                processes.add(self.members[chosen].process_id)
        self.standby_target = {m: frozenset(t) for m, t in standbys.items()}

    def _endpoints(self) -> tuple[EndpointPartitions, ...]:
        topics = {}
        if self.topology is not None:
            topics = {int(s.subtopology_id): s.source_topics for s in self.topology.subtopologies}
        result = []
        for m in sorted(self.members.values(), key=lambda m: m.member_id):
            if m.endpoint is not None:
                active, standby = (
                    frozenset(TopicPartition(t, task.partition) for task in given for t in topics.get(task.subtopology, ()))
                    for given in (m.given, m.given_standby)
                )
                result.append(EndpointPartitions(m.endpoint, active, standby))
        return tuple(result)

    # -- the exchange -------------------------------------------------------------------------

    def heartbeat(self, data: HeartbeatRequestData) -> HeartbeatResponseData:
        """Answer one heartbeat of a member."""
        self.requests.append(data)
        if data.group_id != self.group_id:
            raise ValueError(f"heartbeat for group {data.group_id!r} sent to the coordinator of {self.group_id!r}")
        refused = _unsupported(data)
        if refused is not None:
            return self._error(data.member_id, INVALID_REQUEST, refused)
        self._expire_sessions()
        if data.member_id in self.members:
            self.members[data.member_id].last_heard = time.monotonic()
            if data.shutdown_application and self.shutdown_requested_by is None:
                self.shutdown_requested_by = data.member_id  # a leaving member's request counts too
        if data.member_epoch < 0:
            if self.members.pop(data.member_id, None) is not None:
                self.group_epoch += 1
                self._assign()
                self._forget_shutdown_when_empty()
            return self._answer(data.member_id, data.member_epoch)
        if data.member_epoch == 0:
            error = self._join(data)
            if error:
                return self._error(data.member_id, error[0], error[1])
        member = self.members.get(data.member_id)
        if member is None:
            return self._error(data.member_id, UNKNOWN_MEMBER_ID, f"member {data.member_id} is not in the group")
        if data.shutdown_application and self.shutdown_requested_by is None:
            self.shutdown_requested_by = member.member_id  # a joining member's request
        if data.member_epoch not in (0, member.epoch):
            return self._error(data.member_id, FENCED_MEMBER_EPOCH, f"epoch {data.member_epoch}, expected {member.epoch}")
        if data.tasks is not None:
            member.owned = data.tasks.active
        return self._reconcile(member)

    def _expire_sessions(self) -> None:
        """Remove the members not heard from for the session timeout (checked at each heartbeat)."""
        now = time.monotonic()
        expired = [m for m in self.members.values() if now - m.last_heard > self.session_timeout_ms / 1000]
        for member in expired:
            del self.members[member.member_id]
            self.expired.append(member.member_id)
        if expired:
            self.group_epoch += 1
            self._assign()
            self._forget_shutdown_when_empty()

    def _forget_shutdown_when_empty(self) -> None:
        """As the broker's StreamsGroup: the shutdown request lasts until the group is empty, so a
        restarted application does not get its previous run's."""
        if not self.members:
            self.shutdown_requested_by = None

    def _join(self, data: HeartbeatRequestData) -> tuple[int, str] | None:
        if data.topology is None or data.process_id is None:
            return (INVALID_REQUEST, "a joining member sends its topology and process id")
        if self.topology is None:
            self.topology = data.topology
        elif [s.subtopology_id for s in self.topology.subtopologies] != [s.subtopology_id for s in data.topology.subtopologies]:
            return (STREAMS_INVALID_TOPOLOGY, "the topology differs from the group's")
        self.members[data.member_id] = _Member(
            data.member_id, data.process_id, data.user_endpoint, tags=dict(data.client_tags or {})
        )
        self.group_epoch += 1
        self._assign()
        return None

    def _reconcile(self, member: _Member) -> HeartbeatResponseData:
        target = self.target.get(member.member_id, frozenset())
        # a task is free once no other member was given it nor still reports owning it
        held_elsewhere = frozenset().union(*(m.owned | m.given for m in self.members.values() if m is not member))
        member.given = (member.given & target) | (target - held_elsewhere)
        member.given_standby = self.standby_target.get(member.member_id, frozenset())
        if not (member.owned - target) or member.epoch == 0:
            member.epoch = max(self.assignment_epoch, 1)
        return self._answer(member.member_id, member.epoch)

    def _answer(self, member_id: str, epoch: int) -> HeartbeatResponseData:
        member = self.members.get(member_id)
        tasks = status = endpoints = None
        if member is not None:
            current_tasks = TaskAssignment(member.given, member.given_standby)
            if current_tasks != member.sent:
                tasks = member.sent = current_tasks
            current_status = self._statuses()
            if current_status != member.sent_status:
                status = member.sent_status = current_status
            current_endpoints = self._endpoints()
            if current_endpoints != member.sent_endpoints:
                endpoints = member.sent_endpoints = current_endpoints
        return HeartbeatResponseData(
            error_code=0,
            error_message=None,
            member_id=member_id,
            member_epoch=epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            acceptable_recovery_lag=10_000,
            task_offset_interval_ms=60_000,
            status=status,
            tasks=tasks,
            endpoint_information_epoch=self.group_epoch,
            endpoints=endpoints,
        )

    def _error(self, member_id: str, code: int, message: str) -> HeartbeatResponseData:
        return HeartbeatResponseData(code, message, member_id, -1, 0, 0, 0, None, None, 0, None)
