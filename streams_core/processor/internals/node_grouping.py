"""Sub-topologies: the node groups of a topology, their topics (`TopicsInfo`) and co-partition groups.

Sub-topologies are the connected components of the graph when processors are joined to their
parents and processors sharing a state store are joined to each other (union-find, as Java's
QuickUnion); their ids follow the order in which each component's first node was added, as in
Kafka Streams, so they are stable for a given topology. Global stores' nodes belong to none.
Co-partition groups are the source topics of joins, which must have equal partition counts; from
them and the external topics' counts come the internal topics' partition counts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from streams_core.errors import TopologyError
from streams_core.processor.internals.internal_topic_partitions import internal_topic_partition_counts
from streams_core.processor.internals.node_factories import SinkNodeFactory, SourceNodeFactory, stores_of
from streams_core.processor.internals.node_registry import NodeRegistry

__all__ = ["NodeGrouping", "TopicsInfo"]


@dataclass(frozen=True, slots=True)
class TopicsInfo:
    """The topics and stores of one sub-topology: what the runtime subscribes to and creates."""

    source_topics: frozenset[str]
    source_patterns: tuple[re.Pattern[str], ...]
    sink_topics: frozenset[str]
    state_stores: tuple[str, ...]




class NodeGrouping(NodeRegistry):
    """Kafka Streams' nodeGroups, topicGroups and copartitionGroups over the nodes added so far."""

    @property
    def source_topics(self) -> frozenset[str]:
        """Every topic named by a source of a sub-topology (full names; no patterns, no global stores' topics)."""
        decorate = self._decorator()
        return frozenset(decorate(t) for t, source in self._topic_to_source.items() if source not in self._global_nodes)

    @property
    def source_patterns(self) -> tuple[re.Pattern[str], ...]:
        return tuple(compiled for compiled, _ in self._pattern_to_source.values())

    @property
    def global_topics(self) -> frozenset[str]:
        """The topics that feed global stores."""
        return frozenset(t for t, source in self._topic_to_source.items() if source in self._global_nodes)

    def source_for_topic(self, topic: str) -> str | None:
        """The name of the source that reads `topic` (exact or full internal name, else pattern), or None."""
        name = self._topic_to_source.get(self._undecorate(topic))
        if name is not None:
            return name
        matches = [n for compiled, n in self._pattern_to_source.values() if compiled.fullmatch(topic)]
        if len(matches) > 1:
            raise TopologyError(f"topic {topic!r} matches the patterns of several sources: {matches}")
        return matches[0] if matches else None

    def subtopology_for_topic(self, topic: str) -> int | None:
        """The id of the sub-topology whose source reads `topic`, or None (also for global topics)."""
        source = self.source_for_topic(topic)
        if source is None:
            return None
        for subtopology_id, names in self.node_groups().items():
            if source in names:
                return subtopology_id
        return None

    def node_groups(self) -> dict[int, tuple[str, ...]]:
        """Sub-topology id -> its node names in the order they were added (global stores' nodes excluded)."""
        if self._node_groups is None:
            by_root: dict[str, list[str]] = {}
            for name in self._factories:
                if name not in self._global_nodes:
                    by_root.setdefault(self._grouper.root(name), []).append(name)
            self._node_groups = {i: tuple(names) for i, names in enumerate(by_root.values())}
        return self._node_groups

    def topic_groups(self) -> dict[int, TopicsInfo]:
        """Sub-topology id -> its source topics and patterns, sink topics and store names (full topic names)."""
        self.validate()
        decorate = self._decorator()
        groups: dict[int, TopicsInfo] = {}
        for subtopology_id, names in self.node_groups().items():
            factories = [self._factories[n] for n in names]
            sources = [f for f in factories if isinstance(f, SourceNodeFactory)]
            groups[subtopology_id] = TopicsInfo(
                source_topics=frozenset(decorate(t) for f in sources for t in f.topics),
                source_patterns=tuple(f.pattern for f in sources if f.pattern is not None),
                sink_topics=frozenset(
                    decorate(f.topic) for f in factories if isinstance(f, SinkNodeFactory) and f.topic is not None
                ),
                state_stores=tuple(s for s in stores_of(factories) if s in self._stores),
            )
        return groups

    def copartition_groups(self) -> list[frozenset[str]]:
        """Groups of source topics (full names) that must have equal partition counts: the inputs of joins."""
        decorate = self._decorator()
        groups: list[frozenset[str]] = []
        for names in self._copartition_sources:
            topics = frozenset(decorate(t) for name in names for t in self._factories[name].topics)  # type: ignore[union-attr]
            if len(topics) > 1 and topics not in groups:
                groups.append(topics)
        return groups

    def internal_topic_partition_counts(self, partition_counts: Mapping[str, int]) -> dict[str, int]:
        """The partition count of every internal topic, from the counts of the external source topics.

        A repartition topic gets the count it was declared with, else the task count of the
        sub-topology that writes it (its largest source topic); then every co-partition group
        that holds internal topics gives them the count of its external topics (or the largest
        of its internal ones). Raises TopologyError for missing topics or mismatched groups.
        """
        groups = self.topic_groups()
        decorate = self._decorator()
        declared = {decorate(t): n for t, n in self._internal_topics.items()}
        writers = {
            sid: (info.source_topics, info.sink_topics & declared.keys()) for sid, info in groups.items()
        }
        return internal_topic_partition_counts(declared, writers, self.copartition_groups(), partition_counts)
