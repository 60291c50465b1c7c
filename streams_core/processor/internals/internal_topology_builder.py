"""InternalTopologyBuilder: the node factories behind `Topology`, its validation and sub-topologies.

Nodes are kept in the order they were added, which is a topological order because a parent must
be added before its children. Sub-topologies are the connected components of the graph when
processors are joined to their parents and processors sharing a state store are joined to each
other (union-find, as Java's QuickUnion); their ids follow the order in which each component's
first node was added, as in Kafka Streams, so they are stable for a given topology.

Most mistakes raise `TopologyError` when the offending node is added (duplicate names, unknown
or sink parents, a topic read by two sources); what can only be judged on the whole topology (a
state store connected to no processor) raises in `validate()`, which every build runs.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from streams_core.config import StreamsConfig
from streams_core.errors import TopologyError
from streams_core.processor.internals.processor_node import ProcessorNode, SinkNode, SourceNode
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.processor.stream_partitioner import StreamPartitioner
from streams_core.processor.timestamp_extractor import FailOnInvalidTimestamp, as_extract_function
from streams_core.processor.topic_name_extractor import TopicNameExtractor
from streams_core.processor.topology_description import (
    NodeDescription,
    ProcessorDescription,
    SinkDescription,
    SourceDescription,
    SubtopologyDescription,
    TopologyDescription,
    link,
)
from streams_core.serde import Serde

__all__ = ["InternalTopologyBuilder", "TopicsInfo"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TopicsInfo:
    """The topics and stores of one sub-topology: what the runtime subscribes to and creates."""

    source_topics: frozenset[str]
    source_patterns: tuple[re.Pattern[str], ...]
    sink_topics: frozenset[str]
    state_stores: tuple[str, ...]


@dataclass(eq=False)
class _SourceNodeFactory:
    name: str
    topics: tuple[str, ...]
    pattern: re.Pattern[str] | None
    key_serde: Serde[Any] | None
    value_serde: Serde[Any] | None
    timestamp_extractor: Any
    parents: tuple[str, ...] = ()

    def build(self, config: StreamsConfig) -> SourceNode:
        extractor = self.timestamp_extractor or config["default.timestamp.extractor"] or FailOnInvalidTimestamp()
        return SourceNode(
            self.name,
            self.topics,
            self.pattern,
            self.key_serde or config["default.key.serde"],
            self.value_serde or config["default.value.serde"],
            as_extract_function(extractor),
        )

    def describe(self) -> NodeDescription:
        return SourceDescription(self.name, self.topics, self.pattern)


@dataclass(eq=False)
class _ProcessorNodeFactory:
    name: str
    parents: tuple[str, ...]
    make_processor: Callable[[], Any]
    store_names: list[str] = field(default_factory=list)
    last_built: Any = None

    def build(self, config: StreamsConfig) -> ProcessorNode:
        processor = self.make_processor()
        if processor is None or (processor is self.last_built):
            raise TopologyError(
                f"processor {self.name!r}: its supplier returned "
                + ("None" if processor is None else "the same instance twice")
                + "; it must return a new Processor on every call (each task needs its own)"
            )
        self.last_built = processor
        return ProcessorNode(self.name, processor, frozenset(self.store_names))

    def describe(self) -> NodeDescription:
        return ProcessorDescription(self.name, self.store_names)


@dataclass(eq=False)
class _SinkNodeFactory:
    name: str
    parents: tuple[str, ...]
    topic: str | None
    topic_extractor: TopicNameExtractor | None
    key_serde: Serde[Any] | None
    value_serde: Serde[Any] | None
    partitioner: StreamPartitioner | None

    def build(self, config: StreamsConfig) -> SinkNode:
        return SinkNode(
            self.name,
            self.topic,
            self.topic_extractor,
            self.key_serde or config["default.key.serde"],
            self.value_serde or config["default.value.serde"],
            self.partitioner,
        )

    def describe(self) -> NodeDescription:
        return SinkDescription(self.name, self.topic, self.topic_extractor)


_NodeFactory = _SourceNodeFactory | _ProcessorNodeFactory | _SinkNodeFactory


@dataclass(eq=False)
class _StateStoreFactory:
    builder: Any
    users: list[str] = field(default_factory=list)


class _QuickUnion:
    """Union-find over node names; the root of a set is the name of its earliest member."""

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}
        self._order: dict[str, int] = {}

    def add(self, name: str) -> None:
        self._parent[name] = name
        self._order[name] = len(self._order)

    def root(self, name: str) -> str:
        parent = self._parent
        root = name
        while parent[root] != root:
            root = parent[root]
        while parent[name] != root:
            parent[name], name = root, parent[name]
        return root

    def unite(self, name: str, *others: str) -> None:
        for other in others:
            a, b = self.root(name), self.root(other)
            if a != b:
                first, second = (a, b) if self._order[a] < self._order[b] else (b, a)
                self._parent[second] = first


class InternalTopologyBuilder:
    """Collects node factories and store builders; builds per-task ProcessorTopology instances."""

    def __init__(self) -> None:
        self._factories: dict[str, _NodeFactory] = {}
        self._stores: dict[str, _StateStoreFactory] = {}
        self._topic_to_source: dict[str, str] = {}
        self._pattern_to_source: dict[str, tuple[re.Pattern[str], str]] = {}
        self._grouper = _QuickUnion()
        self._node_groups: dict[int, tuple[str, ...]] | None = None

    # -- adding nodes -------------------------------------------------------------------------

    def add_source(
        self,
        name: str,
        topics: Iterable[str] = (),
        pattern: str | re.Pattern[str] | None = None,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        timestamp_extractor: Any = None,
    ) -> None:
        self._check_new_name(name, "source")
        topics = tuple(topics)
        if not topics and pattern is None:
            raise TopologyError(f"source {name!r} needs at least one topic or a pattern")
        if topics and pattern is not None:
            raise TopologyError(f"source {name!r} takes topics or a pattern, not both")
        for topic in topics:
            if not isinstance(topic, str) or not topic:
                raise TopologyError(f"source {name!r}: topic names must be non-empty strings, got {topic!r}")
        if len(set(topics)) != len(topics):
            raise TopologyError(f"source {name!r} lists a topic more than once: {list(topics)}")
        compiled = self._compile_pattern(name, pattern) if pattern is not None else None
        for topic in topics:
            self._check_topic_free(name, topic)
        if compiled is not None:
            self._check_pattern_free(name, compiled)
        if timestamp_extractor is not None:
            try:
                as_extract_function(timestamp_extractor)
            except TypeError as exc:
                raise TopologyError(f"source {name!r}: {exc}") from None
        for topic in topics:
            self._topic_to_source[topic] = name
        if compiled is not None:
            self._pattern_to_source[compiled.pattern] = (compiled, name)
        self._add(_SourceNodeFactory(name, topics, compiled, key_serde, value_serde, timestamp_extractor))

    def add_processor(self, name: str, supplier: Any, parent_names: Iterable[str]) -> None:
        self._check_new_name(name, "processor")
        parents = self._check_parents(name, "processor", tuple(parent_names))
        self._add(_ProcessorNodeFactory(name, parents, _processor_factory(name, supplier)))
        self._grouper.unite(name, *parents)

    def add_sink(
        self,
        name: str,
        topic: str | TopicNameExtractor,
        parent_names: Iterable[str],
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        partitioner: StreamPartitioner | None = None,
    ) -> None:
        self._check_new_name(name, "sink")
        if isinstance(topic, str):
            if not topic:
                raise TopologyError(f"sink {name!r}: the topic name must not be empty")
            static, extractor = topic, None
        elif callable(topic):
            static, extractor = None, topic
        else:
            raise TopologyError(f"sink {name!r}: expected a topic name or a topic extractor, got {topic!r}")
        if partitioner is not None and not callable(partitioner):
            raise TopologyError(f"sink {name!r}: the partitioner must be callable, got {partitioner!r}")
        parents = self._check_parents(name, "sink", tuple(parent_names))
        self._add(_SinkNodeFactory(name, parents, static, extractor, key_serde, value_serde, partitioner))
        self._grouper.unite(name, *parents)

    def add_state_store(self, store_builder: Any, processor_names: Iterable[str] = ()) -> None:
        store_name = getattr(store_builder, "name", None)
        if not isinstance(store_name, str) or not store_name or not callable(getattr(store_builder, "build", None)):
            raise TopologyError(f"expected a StoreBuilder (with a name and build()), got {store_builder!r}")
        existing = self._stores.get(store_name)
        if existing is not None and existing.builder is not store_builder:
            raise TopologyError(f"a different state store named {store_name!r} is already added")
        if existing is None:
            self._stores[store_name] = _StateStoreFactory(store_builder)
        for processor_name in processor_names:
            self._connect(processor_name, store_name)
        self._node_groups = None

    def connect_processor_and_state_stores(self, processor_name: str, store_names: Iterable[str]) -> None:
        store_names = tuple(store_names)
        if not store_names:
            raise TopologyError(f"connecting processor {processor_name!r} needs at least one state store name")
        for store_name in store_names:
            self._connect(processor_name, store_name)
        self._node_groups = None

    # -- queries for the runtime and the test driver ------------------------------------------

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(self._factories)

    @property
    def source_topics(self) -> frozenset[str]:
        """Every topic named by a source (pattern subscriptions not included)."""
        return frozenset(self._topic_to_source)

    @property
    def source_patterns(self) -> tuple[re.Pattern[str], ...]:
        return tuple(compiled for compiled, _ in self._pattern_to_source.values())

    @property
    def state_store_names(self) -> tuple[str, ...]:
        return tuple(self._stores)

    def store_builder(self, store_name: str) -> Any:
        return self._stores[store_name].builder

    def source_for_topic(self, topic: str) -> str | None:
        """The name of the source that reads `topic` (exact name, else pattern), or None."""
        name = self._topic_to_source.get(topic)
        if name is not None:
            return name
        matches = [n for compiled, n in self._pattern_to_source.values() if compiled.fullmatch(topic)]
        if len(matches) > 1:
            raise TopologyError(f"topic {topic!r} matches the patterns of several sources: {matches}")
        return matches[0] if matches else None

    def subtopology_for_topic(self, topic: str) -> int | None:
        """The id of the sub-topology whose source reads `topic`, or None."""
        source = self.source_for_topic(topic)
        if source is None:
            return None
        for subtopology_id, names in self.node_groups().items():
            if source in names:
                return subtopology_id
        return None

    def node_groups(self) -> dict[int, tuple[str, ...]]:
        """Sub-topology id -> its node names in the order they were added."""
        if self._node_groups is None:
            by_root: dict[str, list[str]] = {}
            for name in self._factories:
                by_root.setdefault(self._grouper.root(name), []).append(name)
            self._node_groups = {i: tuple(names) for i, names in enumerate(by_root.values())}
        return self._node_groups

    def topic_groups(self) -> dict[int, TopicsInfo]:
        """Sub-topology id -> its source topics and patterns, sink topics and store names."""
        self.validate()
        groups: dict[int, TopicsInfo] = {}
        for subtopology_id, names in self.node_groups().items():
            factories = [self._factories[n] for n in names]
            sources = [f for f in factories if isinstance(f, _SourceNodeFactory)]
            groups[subtopology_id] = TopicsInfo(
                source_topics=frozenset(t for f in sources for t in f.topics),
                source_patterns=tuple(f.pattern for f in sources if f.pattern is not None),
                sink_topics=frozenset(
                    f.topic for f in factories if isinstance(f, _SinkNodeFactory) and f.topic is not None
                ),
                state_stores=_stores_of(factories),
            )
        return groups

    def validate(self) -> None:
        """Raise TopologyError for what is wrong with the topology as a whole."""
        dangling = [name for name, store in self._stores.items() if not store.users]
        if dangling:
            names = ", ".join(repr(n) for n in dangling)
            raise TopologyError(
                f"state store(s) {names} connected to no processor; pass the processor names to "
                "Topology.add_state_store(builder, *processor_names) or call "
                "Topology.connect_processor_and_state_stores(processor_name, *store_names)"
            )

    def build_subtopology(self, subtopology_id: int, config: StreamsConfig) -> ProcessorTopology:
        """New nodes, processors and (uninitialised) stores of one sub-topology, for one task."""
        self.validate()
        groups = self.node_groups()
        if subtopology_id not in groups:
            raise TopologyError(f"no sub-topology {subtopology_id}; the topology has {sorted(groups)}")
        nodes: dict[str, ProcessorNode] = {}
        stores: dict[str, Any] = {}
        for name in groups[subtopology_id]:
            factory = self._factories[name]
            node = factory.build(config)
            for parent in factory.parents:
                nodes[parent].add_child(node)
            if isinstance(factory, _ProcessorNodeFactory):
                for store_name in factory.store_names:
                    if store_name not in stores:
                        stores[store_name] = self._stores[store_name].builder.build()
            nodes[name] = node
        log.debug("Built sub-topology %d: nodes %s, stores %s", subtopology_id, list(nodes), list(stores))
        return ProcessorTopology(subtopology_id, tuple(nodes.values()), stores)

    def describe(self) -> TopologyDescription:
        subtopologies = []
        for subtopology_id, names in self.node_groups().items():
            described = {name: self._factories[name].describe() for name in names}
            link(described, {name: self._factories[name].parents for name in names})
            subtopologies.append(SubtopologyDescription(subtopology_id, described.values()))
        return TopologyDescription(subtopologies)

    # -- helpers -------------------------------------------------------------------------------

    def _add(self, factory: _NodeFactory) -> None:
        self._factories[factory.name] = factory
        self._grouper.add(factory.name)
        self._node_groups = None

    def _check_new_name(self, name: str, kind: str) -> None:
        if not isinstance(name, str) or not name:
            raise TopologyError(f"a {kind} needs a non-empty string name, got {name!r}")
        if name in self._factories:
            existing = _kind(self._factories[name])
            raise TopologyError(f"cannot add {kind} {name!r}: a {existing} named {name!r} is already added")

    def _check_parents(self, name: str, kind: str, parents: tuple[str, ...]) -> tuple[str, ...]:
        if not parents:
            raise TopologyError(f"{kind} {name!r} needs at least one parent")
        for parent in parents:
            if parent == name:
                raise TopologyError(f"{kind} {name!r} cannot be its own parent")
            factory = self._factories.get(parent)
            if factory is None:
                raise TopologyError(
                    f"{kind} {name!r} names unknown parent {parent!r} (add a parent before its children)"
                )
            if isinstance(factory, _SinkNodeFactory):
                raise TopologyError(f"sink {parent!r} cannot be a parent (of {kind} {name!r})")
        if len(set(parents)) != len(parents):
            raise TopologyError(f"{kind} {name!r} lists a parent more than once: {list(parents)}")
        return parents

    def _check_topic_free(self, name: str, topic: str) -> None:
        owner = self._topic_to_source.get(topic)
        if owner is not None:
            raise TopologyError(
                f"topic {topic!r} is already consumed by source {owner!r}; source {name!r} cannot also consume it"
            )
        for compiled, owner in self._pattern_to_source.values():
            if compiled.fullmatch(topic):
                raise TopologyError(
                    f"topic {topic!r} of source {name!r} matches pattern {compiled.pattern!r} "
                    f"already consumed by source {owner!r}"
                )

    def _check_pattern_free(self, name: str, compiled: re.Pattern[str]) -> None:
        same = self._pattern_to_source.get(compiled.pattern)
        if same is not None:
            raise TopologyError(
                f"pattern {compiled.pattern!r} is already consumed by source {same[1]!r}; "
                f"source {name!r} cannot also consume it"
            )
        for topic, owner in self._topic_to_source.items():
            if compiled.fullmatch(topic):
                raise TopologyError(
                    f"pattern {compiled.pattern!r} of source {name!r} matches topic {topic!r} "
                    f"already consumed by source {owner!r}"
                )

    @staticmethod
    def _compile_pattern(name: str, pattern: str | re.Pattern[str]) -> re.Pattern[str]:
        if isinstance(pattern, re.Pattern):
            return pattern
        if not isinstance(pattern, str) or not pattern:
            raise TopologyError(f"source {name!r}: expected a regular expression, got {pattern!r}")
        try:
            return re.compile(pattern)
        except re.error as exc:
            raise TopologyError(f"source {name!r}: invalid pattern {pattern!r}: {exc}") from exc

    def _connect(self, processor_name: str, store_name: str) -> None:
        store = self._stores.get(store_name)
        if store is None:
            raise TopologyError(
                f"cannot connect processor {processor_name!r} to state store {store_name!r}: "
                "no such store is added (add it with Topology.add_state_store)"
            )
        factory = self._factories.get(processor_name)
        if factory is None:
            raise TopologyError(
                f"cannot connect state store {store_name!r} to processor {processor_name!r}: no such processor is added"
            )
        if not isinstance(factory, _ProcessorNodeFactory):
            raise TopologyError(
                f"cannot connect state store {store_name!r} to {_kind(factory)} {processor_name!r}: "
                "only processors have state stores"
            )
        if store_name not in factory.store_names:
            factory.store_names.append(store_name)
        if processor_name not in store.users:
            if store.users:
                self._grouper.unite(store.users[0], processor_name)
            store.users.append(processor_name)


def _kind(factory: _NodeFactory) -> str:
    if isinstance(factory, _SourceNodeFactory):
        return "source"
    if isinstance(factory, _SinkNodeFactory):
        return "sink"
    return "processor"


def _stores_of(factories: list[_NodeFactory]) -> tuple[str, ...]:
    names: dict[str, None] = {}
    for factory in factories:
        if isinstance(factory, _ProcessorNodeFactory):
            names.update(dict.fromkeys(factory.store_names))
    return tuple(names)


def _processor_factory(name: str, supplier: Any) -> Callable[[], Any]:
    """A zero-argument callable making a new processor, from a class, a factory or a supplier."""
    if isinstance(supplier, type):
        return supplier
    get = getattr(supplier, "get", None)
    if callable(get):
        return get  # type: ignore[no-any-return]
    if callable(supplier):
        return supplier  # type: ignore[no-any-return]
    if callable(getattr(supplier, "process", None)):
        raise TopologyError(
            f"processor {name!r}: got a processor instance ({supplier!r}); pass its class or a zero-argument "
            "factory instead, so that every task gets its own processor"
        )
    raise TopologyError(
        f"processor {name!r}: expected a Processor class, a zero-argument factory or a supplier with get(), "
        f"got {supplier!r}"
    )
