"""StreamsGroupMembership against the in-memory coordinator: KIP-1071's epoch and reconciliation rules."""

from __future__ import annotations

import pytest

from streams_core.clients.streams_group_fake_coordinator import FakeStreamsGroupCoordinator
from streams_core.clients.streams_group_membership import (
    MemberInfo,
    MemberState,
    StreamsGroupError,
    StreamsGroupMembership,
)
from streams_core.clients.streams_group_protocol import (
    HeartbeatResponseData,
    StatusCode,
    StreamsGroupTopology,
    Subtopology,
    TaskAssignment,
    TopicInfo,
)
from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition

TOPOLOGY = StreamsGroupTopology(
    0,
    (
        Subtopology("0", ("in",), repartition_sink_topics=("app-r",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("app-r"),), state_changelog_topics=(TopicInfo("app-c"),)),
    ),
)
ALL = frozenset(TaskId(s, p) for s in (0, 1) for p in range(3))


def member(name: str, port: int | None = None) -> StreamsGroupMembership:
    endpoint = HostInfo("localhost", port) if port else None
    return StreamsGroupMembership("app", f"member-{name}", MemberInfo(f"process-{name}", TOPOLOGY, endpoint, {"zone": name}))


def beat(coordinator: FakeStreamsGroupCoordinator, m: StreamsGroupMembership) -> None:
    data = m.heartbeat_request()
    if data is not None:
        m.on_response(coordinator.heartbeat(data))


def settle(coordinator: FakeStreamsGroupCoordinator, *members: StreamsGroupMembership, rounds: int = 20) -> None:
    """Heartbeat round by round, reconciling at once; no task is ever owned by two members."""
    for _ in range(rounds):
        for m in members:
            beat(coordinator, m)
            if m.reconciliation is not None:
                step = m.reconciliation
                m.revoked(step)
                m.assigned(step)
            owners = [t for x in members for t in x.owned.active]
            assert len(owners) == len(set(owners)), f"a task owned twice: {sorted(owners)}"


def state_of(m: StreamsGroupMembership) -> MemberState:
    """The state read afresh (mypy narrows an attribute across calls that change it)."""
    return m.state


def reply(**fields: object) -> HeartbeatResponseData:
    base: dict[str, object] = dict(
        error_code=0, error_message=None, member_id="member-a", member_epoch=1, heartbeat_interval_ms=5000,
        acceptable_recovery_lag=0, task_offset_interval_ms=0, status=None, tasks=None, endpoint_information_epoch=0,
        endpoints=None,
    )  # fmt: skip
    base.update(fields)
    return HeartbeatResponseData(**base)  # type: ignore[arg-type]


def test_joining_sends_the_member_and_its_topology_once() -> None:
    coordinator = FakeStreamsGroupCoordinator("app", {"in": 3})
    a = member("a", 8080)
    assert a.heartbeat_request() is None  # not joined
    a.join()
    assert a.urgent
    first = a.heartbeat_request()
    assert first is not None and first.member_epoch == 0
    assert first.topology == TOPOLOGY and first.process_id == "process-a"
    assert first.user_endpoint == HostInfo("localhost", 8080) and first.client_tags == {"zone": "a"}
    assert first.rebalance_timeout_ms == 300_000 and first.tasks == TaskAssignment()
    assert a.heartbeat_request() is None, "one heartbeat in flight at a time"
    a.on_response(coordinator.heartbeat(first))
    assert a.member_epoch == 1 and a.heartbeat_interval_ms == 5000
    assert a.state is MemberState.RECONCILING and a.reconciliation is not None
    assert a.reconciliation.assignment.active == ALL and not a.reconciliation.revoke
    a.assigned(a.reconciliation)
    ack = a.heartbeat_request()
    assert ack is not None and ack.topology is None and ack.process_id is None
    assert ack.tasks is not None and ack.tasks.active == ALL, "the next heartbeat acknowledges the tasks"
    a.on_response(coordinator.heartbeat(ack))
    assert state_of(a) is MemberState.STABLE
    steady = a.heartbeat_request()
    assert steady is not None and steady.tasks is None and steady.member_epoch == 1, "unchanged fields are null"


