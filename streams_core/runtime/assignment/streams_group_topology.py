"""The topology a streams group member sends when it joins (KIP-1071), built from our TopologyMetadata.

As Kafka Streams builds it (`StreamThread`'s streams rebalance data): one entry per sub-topology (global
stores excluded), its id Kafka Streams' sub-topology number as a string; its source topics without the
repartition topics, which are listed apart with the partition count they were declared with (0 lets the
broker compute it); the repartition topics it writes; its logged stores' changelog topics (0 partitions:
one per task, the broker's rule); and the DSL's co-partition groups (the inputs of joins) that lie within
its sources, in the order Java sends them (`streams_group_java_order.py`). A store whose changelog is a source topic
(a read-only store, KIP-813; a source table under `topology.optimization`) lists that topic among its changelogs, as
Java's `InternalTopologyBuilder` does: the broker creates none for it, and counts the task stateful (standbys).
Internal topics carry the replication factor and Kafka Streams' library defaults for their configs
(`InternalTopicConfig` and its subclasses; a store's own log config wins), since the broker creates them
and refuses a member whose topology differs in anything from the group's (4.3.1: INVALID_REQUEST,
"Topology updates are not supported yet"): a Java instance of the same application sends these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from streams_core.clients.streams_group_java_order import java_hash_set_order, java_set_hash_code, java_string_hash_code
from streams_core.clients.streams_group_protocol import StreamsGroupTopology, Subtopology, TopicInfo
from streams_core.runtime.assignment.internal_topic_config import (
    WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS,
    changelog_config,
    repartition_config,
)
from streams_core.runtime.topology_metadata import TopologyMetadata

__all__ = ["streams_group_topology"]


def _declared_partition_counts(metadata: TopologyMetadata) -> dict[str, int]:
    """Full repartition topic name -> the partition count it was declared with (undeclared ones absent).

    The builder keeps them by short name (`_internal_topics`); there is no public accessor yet.
    """
    declared: Mapping[str, int | None] = getattr(metadata.builder, "_internal_topics", {})
    prefix = f"{metadata.application_id}-"
    return {f"{prefix}{name}": count for name, count in declared.items() if count is not None}


def _joined_topics(metadata: TopologyMetadata) -> list[tuple[list[str], list[str]]]:
    """Per join (co-partitioned source nodes), its topics as Java adds them to a group: (raw names, full names).

    Java collects a join's topics into a `HashSet` of raw names, its source nodes themselves a `HashSet` of node
    names; that order decides between two topics of one hash bucket. The builder keeps the joins' source nodes
    privately (`_copartition_sources`); without them the groups' topics in name order stand in.
    """
    builder = metadata.builder
    sources: Sequence[tuple[str, ...]] | None = getattr(builder, "_copartition_sources", None)
    factories: Mapping[str, object] | None = getattr(builder, "_factories", None)
    if sources is None or factories is None:
        return [(sorted(g), sorted(g)) for g in builder.copartition_groups()]
    decorate = builder._decorator()  # the full name of an internal topic, as in copartition_groups()
    joined = []
    for names in sources:
        nodes = java_hash_set_order(list(names), java_string_hash_code)
        raw_names: list[str] = [t for node in nodes for t in getattr(factories[node], "topics", ())]
        raw = java_hash_set_order(raw_names, java_string_hash_code)
        joined.append((raw, [decorate(t) for t in raw]))
    return joined


def _java_copartition_groups(metadata: TopologyMetadata) -> list[tuple[str, ...]]:
    """The co-partition groups as Kafka Streams lists them (`InternalTopologyBuilder.copartitionGroups`): a join's
    topics merged into the group of the first of its (raw) topics already grouped, each group's topics and the
    groups in the iteration order of Java `HashSet`s (insertion order within a hash bucket)."""
    merged: dict[str, list[str]] = {}
    groups: list[list[str]] = []
    for raw, full in _joined_topics(metadata):
        target = next((merged[t] for t in raw if t in merged), None)
        if target is None:
            target = []
            groups.append(target)
        target.extend(t for t in full if t not in target)
        for topic in java_hash_set_order(target, java_string_hash_code):
            merged[topic] = target
    ordered = [tuple(java_hash_set_order(g, java_string_hash_code)) for g in groups]
    return java_hash_set_order(ordered, java_set_hash_code)


def _log_config(metadata: TopologyMetadata, store: str) -> Mapping[str, str]:
    """The store's log config (Java's `StoreFactory.logConfig()`, also for a source topic as changelog: empty when
    logging is disabled, as for a read-only store)."""
    spec = metadata.changelogs[store]
    if not spec.source_topic:
        return spec.config
    builder = metadata.builder.store_builder(store)
    return dict(getattr(builder, "log_config", dict)()) if getattr(builder, "logging_enabled", False) else {}


def streams_group_topology(
    metadata: TopologyMetadata,
    *,
    replication_factor: int = -1,
    epoch: int = 0,
    window_additional_retention_ms: int = WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS,
    topic_defaults: Mapping[str, str] = MappingProxyType({}),
) -> StreamsGroupTopology:
    """The heartbeat topology of `metadata` (`replication_factor`: the `replication.factor` config, -1 = broker default;
    `window_additional_retention_ms`: `windowstore.changelog.additional.retention.ms`; `topic_defaults`: the
    `topic.`-prefixed settings)."""
    internal = metadata.internal_topics
    repartition_sources = frozenset().union(*(info.source_topics & internal for info in metadata.topic_groups.values()))
    declared = _declared_partition_counts(metadata)
    copartition_groups = _java_copartition_groups(metadata)
    subtopologies = []
    placed = 0
    for sid, info in sorted(metadata.topic_groups.items()):
        reads = info.source_topics
        groups = tuple(java_hash_set_order([g for g in copartition_groups if reads.issuperset(g)], java_set_hash_code))
        placed += len(groups)
        changelogs = list(
            TopicInfo(
                spec.topic,
                0,
                replication_factor,
                changelog_config(
                    metadata.builder.store_builder(store),
                    _log_config(metadata, store),
                    window_additional_retention_ms,
                    topic_defaults,
                ),
            )
            for store in info.state_stores
            if (spec := metadata.changelogs.get(store)) is not None
        )
        changelogs.sort(key=lambda t: t.name)  # the broker compares topologies as sent, in order; Java sorts them
        subtopologies.append(
            Subtopology(
                subtopology_id=str(sid),
                source_topics=tuple(sorted(reads - internal)),
                source_topic_regex=tuple(p.pattern for p in info.source_patterns),
                state_changelog_topics=tuple(changelogs),
                repartition_sink_topics=tuple(sorted(info.sink_topics & repartition_sources)),
                repartition_source_topics=tuple(
                    TopicInfo(t, declared.get(t, 0), replication_factor, repartition_config(topic_defaults))
                    for t in sorted(reads & internal)
                ),
                copartition_groups=groups,
            )
        )
    if placed != len(copartition_groups):
        raise ValueError(f"co-partition groups {copartition_groups} do not each lie within one sub-topology's sources")
    return StreamsGroupTopology(epoch, tuple(subtopologies))
