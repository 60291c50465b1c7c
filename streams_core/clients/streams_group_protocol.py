"""Typed values of the streams group exchanges (KIP-1071) and their mapping to and from the wire schemas.

The runtime's names are kept: tasks are `TaskId`s (the broker's sub-topology ids are Kafka Streams'
numbers as strings, `"0"`, `"1"`...), endpoints are `HostInfo`s, partitions `TopicPartition`s. A `None`
field of a heartbeat means "unchanged since the last heartbeat", as on the wire.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from aiokafka.protocol.api import Response

from streams_core.clients.streams_group_messages import StreamsGroupDescribeRequest, StreamsGroupHeartbeatRequest
from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition

__all__ = [
    "LEAVE_GROUP_EPOCH",
    "LEAVE_GROUP_STATIC_EPOCH",
    "DescribedMember",
    "EndpointPartitions",
    "GroupStatus",
    "HeartbeatRequestData",
    "HeartbeatResponseData",
    "StatusCode",
    "StreamsGroupDescription",
    "StreamsGroupTopology",
    "Subtopology",
    "TaskAssignment",
    "TopicInfo",
    "decode_describe",
    "decode_heartbeat",
    "describe_request",
    "heartbeat_request",
]

#: The member epoch that leaves the group; -2 leaves as a static member that will come back.
LEAVE_GROUP_EPOCH = -1
LEAVE_GROUP_STATIC_EPOCH = -2


class StatusCode(enum.IntEnum):
    """Group-level conditions a heartbeat response reports (the `Status` codes of KIP-1071)."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5  # the initial rebalance delay or the assignment interval holds the assignment back


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """One active status of the group, with the broker's detail (e.g. the missing topics)."""

    code: int
    detail: str

    def __str__(self) -> str:
        try:
            name = StatusCode(self.code).name
        except ValueError:
            name = f"status {self.code}"
        return f"{name}: {self.detail}"


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic the broker creates: 0 partitions = computed by the broker, replication -1/0 = default."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Subtopology:
    """One sub-topology as the group knows it; co-partition groups name topics (indices only on the wire)."""

    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[tuple[str, ...], ...] = ()  # each group's topics in the order sent


@dataclass(frozen=True, slots=True)
class StreamsGroupTopology:
    """What a member sends when it joins (epoch 0); the broker checks every member sends the same."""

    epoch: int
    subtopologies: tuple[Subtopology, ...]


@dataclass(frozen=True, slots=True)
class TaskAssignment:
    """Active, standby and warm-up tasks of one member."""

    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()

    EMPTY: ClassVar[TaskAssignment]

    def __bool__(self) -> bool:
        return bool(self.active or self.standby or self.warmup)


TaskAssignment.EMPTY = TaskAssignment()


@dataclass(frozen=True, slots=True)
class HeartbeatRequestData:
    """One StreamsGroupHeartbeat; every optional field left None is "unchanged" (null on the wire)."""

    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: StreamsGroupTopology | None = None
    tasks: TaskAssignment | None = None
    process_id: str | None = None
    user_endpoint: HostInfo | None = None
    client_tags: Mapping[str, str] | None = None
    task_offsets: Mapping[TaskId, int] | None = None  # cumulative changelog offsets per task (not sent to 4.3)
    task_end_offsets: Mapping[TaskId, int] | None = None
    shutdown_application: bool = False


@dataclass(frozen=True, slots=True)
class EndpointPartitions:
    """The partitions an instance's endpoint hosts, for interactive queries."""

    endpoint: HostInfo
    active: frozenset[TopicPartition]
    standby: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class HeartbeatResponseData:
    """A decoded heartbeat answer; `tasks`, `status` and `endpoints` are None when unchanged."""

    error_code: int
    error_message: str | None
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    acceptable_recovery_lag: int
    task_offset_interval_ms: int
    status: tuple[GroupStatus, ...] | None
    tasks: TaskAssignment | None
    endpoint_information_epoch: int
    endpoints: tuple[EndpointPartitions, ...] | None


@dataclass(frozen=True, slots=True)
class DescribedMember:
    """One member as StreamsGroupDescribe shows it."""

    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topology_epoch: int
    process_id: str
    user_endpoint: HostInfo | None
    client_tags: Mapping[str, str]
    assignment: TaskAssignment
    target_assignment: TaskAssignment
    is_classic: bool


