"""ThreadMetadata and TaskMetadata: what `KafkaStreams.metadata_for_local_threads()` tells of each stream thread.

As Kafka Streams' `ThreadMetadata` / `TaskMetadata` (KIP-663, KIP-744): a snapshot taken when
asked, not a live view. Two `TaskMetadata` are equal when their task id and partitions are; two
`ThreadMetadata` when every field is, so a set of them compares as Kafka's does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streams_core import clients
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig

__all__ = ["TaskMetadata", "ThreadMetadata", "thread_metadata"]


@dataclass(frozen=True, slots=True)
class TaskMetadata:
    """One task of a stream thread: its id, source partitions, committed and end offsets, idling."""

    task_id: TaskId
    topic_partitions: frozenset[TopicPartition]
    committed_offsets: Mapping[TopicPartition, int] = field(default_factory=dict, compare=False)
    """The next offset to read per source partition as of the task's last commit (empty for a standby)."""
    end_offsets: Mapping[TopicPartition, int] = field(default_factory=dict, compare=False)
    """The high watermark per source partition as the consumer last saw it (empty for a standby)."""
    time_current_idling_started: int | None = field(default=None, compare=False)
    """Wall-clock ms when the task started waiting for an empty partition (`max.task.idle.ms`); None if not."""


@dataclass(frozen=True, slots=True)
class ThreadMetadata:
    """One stream thread: name, state, tasks and the client ids of its Kafka clients."""

    thread_name: str
    thread_state: str
    consumer_client_id: str
    restore_consumer_client_id: str
    producer_client_ids: frozenset[str]
    admin_client_id: str
    active_tasks: frozenset[TaskMetadata]
    standby_tasks: frozenset[TaskMetadata]


def thread_metadata(
    config: StreamsConfig,
    index: int,
    name: str,
    state: str,
    active: frozenset[TaskMetadata] = frozenset(),
    standby: frozenset[TaskMetadata] = frozenset(),
) -> ThreadMetadata:
    """The metadata of stream thread `index`, with the client ids Kafka Streams gives its clients."""
    return ThreadMetadata(
        thread_name=name,
        thread_state=state,
        consumer_client_id=clients.default_client_id(config, "main.consumer", index),
        restore_consumer_client_id=clients.default_client_id(config, "restore.consumer", index),
        producer_client_ids=frozenset({clients.default_client_id(config, "producer", index)}),
        admin_client_id=clients.default_client_id(config, "admin"),
        active_tasks=active,
        standby_tasks=standby,
    )
