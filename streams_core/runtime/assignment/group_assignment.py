"""The leader's whole assignment as a pure function: subscriptions in, member assignments out.

The runtime's aiokafka assignor decodes nothing itself: it passes each member's user data here
and returns, for every member, `partitions` and `user_data`. Errors (a future subscription
version, missing source topics, co-partitioning mismatch) do not raise: every member gets
the same AssignmentInfo carrying the error, so the whole group fails with one clear message.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping

from streams_core.clients.ports import MemberAssignment
from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment.assignment_info import AssignmentInfo
from streams_core.runtime.assignment.copartitioning import ensure_copartitioning
from streams_core.runtime.assignment.errors import AssignmentError, ShutdownRequestedError
from streams_core.runtime.assignment.partition_grouper import partition_groups
from streams_core.runtime.assignment.subscription_info import SubscriptionInfo
from streams_core.runtime.assignment.task_assignor import (
    AssignmentConfigs,
    ClientState,
    assign_tasks,
    assign_tasks_to_members,
)

__all__ = ["MemberAssignment", "compute_group_assignment"]


def compute_group_assignment(
    subscriptions: Mapping[str, bytes],
    subtopologies: Mapping[int, Collection[str]],
    partition_counts: Mapping[str, int],
    *,
    copartition_groups: Iterable[Collection[str]] = (),
    stateful_subtopologies: Collection[int] = (),
    configs: AssignmentConfigs | None = None,
    task_end_offset_sums: Mapping[TaskId, int] | None = None,
    probing_rebalance_at_ms: int = 0,
    leader_process_id: str = "",
) -> dict[str, MemberAssignment[AssignmentInfo]]:
    """Assign tasks to every member (by member id) from their encoded SubscriptionInfo.

    1. Decode subscriptions; group members into clients by process id.
    2. Check co-partitioning and build tasks with the default partition grouper.
    3. Assign tasks to clients (`assign_tasks`, with the changelog end-offset sums of the stateful
       tasks for their lags), then within each client to its members; warm-ups go out as standbys.
    4. Build the host maps from the clients' application.server and each member's info.
    5. When warm-ups are pending, the first member of the leader's process (`leader_process_id`,
       else the first process) is told to trigger a probing rebalance at `probing_rebalance_at_ms`.
    """
    try:
        decoded = {member: SubscriptionInfo.decode(data) for member, data in subscriptions.items()}
        requesters = sorted(decoded[m].process_id for m in decoded if decoded[m].shutdown_requested)
        if requesters:
            raise ShutdownRequestedError(f"instance {requesters[0]} asked the application to shut down")
        ensure_copartitioning(copartition_groups, partition_counts)
        task_partitions = partition_groups(subtopologies, partition_counts)
    except AssignmentError as error:
        failed = AssignmentInfo.from_error(error)
        return {member: MemberAssignment(frozenset(), failed) for member in sorted(subscriptions)}

    members_of: defaultdict[str, list[str]] = defaultdict(list)
    for member in sorted(decoded):
        members_of[decoded[member].process_id].append(member)
    clients = {process: _client_state([decoded[m] for m in members]) for process, members in members_of.items()}
    stateful_ids = frozenset(stateful_subtopologies)
    stateful = {t for t in task_partitions if t.subtopology in stateful_ids}
    result = assign_tasks(clients, task_partitions, stateful, configs or AssignmentConfigs(), task_end_offset_sums)
    by_client = result.clients

    by_member = {}
    for process, members in members_of.items():
        member_states = {
            m: ClientState(1, decoded[m].prev_active_tasks, decoded[m].standby_tasks) for m in members
        }
        by_member.update(assign_tasks_to_members(by_client[process], member_states))

    active_by_host: defaultdict[HostInfo, set[TopicPartition]] = defaultdict(set)
    standby_by_host: defaultdict[HostInfo, set[TopicPartition]] = defaultdict(set)
    for process, members in members_of.items():
        host = next((decoded[m].host_info for m in members if decoded[m].user_endpoint), None)
        if host is None:
            continue
        for task in by_client[process].active_tasks:
            active_by_host[host] |= task_partitions[task]
        for task in by_client[process].replica_tasks:
            standby_by_host[host] |= task_partitions[task]
    hosts = {h: frozenset(p) for h, p in sorted(active_by_host.items())}
    standby_hosts = {h: frozenset(p) for h, p in sorted(standby_by_host.items())}

    prober = ""
    if result.probing_rebalance_needed and probing_rebalance_at_ms > 0:
        process = leader_process_id if leader_process_id in members_of else min(members_of)
        prober = members_of[process][0]
    out = {}
    for member in sorted(decoded):
        tasks = by_member[member]
        info = AssignmentInfo(
            active_tasks=_partitions_of(tasks.active_tasks, task_partitions),
            standby_tasks=_partitions_of(tasks.replica_tasks, task_partitions),
            partitions_by_host=hosts,
            standby_partitions_by_host=standby_hosts,
            next_scheduled_rebalance_ms=probing_rebalance_at_ms if member == prober else 0,
        )
        out[member] = MemberAssignment(info.partitions(), info)
    return out


def _client_state(subscriptions: list[SubscriptionInfo]) -> ClientState:
    """One client from its members' subscriptions: capacity = members; tasks and sums merged."""
    offset_sums: dict[TaskId, int] = {}
    for sub in subscriptions:
        for task, offset_sum in sub.task_offset_sums.items():
            offset_sums[task] = max(offset_sum, offset_sums.get(task, offset_sum))
    return ClientState(
        capacity=len(subscriptions),
        prev_active_tasks=frozenset().union(*(s.prev_active_tasks for s in subscriptions)),
        prev_standby_tasks=frozenset().union(*(s.standby_tasks for s in subscriptions)),
        task_offset_sums=offset_sums,
    )


def _partitions_of(
    tasks: Iterable[TaskId], task_partitions: Mapping[TaskId, frozenset[TopicPartition]]
) -> dict[TaskId, frozenset[TopicPartition]]:
    return {task: task_partitions[task] for task in sorted(tasks)}