@dataclass(frozen=True, slots=True)
class StreamsGroupDescription:
    """A streams group as StreamsGroupDescribe shows it (`topology` None until initialized)."""

    group_id: str
    error_code: int
    error_message: str | None
    state: str
    group_epoch: int
    assignment_epoch: int
    topology: StreamsGroupTopology | None
    members: tuple[DescribedMember, ...]


# -- encoding -----------------------------------------------------------------------------------


def _key_values(values: Mapping[str, str]) -> list[tuple[str, str, dict[int, bytes]]]:
    return [(k, v, {}) for k, v in sorted(values.items())]


def _topic_infos(infos: Iterable[TopicInfo]) -> list[tuple[Any, ...]]:
    return [(t.name, t.partitions, t.replication_factor, _key_values(t.configs), {}) for t in infos]


def _task_ids(tasks: Iterable[TaskId]) -> list[tuple[str, list[int], dict[int, bytes]]]:
    by_subtopology: dict[int, list[int]] = {}
    for task in tasks:
        by_subtopology.setdefault(task.subtopology, []).append(task.partition)
    return [(str(sid), sorted(ps), {}) for sid, ps in sorted(by_subtopology.items())]


def _task_offsets(offsets: Mapping[TaskId, int] | None) -> list[tuple[str, int, int, dict[int, bytes]]] | None:
    """TaskOffset entries (sub-topology id, partition, offset), in task order; None stays null ("unchanged")."""
    if offsets is None:
        return None
    return [(str(task.subtopology), task.partition, offset, {}) for task, offset in sorted(offsets.items())]


def _copartition_group(group: tuple[str, ...], sub: Subtopology) -> tuple[Any, ...]:
    """A co-partition group as indices into the sub-topology's source and repartition source topics, in the
    group's order (the broker compares topologies list by list, in order)."""
    repartition = [t.name for t in sub.repartition_source_topics]
    unknown = set(group) - set(sub.source_topics) - set(repartition)
    if unknown:
        raise ValueError(
            f"co-partition group of sub-topology {sub.subtopology_id} names topics it does not read: {sorted(unknown)}"
        )
    sources = [sub.source_topics.index(t) for t in group if t in sub.source_topics]
    internal = [repartition.index(t) for t in group if t in repartition]
    return (sources, [], internal, {})


def _topology(topology: StreamsGroupTopology | None) -> tuple[Any, ...] | None:
    if topology is None:
        return None
    subs: list[tuple[Any, ...]] = [
        (
            s.subtopology_id,
            list(s.source_topics),
            list(s.source_topic_regex),
            _topic_infos(s.state_changelog_topics),
            list(s.repartition_sink_topics),
            _topic_infos(s.repartition_source_topics),
            [_copartition_group(g, s) for g in s.copartition_groups],
            {},
        )
        for s in topology.subtopologies
    ]
    return (topology.epoch, subs, {})


def heartbeat_request(data: HeartbeatRequestData) -> StreamsGroupHeartbeatRequest:
    """The aiokafka request for one heartbeat."""
    tasks = data.tasks
    endpoint: tuple[Any, ...] | None = (
        None if data.user_endpoint is None else (data.user_endpoint.host, data.user_endpoint.port, {})
    )
    return StreamsGroupHeartbeatRequest(
        (
            data.group_id,
            data.member_id,
            data.member_epoch,
            data.endpoint_information_epoch,
            data.instance_id,
            data.rack_id,
            data.rebalance_timeout_ms,
            _topology(data.topology),
            None if tasks is None else _task_ids(tasks.active),
            None if tasks is None else _task_ids(tasks.standby),
            None if tasks is None else _task_ids(tasks.warmup),
            data.process_id,
            endpoint,
            None if data.client_tags is None else _key_values(data.client_tags),
            _task_offsets(data.task_offsets),
            _task_offsets(data.task_end_offsets),
            data.shutdown_application,
            {},
        )
    )


def describe_request(group_ids: Sequence[str]) -> StreamsGroupDescribeRequest:
    return StreamsGroupDescribeRequest(group_ids)


