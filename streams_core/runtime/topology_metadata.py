"""TopologyMetadata: what the runtime needs to know about a topology, computed once at start.

Sub-topologies with their source topics, the co-partition groups, the stateful sub-topologies,
the changelog topics of logged stores (a source topic for a store that uses it as its changelog:
a read-only store, or a table's topic under `topology.optimization`), internal topics, and which source topics feed each store
(for KIP-67 key lookups). Co-partitioning rule: the topics of two or more source nodes that feed
one sub-topology must be co-partitioned (they are combined, e.g. joined, in one task); the
topics of a single source node (a merge) need not be.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from streams_core.common.task_id import TaskId
from streams_core.processor.internals.internal_topology_builder import InternalTopologyBuilder, TopicsInfo

__all__ = ["ChangelogSpec", "TopologyMetadata", "changelog_topic_name"]


def changelog_topic_name(application_id: str, store_name: str) -> str:
    """`<application.id>-<store>-changelog`, as Kafka Streams names it."""
    return f"{application_id}-{store_name}-changelog"


@dataclass(frozen=True, slots=True)
class ChangelogSpec:
    """A logged store's changelog topic and the topic configs its builder asks for."""

    store_name: str
    topic: str
    subtopology: int
    config: Mapping[str, str] = field(default_factory=dict)
    source_topic: bool = False
    """The topic is a source topic of the sub-topology (a read-only store, or a table's topic reused by
    `topology.optimization`): the user's topic, never created here."""


class TopologyMetadata:
    """The runtime's read-only view of one topology for one application id."""

    def __init__(self, builder: InternalTopologyBuilder, application_id: str) -> None:
        builder.validate()
        self.builder = builder
        self.application_id = application_id
        self.topic_groups: dict[int, TopicsInfo] = builder.topic_groups()
        self.global_topics: frozenset[str] = frozenset(builder.global_topics)
        self.global_store_names: frozenset[str] = frozenset(builder.global_state_store_names)
        self._patterns: dict[int, tuple[re.Pattern[str], ...]] = {
            sid: info.source_patterns for sid, info in self.topic_groups.items() if info.source_patterns
        }
        self.subtopologies: dict[int, frozenset[str]] = {
            sid: info.source_topics for sid, info in self.topic_groups.items()
        }
        self.stateful_subtopologies = frozenset(sid for sid, info in self.topic_groups.items() if info.state_stores)
        self.copartition_groups = self._copartition_groups()
        self.changelogs: dict[str, ChangelogSpec] = {}
        source_store_topics = builder.source_store_topics
        for sid, info in self.topic_groups.items():
            for store in info.state_stores:
                store_builder = builder.store_builder(store)
                if store in source_store_topics:
                    self.changelogs[store] = ChangelogSpec(store, source_store_topics[store], sid, {}, True)
                elif getattr(store_builder, "logging_enabled", False):
                    config = dict(getattr(store_builder, "log_config", dict)())
                    topic = changelog_topic_name(application_id, store)
                    self.changelogs[store] = ChangelogSpec(store, topic, sid, config)
        self.store_source_topics: dict[str, frozenset[str]] = {
            store: info.source_topics for info in self.topic_groups.values() for store in info.state_stores
        }
        self.internal_topics: frozenset[str] = frozenset(getattr(builder, "internal_topics", ()))

    @property
    def has_patterns(self) -> bool:
        """Whether some source subscribes by pattern (its topics are found in the cluster)."""
        return bool(self._patterns)

    def match_patterns(self, topics: Iterable[str]) -> frozenset[str]:
        """Add the cluster's topics that sources' patterns match; returns the ones new to the topology.

        Internal topics of this application and the broker's own (`__...`) never match.
        """
        prefix = f"{self.application_id}-"
        candidates = [t for t in topics if not t.startswith("__") and not t.startswith(prefix)]
        added: set[str] = set()
        for sid, patterns in self._patterns.items():
            matched = {t for t in candidates if any(p.fullmatch(t) for p in patterns)} - self.subtopologies[sid]
            if matched:
                self.subtopologies[sid] = self.subtopologies[sid] | matched
                for store in self.topic_groups[sid].state_stores:
                    self.store_source_topics[store] = self.subtopologies[sid]
                added |= matched
        return frozenset(added)

    @property
    def source_topics(self) -> frozenset[str]:
        return frozenset().union(*self.subtopologies.values()) if self.subtopologies else frozenset()

    @property
    def external_sink_topics(self) -> frozenset[str]:
        """Named sink topics the user must create (internal and changelog topics excluded)."""
        sinks = frozenset().union(*(info.sink_topics for info in self.topic_groups.values()))
        return sinks - self.internal_topics

    @property
    def external_source_topics(self) -> frozenset[str]:
        """Source topics the user must create (internal repartition topics excluded)."""
        return self.source_topics - self.internal_topics

    def _copartition_groups(self) -> list[frozenset[str]]:
        groups: list[frozenset[str]] = []
        explicit = getattr(self.builder, "copartition_groups", None)
        if callable(explicit):
            groups.extend(frozenset(g) for g in explicit())
        for info in self.topic_groups.values():
            by_source: dict[str | None, set[str]] = {}
            for topic in info.source_topics:
                by_source.setdefault(self.builder.source_for_topic(topic), set()).add(topic)
            if len(by_source) > 1 and frozenset(info.source_topics) not in groups:
                groups.append(frozenset(info.source_topics))
        return groups

    def num_tasks(self, subtopology: int, partition_counts: Mapping[str, int]) -> int:
        """Tasks of a sub-topology: the largest partition count among its source topics."""
        return max((partition_counts.get(t, 0) for t in self.subtopologies[subtopology]), default=0)

    @property
    def created_changelogs(self) -> list[ChangelogSpec]:
        """The changelog topics the application creates (`<application.id>-<store>-changelog`)."""
        return [spec for spec in self.changelogs.values() if not spec.source_topic]

    def stores_of(self, subtopology: int) -> tuple[str, ...]:
        return self.topic_groups[subtopology].state_stores

    def changelog_partitions(self, task: TaskId) -> dict[str, tuple[str, int]]:
        """store name -> (changelog topic, partition) for a task's logged stores."""
        return {
            store: (self.changelogs[store].topic, task.partition)
            for store in self.stores_of(task.subtopology)
            if store in self.changelogs
        }
