"""The group assignment of the runtime: subscription and assignment data, the partition grouper,
co-partitioning, the task assignor and the KIP-67 discovery values. Pure logic, no Kafka client."""

from streams_core.common.host_info import HostInfo
from streams_core.runtime.assignment.assignment_info import AssignmentInfo
from streams_core.runtime.assignment.copartitioning import ensure_copartitioning
from streams_core.runtime.assignment.errors import (
    AssignmentError,
    AssignorError,
    CopartitioningError,
    MissingSourceTopicError,
    ShutdownRequestedError,
    UnsupportedVersionError,
)
from streams_core.runtime.assignment.group_assignment import MemberAssignment, compute_group_assignment
from streams_core.runtime.assignment.partition_grouper import partition_groups
from streams_core.runtime.assignment.streams_metadata import KeyQueryMetadata, StreamsMetadata
from streams_core.runtime.assignment.streams_metadata_state import StreamPartitioner, StreamsMetadataState
from streams_core.runtime.assignment.subscription_info import SubscriptionInfo
from streams_core.runtime.assignment.task_assignor import (
    AssignmentConfigs,
    ClientAssignment,
    ClientState,
    TaskAssignment,
    assign_tasks,
    assign_tasks_to_members,
)

__all__ = [
    "AssignmentConfigs",
    "AssignmentError",
    "AssignmentInfo",
    "AssignorError",
    "ClientAssignment",
    "ClientState",
    "CopartitioningError",
    "HostInfo",
    "KeyQueryMetadata",
    "MemberAssignment",
    "MissingSourceTopicError",
    "ShutdownRequestedError",
    "StreamPartitioner",
    "StreamsMetadata",
    "StreamsMetadataState",
    "SubscriptionInfo",
    "TaskAssignment",
    "UnsupportedVersionError",
    "assign_tasks",
    "assign_tasks_to_members",
    "compute_group_assignment",
    "ensure_copartitioning",
    "partition_groups",
]
