"""StreamsGroupMembership: one member of a streams group (KIP-1071) as a pure state machine.

No I/O: the owner asks for the next heartbeat (`heartbeat_request`), sends it, and feeds the answer
back (`on_response`, or `on_request_failed`). The broker computes the assignment; the member applies it
with KIP-1071's (and KIP-848's) epoch rules:

1. Joining sends member epoch 0 with everything the broker needs about the member: the topology,
   process id, endpoint, client tags, rebalance timeout, and the tasks it owns (none).
2. Every answer's member epoch is adopted. An answer with tasks is the member's new target: the
   owner first revokes (commits and closes) the active tasks it loses (`reconciliation.revoke`),
   reports it (`revoked`), then installs the whole target (`assigned`); only then does the next
   heartbeat report the tasks as owned, which acknowledges the assignment (ACKNOWLEDGING -> STABLE).
   A task is never reported before it is installed, nor installed before the revocation is done.
   Heartbeats go on while the owner's callbacks run (RECONCILING): they report the tasks owned so far
   (after `revoked`, without the revoked ones), never the target. A member fenced meanwhile abandons
   the reconciliation (`revoked`/`assigned` answer False) and the owner loses every task.
3. FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: the member's tasks are lost (the owner closes them
   without committing) and it rejoins with epoch 0, keeping its member id (`rejoin`).
4. Leaving sends epoch -1 (-2: a static member that will come back); the owner closes its tasks first.
   A member asked to (`request_shutdown`, or `MemberInfo.shutdown_requested`) sets ShutdownApplication
   on every heartbeat: the broker then tells every member the group is to shut down.
5. The thread stopped polling for `max.poll.interval.ms` (`leave_stale`): the member leaves with epoch
   -1 and stays out (STALE, no heartbeats) until the owner lost its tasks and the thread polls again,
   then rejoins with epoch 0 and the same member id (`rejoin`), as Java's `StreamsMembershipManager`.
6. Any other error is fatal (`fatal_error` says which); coordinator errors are retried.

Invariants: at most one heartbeat in flight; `member_epoch == 0` exactly while JOINING; `owned` only
ever holds tasks the owner said it installed.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from streams_core.clients.streams_group_protocol import (
    LEAVE_GROUP_EPOCH,
    LEAVE_GROUP_STATIC_EPOCH,
    EndpointPartitions,
    GroupStatus,
    HeartbeatRequestData,
    HeartbeatResponseData,
    StreamsGroupTopology,
    TaskAssignment,
)
from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.errors import StreamsError

__all__ = ["IN_GROUP", "MemberInfo", "MemberState", "Reconciliation", "StreamsGroupError", "StreamsGroupMembership"]

log = logging.getLogger(__name__)

#: Error codes (Kafka's `Errors`) a heartbeat answer can carry, by how the member handles them.
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNKNOWN_MEMBER_ID = 25
INVALID_REQUEST = 42
FENCED_MEMBER_EPOCH = 110
RETRIABLE_ERRORS = frozenset({COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})
FENCING_ERRORS = frozenset({UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH})
ERROR_NAMES = {
    24: "INVALID_GROUP_ID",
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    35: "UNSUPPORTED_VERSION",
    INVALID_REQUEST: "INVALID_REQUEST",
    69: "GROUP_ID_NOT_FOUND",
    81: "GROUP_MAX_SIZE_REACHED",
    111: "UNRELEASED_INSTANCE_ID",
    130: "STREAMS_INVALID_TOPOLOGY",
    131: "STREAMS_INVALID_TOPOLOGY_EPOCH",
    132: "STREAMS_TOPOLOGY_FENCED",
    FENCED_MEMBER_EPOCH: "FENCED_MEMBER_EPOCH",
    UNKNOWN_MEMBER_ID: "UNKNOWN_MEMBER_ID",
    NOT_COORDINATOR: "NOT_COORDINATOR",
    COORDINATOR_NOT_AVAILABLE: "COORDINATOR_NOT_AVAILABLE",
    COORDINATOR_LOAD_IN_PROGRESS: "COORDINATOR_LOAD_IN_PROGRESS",
}


class StreamsGroupError(StreamsError):
    """The broker refused the member for good (e.g. STREAMS_INVALID_TOPOLOGY): code, name and message."""

    def __init__(self, group_id: str, code: int, message: str | None) -> None:
        self.group_id = group_id
        self.code = code
        self.message = message
        self.error_name = ERROR_NAMES.get(code, f"error {code}")
        detail = f": {message}" if message else ""
        super().__init__(f"streams group {group_id!r}: {self.error_name}{detail}")

    def __reduce__(self) -> tuple[type[StreamsGroupError], tuple[str, int, str | None]]:
        """Pickled with its arguments: a worker process sends its thread's error to the instance."""
        return type(self), (self.group_id, self.code, self.message)