# -- decoding -----------------------------------------------------------------------------------


def _tasks_of(entries: Sequence[Any] | None) -> frozenset[TaskId]:
    """TaskIds from wire `TaskIds` entries; a sub-topology id that is not a number is refused."""
    tasks: set[TaskId] = set()
    for subtopology_id, partitions, *_ in entries or ():
        if not str(subtopology_id).isdigit():
            raise ValueError(f"sub-topology id {subtopology_id!r} is not a Kafka Streams sub-topology number")
        tasks.update(TaskId(int(subtopology_id), p) for p in partitions)
    return frozenset(tasks)


def _decoded_topic_infos(entries: Sequence[Any] | None) -> tuple[TopicInfo, ...]:
    return tuple(
        TopicInfo(name, partitions, rf, {k: v for k, v, _ in configs or ()}) for name, partitions, rf, configs, _ in entries or ()
    )


def _partitions(entries: Sequence[Any] | None) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for topic, partitions, _ in entries or () for p in partitions)


def decode_heartbeat(response: Response) -> HeartbeatResponseData:
    """The typed view of a StreamsGroupHeartbeat response."""
    tasks: TaskAssignment | None = None
    if response.active_tasks is not None or response.standby_tasks is not None or response.warmup_tasks is not None:
        tasks = TaskAssignment(
            _tasks_of(response.active_tasks), _tasks_of(response.standby_tasks), _tasks_of(response.warmup_tasks)
        )
    status = None
    if response.status is not None:
        status = tuple(GroupStatus(code, detail) for code, detail, _ in response.status)
    endpoints = None
    if response.partitions_by_user_endpoint is not None:
        endpoints = tuple(
            EndpointPartitions(HostInfo(host, port), _partitions(active), _partitions(standby))
            for (host, port, _), active, standby, _ in response.partitions_by_user_endpoint
        )
    return HeartbeatResponseData(
        error_code=response.error_code,
        error_message=response.error_message,
        member_id=response.member_id,
        member_epoch=response.member_epoch,
        heartbeat_interval_ms=response.heartbeat_interval_ms,
        acceptable_recovery_lag=response.acceptable_recovery_lag,
        task_offset_interval_ms=response.task_offset_interval_ms,
        status=status,
        tasks=tasks,
        endpoint_information_epoch=response.endpoint_information_epoch,
        endpoints=endpoints,
    )


def _assignment(entry: Sequence[Any]) -> TaskAssignment:
    active, standby, warmup, _ = entry
    return TaskAssignment(_tasks_of(active), _tasks_of(standby), _tasks_of(warmup))


def _described_topology(entry: Sequence[Any] | None) -> StreamsGroupTopology | None:
    if entry is None:
        return None
    epoch, subtopologies, _ = entry
    return StreamsGroupTopology(
        epoch,
        tuple(
            Subtopology(
                subtopology_id=sid,
                source_topics=tuple(sources),
                repartition_sink_topics=tuple(sinks),
                state_changelog_topics=_decoded_topic_infos(changelogs),
                repartition_source_topics=_decoded_topic_infos(repartition),
            )
            for sid, sources, sinks, changelogs, repartition, _ in subtopologies or ()
        ),
    )


def decode_describe(response: Response) -> list[StreamsGroupDescription]:
    """The typed view of a StreamsGroupDescribe response: one description per group asked for."""
    groups = []
    for code, message, group_id, state, epoch, assignment_epoch, topology, members, _ops, _ in response.groups:
        described = tuple(
            DescribedMember(
                member_id=m[0],
                member_epoch=m[1],
                instance_id=m[2],
                rack_id=m[3],
                client_id=m[4],
                client_host=m[5],
                topology_epoch=m[6],
                process_id=m[7],
                user_endpoint=None if m[8] is None else HostInfo(m[8][0], m[8][1]),
                client_tags={k: v for k, v, _ in m[9] or ()},
                assignment=_assignment(m[12]),
                target_assignment=_assignment(m[13]),
                is_classic=m[14],
            )
            for m in members or ()
        )
        groups.append(
            StreamsGroupDescription(
                group_id, code, message, state, epoch, assignment_epoch, _described_topology(topology), described
            )
        )
    return groups
