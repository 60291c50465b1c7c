"""The task assignment a streams group member gets from the broker, in the classic assignor's form.

Under `group.protocol=streams` (KIP-1071) the broker assigns tasks by id and tells every member the
endpoint-to-partitions map; the thread's task manager and the instance's metadata state take an
`AssignmentInfo`, as the classic assignor's `on_assignment` gives them. This module makes one from
the other, so neither knows which protocol runs: a task's partitions are partition p of every source
(and repartition source) topic of its sub-topology, as Kafka Streams' `PartitionGrouper`; warm-up tasks
are standbys to the member (Java's client treats them alike); group statuses that stop the
application (missing or wrongly partitioned source topics, a shutdown another member asked for) become the assignment's error, which the
rebalance listener raises as the classic leader's error would be.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from streams_core.clients.streams_group_protocol import EndpointPartitions, GroupStatus, StatusCode, TaskAssignment
from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment.assignment_info import AssignmentInfo
from streams_core.runtime.assignment.errors import (
    AssignmentError,
    CopartitioningError,
    MissingSourceTopicError,
    ShutdownRequestedError,
)

__all__ = ["streams_group_assignment_info", "task_partitions"]


def task_partitions(subtopologies: Mapping[int, Iterable[str]], tasks: Iterable[TaskId]) -> dict[TaskId, frozenset[TopicPartition]]:
    """Each task's input partitions: its partition of every topic its sub-topology reads.

    A task of a sub-topology this topology does not have (another application's topology sharing
    the group would be refused by the broker first) raises `AssignmentError`."""
    out: dict[TaskId, frozenset[TopicPartition]] = {}
    for task in tasks:
        topics = subtopologies.get(task.subtopology)
        if topics is None:
            raise AssignmentError(f"the streams group assigned task {task} of an unknown sub-topology {task.subtopology}")
        out[task] = frozenset(TopicPartition(t, task.partition) for t in topics)
    return out


def _error(statuses: Sequence[GroupStatus]) -> AssignmentError | None:
    """The group status that keeps the application from running, as the classic leader's error."""
    for status in statuses:
        if status.code == StatusCode.MISSING_SOURCE_TOPICS:
            return MissingSourceTopicError(f"streams group: {status.detail}")
        if status.code == StatusCode.INCORRECTLY_PARTITIONED_TOPICS:
            return CopartitioningError(f"streams group: {status.detail}")
        if status.code == StatusCode.SHUTDOWN_APPLICATION:
            return ShutdownRequestedError(f"streams group: {status.detail}")
    return None


def streams_group_assignment_info(
    subtopologies: Mapping[int, Iterable[str]],
    tasks: TaskAssignment,
    endpoints: Sequence[EndpointPartitions],
    statuses: Sequence[GroupStatus] = (),
) -> AssignmentInfo:
    """The `AssignmentInfo` of a member the broker gave `tasks`, told `endpoints` and `statuses`."""
    error = _error(statuses)
    if error is not None:
        return AssignmentInfo.from_error(error)
    by_host: dict[HostInfo, frozenset[TopicPartition]] = {}
    standby_by_host: dict[HostInfo, frozenset[TopicPartition]] = {}
    for entry in endpoints:
        by_host[entry.endpoint] = by_host.get(entry.endpoint, frozenset()) | entry.active
        standby_by_host[entry.endpoint] = standby_by_host.get(entry.endpoint, frozenset()) | entry.standby
    return AssignmentInfo(
        active_tasks=task_partitions(subtopologies, tasks.active),
        standby_tasks=task_partitions(subtopologies, (tasks.standby | tasks.warmup) - tasks.active),
        partitions_by_host=by_host,
        standby_partitions_by_host={h: p for h, p in standby_by_host.items() if p},
    )