class MemberState(enum.Enum):
    UNJOINED = "UNJOINED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"  # a new target: revoke, then install it
    ACKNOWLEDGING = "ACKNOWLEDGING"  # installed; the next heartbeat reports it
    STABLE = "STABLE"
    FENCED = "FENCED"  # tasks lost; the owner closes them and calls rejoin()
    STALE = "STALE"  # left as the poll timer expired; the owner loses its tasks and rejoins at the next poll
    LEAVING = "LEAVING"
    LEFT = "LEFT"
    FATAL = "FATAL"


_SILENT = frozenset({MemberState.UNJOINED, MemberState.FENCED, MemberState.STALE, MemberState.LEFT, MemberState.FATAL})
"""States in which the member sends no heartbeat (fenced, stale: until the owner lost its tasks and rejoins)."""

IN_GROUP = frozenset({MemberState.JOINING, MemberState.RECONCILING, MemberState.ACKNOWLEDGING, MemberState.STABLE})
"""States in which the member is (or is becoming) a member of the group, which the poll timer can end."""


@dataclass(frozen=True, slots=True)
class MemberInfo:
    """What the member tells the broker when it joins; constant for its lifetime."""

    process_id: str
    topology: StreamsGroupTopology
    user_endpoint: HostInfo | None = None
    client_tags: Mapping[str, str] = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = 300_000
    shutdown_requested: bool = False  # a member made to ask every member to shut down (SHUTDOWN_APPLICATION)


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """One step towards the broker's target: revoke these active tasks first, then install `assignment`."""

    member_epoch: int
    revoke: frozenset[TaskId]
    assignment: TaskAssignment