def test_a_second_member_gets_tasks_only_once_the_first_revoked_them() -> None:
    coordinator = FakeStreamsGroupCoordinator("app", {"in": 3})
    a, b = member("a", 8080), member("b", 8081)
    a.join()
    settle(coordinator, a)
    assert a.owned.active == ALL
    b.join()
    beat(coordinator, b)
    assert not b.owned.active and b.reconciliation is None, "nothing free yet: a still owns every task"
    beat(coordinator, a)
    step = a.reconciliation
    assert step is not None and len(step.revoke) == 3 and step.assignment.active == ALL - step.revoke
    with pytest.raises(RuntimeError, match="must be revoked before the new assignment"):
        a.assigned(step)
    a.revoked(step)
    assert a.owned.active == ALL - step.revoke
    a.assigned(step)
    settle(coordinator, a, b)
    assert a.state is MemberState.STABLE and b.state is MemberState.STABLE
    assert a.owned.active | b.owned.active == ALL and len(b.owned.active) == 3
    assert a.member_epoch == b.member_epoch == coordinator.assignment_epoch
    hosts = {e.endpoint: e.active for e in a.endpoints}
    assert hosts[HostInfo("localhost", 8081)] == {TopicPartition("in", t.partition) for t in b.owned.active if t.subtopology == 0}


def test_a_fenced_member_loses_its_tasks_and_rejoins_with_epoch_zero() -> None:
    coordinator = FakeStreamsGroupCoordinator("app", {"in": 3})
    a = member("a")
    a.join()
    settle(coordinator, a)
    coordinator.members["member-a"].epoch += 1  # the group moved on without it
    beat(coordinator, a)
    assert a.state is MemberState.FENCED and a.heartbeat_request() is None
    assert a.owned.active == ALL, "the owner reads the lost tasks before rejoining"
    a.rejoin()
    assert a.owned == TaskAssignment() and a.member_epoch == 0
    again = a.heartbeat_request()
    assert again is not None and again.member_epoch == 0 and again.topology == TOPOLOGY and again.member_id == "member-a"
    a.on_response(coordinator.heartbeat(again))
    settle(coordinator, a)
    assert a.owned.active == ALL and state_of(a) is MemberState.STABLE


def test_unknown_member_is_fenced_too() -> None:
    a = member("a")
    a.join()
    assert a.heartbeat_request() is not None
    a.on_response(reply(error_code=25, error_message="unknown"))
    assert a.state is MemberState.FENCED


@pytest.mark.parametrize(("static", "epoch"), [(False, -1), (True, -2)])
def test_leaving_sends_the_leave_epoch_and_the_tasks_move(static: bool, epoch: int) -> None:
    coordinator = FakeStreamsGroupCoordinator("app", {"in": 3})
    a, b = member("a"), member("b")
    a.join()
    b.join()
    settle(coordinator, a, b)
    assert b.owned.active
    b.leave(static=static)
    assert b.owned == TaskAssignment() and b.urgent
    bye = b.heartbeat_request()
    assert bye is not None and bye.member_epoch == epoch and bye.tasks is None
    b.on_response(coordinator.heartbeat(bye))
    assert b.state is MemberState.LEFT and b.heartbeat_request() is None
    settle(coordinator, a)
    assert a.owned.active == ALL


def test_a_stale_member_leaves_once_stays_silent_and_rejoins_with_epoch_zero() -> None:
    """The poll timer expired (`leave_stale`): one leaving heartbeat, then STALE, silent, until `rejoin`;
    the answer to the leave is ignored even when it comes after the rejoin."""
    coordinator = FakeStreamsGroupCoordinator("app", {"in": 3})
    a, b = member("a"), member("b")
    a.join()
    b.join()
    settle(coordinator, a, b)
    assert b.owned.active
    b.leave_stale()
    assert b.owned == TaskAssignment() and b.urgent and b.state is MemberState.LEAVING
    bye = b.heartbeat_request()
    assert bye is not None and bye.member_epoch == -1 and bye.tasks is None
    assert b.state is MemberState.STALE, "out of the group as soon as the leave is sent (Java's transitionToStale)"
    b.rejoin()  # the thread polled before the answer came
    assert b.state is MemberState.JOINING and b.member_epoch == 0 and b.heartbeat_request() is None, "one in flight"
    b.on_response(coordinator.heartbeat(bye))
    assert b.state is MemberState.JOINING and b.fatal_error is None, "the leave's answer (epoch -1) is ignored"
    settle(coordinator, a)
    assert a.owned.active == ALL, "the broker gave the stale member's tasks to the other"
    settle(coordinator, a, b)
    assert a.owned.active and b.owned.active and a.owned.active | b.owned.active == ALL
    with pytest.raises(RuntimeError, match="leave_stale"):
        member("c").leave_stale()


