"""compute_group_assignment: the leader's whole computation from encoded subscriptions."""

from __future__ import annotations

from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition as TP
from streams_core.runtime.assignment import (
    AssignmentConfigs,
    AssignmentInfo,
    AssignorError,
    HostInfo,
    SubscriptionInfo,
    compute_group_assignment,
)

SUBTOPOLOGIES = {0: {"left", "right"}, 1: {"repartition"}}
COUNTS = {"left": 4, "right": 4, "repartition": 2}


def subscriptions(**members: SubscriptionInfo) -> dict[str, bytes]:
    return {member: info.encode() for member, info in members.items()}


def test_two_processes_with_two_threads_each() -> None:
    subs = subscriptions(
        **{
            "a-1": SubscriptionInfo("pa", "a:1"),
            "a-2": SubscriptionInfo("pa", "a:1"),
            "b-1": SubscriptionInfo("pb", "b:2"),
            "b-2": SubscriptionInfo("pb", "b:2"),
        }
    )
    result = compute_group_assignment(
        subs, SUBTOPOLOGIES, COUNTS, copartition_groups=[{"left", "right"}],
        stateful_subtopologies={1}, configs=AssignmentConfigs(num_standby_replicas=1),
    )
    assert sorted(result) == ["a-1", "a-2", "b-1", "b-2"]
    all_partitions = [tp for m in result.values() for tp in m.partitions]
    expected = {TP(t, p) for t, n in COUNTS.items() for p in range(n)}
    assert sorted(all_partitions) == sorted(expected)  # each exactly once
    assert sorted(len(m.info.active_tasks) for m in result.values()) == [1, 1, 2, 2]
    for member in result.values():
        info = AssignmentInfo.decode(member.user_data)
        assert info == member.info
        assert set(info.partitions_by_host) == {HostInfo("a", 1), HostInfo("b", 2)}
        for task, partitions in info.active_tasks.items():
            assert {tp.partition for tp in partitions} == {task.partition}
    a_active = result["a-1"].info.active_tasks.keys() | result["a-2"].info.active_tasks.keys()
    a_standby = result["a-1"].info.standby_tasks.keys() | result["a-2"].info.standby_tasks.keys()
    b_active = result["b-1"].info.active_tasks.keys() | result["b-2"].info.active_tasks.keys()
    assert a_standby == {t for t in b_active if t.subtopology == 1}
    host_map = result["a-1"].info.partitions_by_host
    assert host_map[HostInfo("a", 1)] == frozenset().union(*(result[m].partitions for m in ("a-1", "a-2")))
    assert a_active.isdisjoint(a_standby)


def test_stickiness_through_encoded_subscriptions() -> None:
    first = compute_group_assignment(
        subscriptions(x=SubscriptionInfo("px"), y=SubscriptionInfo("py")), SUBTOPOLOGIES, COUNTS
    )
    again = compute_group_assignment(
        subscriptions(
            x=SubscriptionInfo("px", prev_active_tasks=frozenset(first["x"].info.active_tasks)),
            y=SubscriptionInfo("py", prev_active_tasks=frozenset(first["y"].info.active_tasks)),
        ),
        SUBTOPOLOGIES,
        COUNTS,
    )
    assert {m: a.partitions for m, a in again.items()} == {m: a.partitions for m, a in first.items()}


def test_copartitioning_failure_reaches_every_member() -> None:
    result = compute_group_assignment(
        subscriptions(x=SubscriptionInfo("px"), y=SubscriptionInfo("py")),
        SUBTOPOLOGIES,
        {"left": 4, "right": 3, "repartition": 2},
        copartition_groups=[{"left", "right"}],
    )
    for member in result.values():
        assert member.partitions == frozenset()
        assert member.info.error_code == AssignorError.COPARTITIONING_MISMATCH
        assert "left=4, right=3" in member.info.error_message


def test_missing_topic_and_future_version_fail_every_member() -> None:
    result = compute_group_assignment(subscriptions(x=SubscriptionInfo("px")), SUBTOPOLOGIES, {"left": 4})
    assert result["x"].info.error_code == AssignorError.INCOMPLETE_SOURCE_TOPIC_METADATA
    future = b"\x00\x00\x00\x09\x00\x00\x00\x09{}"
    result = compute_group_assignment({"x": SubscriptionInfo("px").encode(), "y": future}, SUBTOPOLOGIES, COUNTS)
    assert {m.info.error_code for m in result.values()} == {AssignorError.VERSION_PROBING}


def test_members_without_endpoint_are_not_in_the_host_map() -> None:
    result = compute_group_assignment(
        subscriptions(x=SubscriptionInfo("px", "x:1"), y=SubscriptionInfo("py")), SUBTOPOLOGIES, COUNTS
    )
    assert set(result["y"].info.partitions_by_host) == {HostInfo("x", 1)}
    assert TaskId(0, 0) in result["x"].info.active_tasks or TaskId(0, 0) in result["y"].info.active_tasks


def test_warmups_go_out_as_standbys_and_the_leaders_first_member_schedules_the_probing_rebalance() -> None:
    """KIP-441 through the wire: px ran every stateful task and is caught up; py is new, far behind."""
    stateful = [TaskId(1, 0), TaskId(1, 1)]
    ends = dict.fromkeys(stateful, 50_000)
    subs = subscriptions(
        **{
            "px-1": SubscriptionInfo("px", "x:1", frozenset(stateful), task_offset_sums=ends),
            "px-2": SubscriptionInfo("px", "x:1", task_offset_sums=ends),
            "py-1": SubscriptionInfo("py", "y:1"),
        }
    )
    result = compute_group_assignment(
        subs, SUBTOPOLOGIES, COUNTS, copartition_groups=[{"left", "right"}], stateful_subtopologies={1},
        configs=AssignmentConfigs(max_warmup_replicas=1), task_end_offset_sums=ends,
        probing_rebalance_at_ms=123_456, leader_process_id="px",
    )
    x_active = result["px-1"].info.active_tasks.keys() | result["px-2"].info.active_tasks.keys()
    assert set(stateful) <= x_active, "no stateful task moves to a client that is not caught up"
    assert len(result["py-1"].info.standby_tasks) == 1, "one warm-up (max.warmup.replicas=1), sent as a standby"
    assert HostInfo("y", 1) in result["px-1"].info.standby_partitions_by_host
    assert {m: a.info.next_scheduled_rebalance_ms for m, a in result.items()} == {"px-1": 123_456, "px-2": 0, "py-1": 0}
    assert {t.subtopology for t in result["py-1"].info.active_tasks} == {0}, "stateless tasks balance at once"


def test_no_probing_rebalance_when_everyone_is_caught_up() -> None:
    subs = subscriptions(x=SubscriptionInfo("px"), y=SubscriptionInfo("py"))
    result = compute_group_assignment(
        subs, SUBTOPOLOGIES, COUNTS, stateful_subtopologies={0, 1}, probing_rebalance_at_ms=1, leader_process_id="px"
    )
    assert all(a.info.next_scheduled_rebalance_ms == 0 for a in result.values())