class StreamsGroupMembership:
    """The member side of KIP-1071's heartbeat protocol for one consumer of an application (see module doc)."""

    __slots__ = (
        "_endpoint_epoch",
        "_in_flight",
        "_revoked",
        "_sent_tasks",
        "_stale",
        "_stale_leave_in_flight",
        "_target",
        "endpoints",
        "fatal_error",
        "group_id",
        "heartbeat_interval_ms",
        "info",
        "member_epoch",
        "member_id",
        "owned",
        "reconciliation",
        "shutdown_requested",
        "state",
        "statuses",
    )

    def __init__(self, group_id: str, member_id: str, info: MemberInfo) -> None:
        if not member_id:
            raise ValueError("a streams group member generates its own non-empty member id")
        self.group_id = group_id
        self.member_id = member_id
        self.info = info
        self.state = MemberState.UNJOINED
        self.member_epoch = 0
        self.heartbeat_interval_ms = 0
        self.owned = TaskAssignment.EMPTY
        self.reconciliation: Reconciliation | None = None
        self.statuses: tuple[GroupStatus, ...] = ()
        self.endpoints: tuple[EndpointPartitions, ...] = ()
        self.fatal_error: StreamsGroupError | None = None
        self.shutdown_requested = info.shutdown_requested
        self._target: TaskAssignment | None = None
        self._revoked = False
        self._sent_tasks: TaskAssignment | None = None
        self._endpoint_epoch = 0
        self._in_flight = False
        self._stale = False
        self._stale_leave_in_flight = False  # its answer is ignored, even once the member rejoined

    # -- the owner's commands ---------------------------------------------------------------

    def join(self) -> None:
        if self.state is not MemberState.UNJOINED:
            raise RuntimeError(f"join() in state {self.state.name}")
        self._transition(MemberState.JOINING)

    def rejoin(self) -> None:
        """After FENCED (or STALE, once the thread polls again): the owner closed the lost tasks; join
        again with epoch 0 and the same member id."""
        if self.state not in (MemberState.FENCED, MemberState.STALE):
            raise RuntimeError(f"rejoin() in state {self.state.name}")
        self._reset_assignment()
        self._transition(MemberState.JOINING)

    def revoked(self, reconciliation: Reconciliation) -> bool:
        """The owner committed and closed `reconciliation.revoke`: heartbeats from now on report the
        tasks owned without them. False when the reconciliation was abandoned meanwhile (see `assigned`)."""
        if self._abandoned(reconciliation):
            return False
        self.owned = TaskAssignment(self.owned.active - reconciliation.revoke, self.owned.standby, self.owned.warmup)
        self._revoked = True
        return True

    def assigned(self, reconciliation: Reconciliation) -> bool:
        """The owner installed `reconciliation.assignment` (after revoking); the next heartbeat reports it.

        False when the reconciliation was abandoned while the owner's callbacks ran (heartbeats go on
        meanwhile): the member was fenced (the owner loses every task, then rejoins) or failed."""
        if self._abandoned(reconciliation):
            return False
        if reconciliation.revoke and not self._revoked:
            raise RuntimeError(f"tasks {sorted(reconciliation.revoke)} must be revoked before the new assignment is installed")
        self.owned = reconciliation.assignment
        self.reconciliation = None
        self._revoked = False
        self._transition(MemberState.ACKNOWLEDGING)
        self._maybe_reconcile()
        return True

    def request_shutdown(self) -> None:
        """Ask every member of the group to shut down: every later heartbeat, the leaving one too,
        carries ShutdownApplication (Java's `StreamsRebalanceData.requestShutdown`); the broker
        answers every member with the SHUTDOWN_APPLICATION status until the group is empty."""
        self.shutdown_requested = True

    def leave(self, *, static: bool = False) -> None:
        """Leave the group (the owner has closed its tasks): the next heartbeat sends epoch -1 (or -2)."""
        if self.state in (MemberState.UNJOINED, MemberState.FENCED, MemberState.STALE, MemberState.FATAL, MemberState.LEFT):
            self._transition(MemberState.LEFT)
            return
        self._stale = False
        self.member_epoch = LEAVE_GROUP_STATIC_EPOCH if static else LEAVE_GROUP_EPOCH
        self._reset_assignment(keep_epoch=True)
        self._transition(MemberState.LEAVING)

    def leave_stale(self) -> None:
        """The poll timer expired: the next heartbeat leaves with epoch -1 (as Java's, whatever the static
        membership), after which the member is STALE: no heartbeats, every answer ignored, until the owner
        lost its tasks and calls `rejoin` at the thread's next poll. A reconciliation under way is abandoned."""
        if self.state not in IN_GROUP:
            raise RuntimeError(f"leave_stale() in state {self.state.name}")
        self.member_epoch = LEAVE_GROUP_EPOCH
        self._reset_assignment(keep_epoch=True)
        self._stale = True
        self._transition(MemberState.LEAVING)

    # -- heartbeats ---------------------------------------------------------------------------

    @property
    def urgent(self) -> bool:
        """Whether the next heartbeat should go now rather than after the heartbeat interval."""
        return self.state in (MemberState.JOINING, MemberState.ACKNOWLEDGING, MemberState.LEAVING) and not self._in_flight

    @property
    def can_heartbeat(self) -> bool:
        """Whether a heartbeat can go now (joined, not fenced, left or failed, none in flight)."""
        return not self._in_flight and self.state not in _SILENT

    def heartbeat_request(self) -> HeartbeatRequestData | None:
        """The next heartbeat, or None when there is nothing to send (not joined, left, fatal, one in flight)."""
        if not self.can_heartbeat:
            return None
        joining = self.state is MemberState.JOINING
        info = self.info
        tasks = None
        if self.state is not MemberState.LEAVING and (joining or self._sent_tasks != self.owned):
            tasks = self.owned
        self._in_flight = True
        self._sent_tasks = tasks if tasks is not None else self._sent_tasks
        request = HeartbeatRequestData(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            endpoint_information_epoch=self._endpoint_epoch,
            instance_id=info.instance_id if joining else None,
            rack_id=info.rack_id if joining else None,
            rebalance_timeout_ms=info.rebalance_timeout_ms if joining else -1,
            topology=info.topology if joining else None,
            tasks=tasks,
            process_id=info.process_id if joining else None,
            user_endpoint=info.user_endpoint if joining else None,
            client_tags=dict(info.client_tags) if joining else None,
            shutdown_application=self.shutdown_requested,
        )
        if self._stale and self.state is MemberState.LEAVING:  # sent once, as Java's: out of the group from now on
            self._stale = False
            self._stale_leave_in_flight = True
            self._transition(MemberState.STALE)
        return request

    def on_request_failed(self) -> None:
        """The heartbeat got no answer (connection lost, timeout): send the owned tasks again next time."""
        self._in_flight = self._stale_leave_in_flight = False
        self._sent_tasks = None

    def on_response(self, response: HeartbeatResponseData) -> None:
        """Apply one heartbeat answer (see the module doc for the rules)."""
        self._in_flight = False
        if self._stale_leave_in_flight or self.state is MemberState.STALE:
            self._stale_leave_in_flight = False
            return  # the answer to the leaving heartbeat: out of the group (or rejoining) since it was sent
        code = response.error_code
        if code:
            self._on_error(code, response.error_message)
            return
        if self.state is MemberState.LEAVING:
            self._transition(MemberState.LEFT)
            return
        if self.state in (MemberState.FENCED, MemberState.FATAL, MemberState.LEFT, MemberState.UNJOINED):
            return  # an answer to a request sent before the member left its previous state
        if response.member_epoch <= 0:
            raise ValueError(f"heartbeat answer with member epoch {response.member_epoch} while {self.state.name}")
        self.member_epoch = response.member_epoch
        self.heartbeat_interval_ms = response.heartbeat_interval_ms
        if response.status is not None and response.status != self.statuses:
            for status in set(response.status) - set(self.statuses):
                log.warning("streams group %r: %s", self.group_id, status)
            self.statuses = response.status
        if response.endpoints is not None:
            self.endpoints = response.endpoints
            self._endpoint_epoch = response.endpoint_information_epoch
        if self.state is MemberState.JOINING:
            self._transition(MemberState.STABLE)
        elif self.state is MemberState.ACKNOWLEDGING and self._sent_tasks == self.owned:
            self._transition(MemberState.STABLE)
        if response.tasks is not None:
            self._target = response.tasks
        self._maybe_reconcile()

    # -- internals ------------------------------------------------------------------------------

    def _maybe_reconcile(self) -> None:
        """Start a reconciliation when the target differs from what is owned and none is under way."""
        target = self._target
        if target is None or self.reconciliation is not None or self.state is not MemberState.STABLE:
            return
        if target == self.owned:
            self._target = None
            return
        self._target = None
        self.reconciliation = Reconciliation(self.member_epoch, self.owned.active - target.active, target)
        self._revoked = False
        self._transition(MemberState.RECONCILING)

    def _on_error(self, code: int, message: str | None) -> None:
        name = ERROR_NAMES.get(code, f"error {code}")
        if code in RETRIABLE_ERRORS:
            log.info("streams group %r: %s, heartbeat retried", self.group_id, name)
            self._sent_tasks = None  # the request was not applied: report the owned tasks again
            return
        if code in FENCING_ERRORS:
            if self.state is MemberState.LEAVING:
                self._transition(MemberState.LEFT)
                return
            log.warning(
                "streams group %r: member %s fenced (%s): its tasks are lost, it rejoins", self.group_id, self.member_id, name
            )
            self._transition(MemberState.FENCED)
            return
        self.fatal_error = StreamsGroupError(self.group_id, code, message)
        log.error("%s", self.fatal_error)
        self._transition(MemberState.FATAL)

    def _reset_assignment(self, *, keep_epoch: bool = False) -> None:
        if not keep_epoch:
            self.member_epoch = 0
        self.owned = TaskAssignment.EMPTY
        self.reconciliation = None
        self._target = None
        self._revoked = False
        self._sent_tasks = None

    def _abandoned(self, reconciliation: Reconciliation) -> bool:
        """Whether `reconciliation` no longer applies because the member left RECONCILING meanwhile
        (fenced, fatal, leaving); any other mismatch is the owner's mistake."""
        if self.state is not MemberState.RECONCILING:
            log.info("streams group %r: reconciliation of epoch %d abandoned (%s)", self.group_id, reconciliation.member_epoch, self.state.name)
            return True
        if reconciliation is not self.reconciliation:
            raise RuntimeError(f"not the reconciliation under way ({self.reconciliation}): {reconciliation}")
        return False

    def _transition(self, state: MemberState) -> None:
        if state is not self.state:
            log.info(
                "streams group %r member %s: %s -> %s (epoch %d)",
                self.group_id,
                self.member_id,
                self.state.name,
                state.name,
                self.member_epoch,
            )
            self.state = state
