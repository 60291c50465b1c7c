"""Co-partitioning: topics joined in one task must have equal partition counts (KIP-28)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from streams_core.runtime.assignment.errors import CopartitioningError, MissingSourceTopicError

__all__ = ["ensure_copartitioning"]


def ensure_copartitioning(
    copartition_groups: Iterable[Collection[str]],
    partition_counts: Mapping[str, int],
    repartition_topics: Collection[str] = frozenset(),
) -> dict[str, int]:
    """Check every group of co-partitioned topics; return the partition count each internal
    repartition topic of a group must have (Kafka's CopartitionedTopicsEnforcer).

    In a group, the topics that are not repartition topics must exist and agree on their count
    (else `MissingSourceTopicError` / `CopartitioningError` naming the topics and counts); the
    group's repartition topics take that count, or, in a group made only of repartition topics,
    the largest count known for any of them. A repartition topic that already exists with
    another count is a mismatch too. Call it before creating internal topics, and again with
    the cluster's counts when assigning.
    """
    repartition = frozenset(repartition_topics)
    required: dict[str, int] = {}
    for group in copartition_groups:
        external = sorted(t for t in group if t not in repartition)
        internal = sorted(t for t in group if t in repartition)
        missing = [t for t in external if t not in partition_counts]
        if missing:
            raise MissingSourceTopicError.for_topics(missing)
        counts = {t: partition_counts[t] for t in external}
        if len(set(counts.values())) > 1:
            raise CopartitioningError.for_counts(counts)
        if counts:
            target = next(iter(counts.values()))
        else:
            known = [partition_counts[t] for t in internal if t in partition_counts]
            known += [required[t] for t in internal if t in required]
            if not known:
                continue
            target = max(known)
        for topic in internal:
            current = required.get(topic, partition_counts.get(topic))
            if counts and current is not None and current != target:
                raise CopartitioningError.for_counts(counts | {topic: current})
            required[topic] = target
    return required
