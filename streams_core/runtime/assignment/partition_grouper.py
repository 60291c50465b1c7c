"""The default partition grouper: partition p of every source topic of a sub-topology is task p."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment.errors import MissingSourceTopicError

__all__ = ["partition_groups"]


def partition_groups(
    subtopologies: Mapping[int, Collection[str]],
    partition_counts: Mapping[str, int],
) -> dict[TaskId, frozenset[TopicPartition]]:
    """Tasks and their source partitions (Kafka's DefaultPartitionGrouper.partitionGroups).

    A sub-topology with source topics of n1..nk partitions has max(n) tasks; task (s, p) holds
    partition p of each of its source topics that has one (co-partitioned topics have all of
    them: check with `ensure_copartitioning` first). A source topic missing from
    `partition_counts` raises `MissingSourceTopicError` naming every such topic.
    """
    missing = sorted({t for topics in subtopologies.values() for t in topics if t not in partition_counts})
    if missing:
        raise MissingSourceTopicError.for_topics(missing)
    groups: dict[TaskId, frozenset[TopicPartition]] = {}
    for subtopology in sorted(subtopologies):
        topics = sorted(subtopologies[subtopology])
        for p in range(max((partition_counts[t] for t in topics), default=0)):
            groups[TaskId(subtopology, p)] = frozenset(
                TopicPartition(t, p) for t in topics if p < partition_counts[t]
            )
    return groups