def test_leaving_before_joining_sends_nothing() -> None:
    a = member("a")
    a.leave()
    assert a.state is MemberState.LEFT and a.heartbeat_request() is None


def test_a_refused_topology_is_fatal_with_the_brokers_reason() -> None:
    coordinator = FakeStreamsGroupCoordinator("app", {"in": 3})
    a = member("a")
    a.join()
    settle(coordinator, a)
    other = StreamsGroupMembership("app", "member-x", MemberInfo("p", StreamsGroupTopology(0, (Subtopology("7", ("in",)),))))
    other.join()
    beat(coordinator, other)
    assert other.state is MemberState.FATAL and other.heartbeat_request() is None
    assert isinstance(other.fatal_error, StreamsGroupError)
    assert other.fatal_error.error_name == "STREAMS_INVALID_TOPOLOGY"
    assert "the topology differs" in str(other.fatal_error)


def test_coordinator_errors_and_lost_answers_resend_the_tasks() -> None:
    coordinator = FakeStreamsGroupCoordinator("app", {"in": 3})
    a = member("a")
    a.join()
    settle(coordinator, a)
    assert a.heartbeat_request() is not None
    a.on_response(reply(error_code=16, member_epoch=-1))  # NOT_COORDINATOR: the request was not applied
    assert a.state is MemberState.STABLE and a.member_epoch == 1
    data = a.heartbeat_request()
    assert data is not None and data.tasks is not None and data.tasks.active == ALL
    a.on_response(coordinator.heartbeat(data))
    data = a.heartbeat_request()
    assert data is not None and data.tasks is None
    a.on_request_failed()
    resent = a.heartbeat_request()
    assert resent is not None and resent.tasks is not None and resent.tasks.active == ALL


def test_missing_source_topics_are_a_status_not_an_error() -> None:
    coordinator = FakeStreamsGroupCoordinator("app", {})
    a = member("a")
    a.join()
    settle(coordinator, a)
    assert a.state is MemberState.STABLE and a.owned == TaskAssignment()
    (status,) = a.statuses
    assert status.code == StatusCode.MISSING_SOURCE_TOPICS and "in" in status.detail


def test_a_new_target_while_acknowledging_waits_for_the_acknowledgement() -> None:
    a = member("a")
    a.join()
    assert a.heartbeat_request() is not None
    a.on_response(reply(tasks=TaskAssignment(frozenset({TaskId(0, 0)}))))
    assert a.reconciliation is not None
    a.assigned(a.reconciliation)
    assert a.heartbeat_request() is not None
    a.on_response(reply(member_epoch=2, tasks=TaskAssignment(frozenset({TaskId(0, 1)}))))
    # the answer acknowledged {0_0}: the member is STABLE and may now start on the new target
    assert a.state is MemberState.RECONCILING and a.reconciliation is not None
    assert a.reconciliation.revoke == {TaskId(0, 0)} and a.reconciliation.member_epoch == 2


def test_a_shutdown_request_goes_with_every_heartbeat_and_every_member_hears_it() -> None:
    coordinator = FakeStreamsGroupCoordinator("app", {"in": 3})
    a, b = member("a"), member("b")
    a.join()
    b.join()
    settle(coordinator, a, b)
    assert not any(r.shutdown_application for r in coordinator.requests)
    a.request_shutdown()
    beat(coordinator, a)
    assert coordinator.requests[-1].shutdown_application
    beat(coordinator, b)
    assert [s.code for s in b.statuses] == [StatusCode.SHUTDOWN_APPLICATION], "the other member is told"
    assert "member-a encountered a fatal error" in b.statuses[0].detail
    a.leave()
    beat(coordinator, a)
    assert coordinator.requests[-1].member_epoch == -1 and coordinator.requests[-1].shutdown_application
    b.leave()
    beat(coordinator, b)
    assert coordinator.shutdown_requested_by is None, "forgotten once the group is empty"


def test_a_member_leaving_with_the_shutdown_flag_asks_the_others_to_shut_down() -> None:
    coordinator = FakeStreamsGroupCoordinator("app", {"in": 3})
    a, b = member("a"), member("b")
    a.join()
    b.join()
    settle(coordinator, a, b)
    a.request_shutdown()
    a.leave()
    beat(coordinator, a)
    beat(coordinator, b)
    assert [s.code for s in b.statuses] == [StatusCode.SHUTDOWN_APPLICATION]
