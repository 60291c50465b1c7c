"""How many partitions each internal (repartition) topic needs, as Kafka Streams computes it.

A repartition topic declared without a count gets the task count of the sub-topology that
writes it, which is the largest partition count among that sub-topology's source topics; those
may themselves be repartition topics, so counts are resolved in rounds until none changes.
When a round makes no progress (topics that feed each other, as a foreign-key join's
subscription and response topics), a topic takes the largest count among the sources that are
known, as Java's RepartitionTopics does.
Then every co-partition group holding internal topics imposes one count on them: the count of
its external topics (which must agree), or else the largest count among its internal ones.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from streams_core.errors import TopologyError

__all__ = ["internal_topic_partition_counts"]


def internal_topic_partition_counts(
    declared: Mapping[str, int | None],
    writers: Mapping[int, tuple[Collection[str], Collection[str]]],
    copartition_groups: Collection[Collection[str]],
    partition_counts: Mapping[str, int],
) -> dict[str, int]:
    """Partition count per internal topic.

    `declared`: internal topic -> declared count or None; `writers`: sub-topology id ->
    (its source topics, the internal topics it writes); `partition_counts`: the counts of the
    external source topics. TopologyError names the topics when counts cannot be found or a
    co-partition group disagrees.
    """
    counts = {topic: n for topic, n in declared.items() if n is not None}
    pending = [topic for topic, n in declared.items() if n is None]
    relaxed = False
    while pending:
        progressed = False
        for topic in list(pending):
            found: list[int] = []
            complete = True
            for sources, sinks in writers.values():
                if topic not in sinks:
                    continue
                for source in sources:
                    count = counts.get(source) if source in declared else partition_counts.get(source)
                    if count is None:
                        complete = False
                    else:
                        found.append(count)
            if (complete or relaxed) and found:
                counts[topic] = max(found)
                pending.remove(topic)
                progressed = True
        if progressed:
            relaxed = False
            continue
        if not relaxed:
            relaxed = True
            continue
        if not progressed:
            missing = sorted(
                {s for sources, sinks in writers.values() if set(sinks) & set(pending) for s in sources}
                - declared.keys()
                - partition_counts.keys()
            )
            raise TopologyError(
                f"cannot size internal topics {sorted(pending)}: "
                + (
                    f"source topics {missing} have no known partition count"
                    if missing
                    else "no sub-topology writes them"
                )
            )
    for group in copartition_groups:
        internal = sorted(t for t in group if t in declared)
        external = {t: partition_counts[t] for t in group if t not in declared and t in partition_counts}
        absent = sorted(t for t in group if t not in declared and t not in partition_counts)
        if absent:
            raise TopologyError(f"co-partitioned source topics {absent} have no known partition count")
        if len(set(external.values())) > 1:
            raise TopologyError(
                "topics joined together must have the same number of partitions: "
                + ", ".join(f"{t} ({n})" for t, n in sorted(external.items()))
            )
        if not internal:
            continue
        target = next(iter(external.values())) if external else max(counts[t] for t in internal)
        for topic in internal:
            if declared[topic] is not None and declared[topic] != target:
                raise TopologyError(
                    f"repartition topic {topic!r} is declared with {declared[topic]} partitions but is joined "
                    f"with topics of {target} partitions: " + ", ".join(sorted(group))
                )
            counts[topic] = target
    return counts
