"""The topology a streams group member sends when it joins (KIP-1071), built from our TopologyMetadata.

As Kafka Streams builds it (`StreamThread`'s streams rebalance data): one entry per sub-topology (global
stores excluded), its id Kafka Streams' sub-topology number as a string; its source topics without the
repartition topics, which are listed apart with the partition count they were declared with (0 lets the
broker compute it); the repartition topics it writes; its logged stores' changelog topics (0 partitions:
one per task, the broker's rule); and the DSL's co-partition groups (the inputs of joins) that lie within
its sources. A store whose changelog is a source topic (a read-only store, KIP-813) has none to create.
Internal topics carry the replication factor and Kafka Streams' library defaults for their configs
(`InternalTopicConfig` and its subclasses; a store's own log config wins), since the broker creates them
and whichever member joins first decides them: a Java instance of the same application sends these.
"""

from __future__ import annotations

from collections.abc import Mapping

from streams_core.clients.streams_group_protocol import StreamsGroupTopology, Subtopology, TopicInfo
from streams_core.runtime.topology_metadata import TopologyMetadata

__all__ = ["streams_group_topology"]

#: Kafka Streams' defaults for every internal topic (`InternalTopicConfig.INTERNAL_TOPIC_DEFAULT_OVERRIDES`).
INTERNAL_TOPIC_CONFIG: Mapping[str, str] = {"message.timestamp.type": "CreateTime"}
#: Repartition topics (`RepartitionTopicConfig`): purged by the application, so kept forever, in 50 MB segments.
REPARTITION_TOPIC_CONFIG: Mapping[str, str] = {
    **INTERNAL_TOPIC_CONFIG,
    "cleanup.policy": "delete",
    "segment.bytes": "52428800",
    "retention.ms": "-1",
}
#: Changelogs of key-value stores (`UnwindowedUnversionedChangelogTopicConfig`).
CHANGELOG_TOPIC_CONFIG: Mapping[str, str] = {**INTERNAL_TOPIC_CONFIG, "cleanup.policy": "compact"}


def _declared_partition_counts(metadata: TopologyMetadata) -> dict[str, int]:
    """Full repartition topic name -> the partition count it was declared with (undeclared ones absent).

    The builder keeps them by short name (`_internal_topics`); there is no public accessor yet.
    """
    declared: Mapping[str, int | None] = getattr(metadata.builder, "_internal_topics", {})
    prefix = f"{metadata.application_id}-"
    return {f"{prefix}{name}": count for name, count in declared.items() if count is not None}


def streams_group_topology(metadata: TopologyMetadata, *, replication_factor: int = -1, epoch: int = 0) -> StreamsGroupTopology:
    """The heartbeat topology of `metadata` (`replication_factor`: the `replication.factor` config, -1 = broker default)."""
    internal = metadata.internal_topics
    repartition_sources = frozenset().union(*(info.source_topics & internal for info in metadata.topic_groups.values()))
    declared = _declared_partition_counts(metadata)
    copartition_groups = [frozenset(g) for g in metadata.builder.copartition_groups()]
    source_changelogs = metadata.builder.source_store_topics  # a source topic is their changelog: nothing to create
    subtopologies = []
    placed = 0
    for sid, info in sorted(metadata.topic_groups.items()):
        reads = info.source_topics
        groups = tuple(sorted((g for g in copartition_groups if g <= reads), key=sorted))
        placed += len(groups)
        changelogs = tuple(
            TopicInfo(spec.topic, 0, replication_factor, {**CHANGELOG_TOPIC_CONFIG, **spec.config})
            for store in info.state_stores
            if (spec := metadata.changelogs.get(store)) is not None and store not in source_changelogs
        )
        subtopologies.append(
            Subtopology(
                subtopology_id=str(sid),
                source_topics=tuple(sorted(reads - internal)),
                source_topic_regex=tuple(p.pattern for p in info.source_patterns),
                state_changelog_topics=changelogs,
                repartition_sink_topics=tuple(sorted(info.sink_topics & repartition_sources)),
                repartition_source_topics=tuple(
                    TopicInfo(t, declared.get(t, 0), replication_factor, dict(REPARTITION_TOPIC_CONFIG))
                    for t in sorted(reads & internal)
                ),
                copartition_groups=groups,
            )
        )
    if placed != len(copartition_groups):
        raise ValueError(f"co-partition groups {copartition_groups} do not each lie within one sub-topology's sources")
    return StreamsGroupTopology(epoch, tuple(subtopologies))
