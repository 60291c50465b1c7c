"""InternalTopologyBuilder: the node factories behind `Topology`, its validation and sub-topologies.

Nodes are kept in the order they were added, which is a topological order because a parent must
be added before its children. Sub-topologies are the connected components of the graph when
processors are joined to their parents and processors sharing a state store are joined to each
other (union-find, as Java's QuickUnion); their ids follow the order in which each component's
first node was added, as in Kafka Streams, so they are stable for a given topology.

Most mistakes raise `TopologyError` when the offending node is added (duplicate names, unknown
or sink parents, a topic read by two sources); what can only be judged on the whole topology (a
state store connected to no processor) raises in `validate()`, which every build runs.

The DSL adds three things the Processor API does not need:

- internal topics (`add_internal_topic`): repartition topics whose real name is
  `<application.id>-<name>`, known only once the owner calls `set_application_id` (the test
  driver and KafkaStreams do); `describe()` shows the short names, as Java does, while
  `topic_groups()`, `source_topics`, `internal_topics` and built nodes use the full names;
- co-partition groups (`copartition_sources`, `copartition_groups`): the source topics of joins;
- global stores (`add_global_store`): a source and a processor outside every sub-topology that
  fill a store from a whole topic, readable by every processor connected to it;
  `build_global_subtopology` builds them, `describe()` shows them as Java does.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from streams_core.config import StreamsConfig
from streams_core.errors import TopologyError
from streams_core.processor.internals.internal_topic_partitions import internal_topic_partition_counts
from streams_core.processor.internals.node_factories import (
    Decorate,
    GlobalStoreDescription,
    NodeFactory,
    ProcessorNodeFactory,
    QuickUnion,
    SinkNodeFactory,
    SourceNodeFactory,
    StateStoreFactory,
    check_pattern_free,
    check_topic_free,
    compile_pattern,
    kind_of,
    processor_factory,
    same_topic,
    stores_of,
)
from streams_core.processor.internals.processor_node import ProcessorNode
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.processor.stream_partitioner import StreamPartitioner
from streams_core.processor.timestamp_extractor import as_extract_function
from streams_core.processor.topic_name_extractor import TopicNameExtractor
from streams_core.processor.topology_description import SubtopologyDescription, TopologyDescription, link
from streams_core.serde import Serde

__all__ = ["GlobalStoreDescription", "InternalTopologyBuilder", "TopicsInfo"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TopicsInfo:
    """The topics and stores of one sub-topology: what the runtime subscribes to and creates."""

    source_topics: frozenset[str]
    source_patterns: tuple[re.Pattern[str], ...]
    sink_topics: frozenset[str]
    state_stores: tuple[str, ...]


class InternalTopologyBuilder:
    """Collects node factories and store builders; builds per-task ProcessorTopology instances."""

    def __init__(self) -> None:
        self._factories: dict[str, NodeFactory] = {}
        self._stores: dict[str, StateStoreFactory] = {}
        self._topic_to_source: dict[str, str] = {}
        self._pattern_to_source: dict[str, tuple[re.Pattern[str], str]] = {}
        self._grouper = QuickUnion()
        self._node_groups: dict[int, tuple[str, ...]] | None = None
        self._internal_topics: dict[str, int | None] = {}
        self._application_id: str | None = None
        self._copartition_sources: list[tuple[str, ...]] = []
        self._global_stores: dict[str, StateStoreFactory] = {}
        self._global_nodes: dict[str, str] = {}
        self._build_hooks: list[Callable[[StreamsConfig], None]] = []
        self._source_store_topics: dict[str, str] = {}

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
        compiled = compile_pattern(name, pattern) if pattern is not None else None
        for topic in topics:
            check_topic_free(name, topic, self._topic_to_source, self._pattern_to_source)
        if compiled is not None:
            check_pattern_free(name, compiled, self._topic_to_source, self._pattern_to_source)
        if timestamp_extractor is not None:
            try:
                as_extract_function(timestamp_extractor)
            except TypeError as exc:
                raise TopologyError(f"source {name!r}: {exc}") from None
        for topic in topics:
            self._topic_to_source[topic] = name
        if compiled is not None:
            self._pattern_to_source[compiled.pattern] = (compiled, name)
        self._add(SourceNodeFactory(name, topics, compiled, key_serde, value_serde, timestamp_extractor))

    def add_processor(self, name: str, supplier: Any, parent_names: Iterable[str]) -> None:
        self._check_new_name(name, "processor")
        parents = self._check_parents(name, "processor", tuple(parent_names))
        self._add(ProcessorNodeFactory(name, parents, processor_factory(name, supplier)))
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
        self._add(SinkNodeFactory(name, parents, static, extractor, key_serde, value_serde, partitioner))
        self._grouper.unite(name, *parents)

    def add_state_store(self, store_builder: Any, processor_names: Iterable[str] = ()) -> None:
        store_name = getattr(store_builder, "name", None)
        if not isinstance(store_name, str) or not store_name or not callable(getattr(store_builder, "build", None)):
            raise TopologyError(f"expected a StoreBuilder (with a name and build()), got {store_builder!r}")
        existing = self._stores.get(store_name)
        if (existing is not None and existing.builder is not store_builder) or store_name in self._global_stores:
            raise TopologyError(f"a different state store named {store_name!r} is already added")
        if existing is None:
            self._stores[store_name] = StateStoreFactory(store_builder)
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

    def add_global_store(
        self,
        store_builder: Any,
        source_name: str,
        topic: str,
        processor_name: str,
        state_update_supplier: Any,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        timestamp_extractor: Any = None,
    ) -> None:
        """A global store: filled from the whole of `topic` by `state_update_supplier`'s processor.

        The source and processor form no sub-topology (they make no tasks); every instance reads
        all partitions of the topic. The topic is the store's changelog, so the store must have
        logging disabled. Any processor may read the store once connected to it.
        """
        store_name = getattr(store_builder, "name", None)
        if not isinstance(store_name, str) or not store_name or not callable(getattr(store_builder, "build", None)):
            raise TopologyError(f"expected a StoreBuilder (with a name and build()), got {store_builder!r}")
        if store_name in self._stores or store_name in self._global_stores:
            raise TopologyError(f"a state store named {store_name!r} is already added")
        if getattr(store_builder, "logging_enabled", False):
            raise TopologyError(
                f"global store {store_name!r} must have logging disabled (its topic {topic!r} is its changelog); "
                "call with_logging_disabled() on its builder"
            )
        if source_name == processor_name:
            raise TopologyError(f"global store {store_name!r}: the source and the processor need different names")
        self.add_source(source_name, (topic,), None, key_serde, value_serde, timestamp_extractor)
        self._check_new_name(processor_name, "processor")
        factory = ProcessorNodeFactory(
            processor_name, (source_name,), processor_factory(processor_name, state_update_supplier), [store_name]
        )
        self._add(factory)
        self._grouper.unite(processor_name, source_name)
        self._global_stores[store_name] = StateStoreFactory(store_builder, [processor_name])
        self._global_nodes[source_name] = store_name
        self._global_nodes[processor_name] = store_name

    def connect_source_store_and_topic(self, store_name: str, topic: str) -> None:
        """`topic`, read by a source of this topology, is the changelog of `store_name` (Java's method of that name)."""
        if store_name in self._source_store_topics:
            raise TopologyError(f"state store {store_name!r} already has source topic {self._source_store_topics[store_name]!r}")
        self._source_store_topics[store_name] = topic

    @property
    def source_store_topics(self) -> dict[str, str]:
        """Store name -> the source topic that is its changelog (read-only stores, reused table topics)."""
        return dict(self._source_store_topics)

    def add_internal_topic(self, topic: str, number_of_partitions: int | None = None) -> None:
        """Declare `topic` internal: its real name is `<application.id>-<topic>` (see `set_application_id`).

        `number_of_partitions` None means: as many as the sub-topology that writes it has tasks.
        """
        if not isinstance(topic, str) or not topic:
            raise TopologyError(f"an internal topic needs a non-empty name, got {topic!r}")
        count = number_of_partitions
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            raise TopologyError(f"internal topic {topic!r}: the number of partitions must be >= 1, got {count!r}")
        self._internal_topics[topic] = number_of_partitions

    def set_application_id(self, application_id: str) -> None:
        """Name internal topics `<application_id>-<name>`; the runtime and the test driver call it before building."""
        if not isinstance(application_id, str) or not application_id:
            raise TopologyError(f"the application id must be a non-empty string, got {application_id!r}")
        self._application_id = application_id

    @property
    def application_id(self) -> str | None:
        return self._application_id

    def copartition_sources(self, source_names: Iterable[str]) -> None:
        """The topics of these source nodes are joined: they must have equal partition counts."""
        names = tuple(dict.fromkeys(source_names))
        for name in names:
            if not isinstance(self._factories.get(name), SourceNodeFactory):
                raise TopologyError(f"cannot co-partition {name!r}: it is not a source node")
        if len(names) > 1:
            self._copartition_sources.append(names)

    def on_build(self, hook: Callable[[StreamsConfig], None]) -> None:
        """Call `hook(config)` before each sub-topology is built (the DSL binds its serdes there)."""
        self._build_hooks.append(hook)

    def apply_config(self, config: StreamsConfig) -> None:
        """Run the `on_build` hooks now: for owners that use store serdes before building any task."""
        for hook in self._build_hooks:
            hook(config)

    # -- queries for the runtime and the test driver ------------------------------------------

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(self._factories)

    @property
    def source_topics(self) -> frozenset[str]:
        """Every topic named by a source of a sub-topology (full names; no patterns, no global stores' topics)."""
        decorate = self._decorator()
        return frozenset(decorate(t) for t, source in self._topic_to_source.items() if source not in self._global_nodes)

    @property
    def source_patterns(self) -> tuple[re.Pattern[str], ...]:
        return tuple(compiled for compiled, _ in self._pattern_to_source.values())

    @property
    def internal_topics(self) -> frozenset[str]:
        """Full names of the internal (repartition) topics; the runtime creates them."""
        decorate = self._decorator()
        return frozenset(decorate(t) for t in self._internal_topics)

    @property
    def global_topics(self) -> frozenset[str]:
        """The topics that feed global stores."""
        return frozenset(t for t, source in self._topic_to_source.items() if source in self._global_nodes)

    @property
    def state_store_names(self) -> tuple[str, ...]:
        return tuple(self._stores)

    @property
    def global_state_store_names(self) -> tuple[str, ...]:
        return tuple(self._global_stores)

    def store_builder(self, store_name: str) -> Any:
        factory = self._stores.get(store_name) or self._global_stores.get(store_name)
        if factory is None:
            raise KeyError(store_name)
        return factory.builder

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
        """New nodes, processors and (uninitialised) stores of one sub-topology, for one task.

        Global stores connected to its processors are not built here: the owner provides them
        (a processor finds them through its task's state manager).
        """
        self.validate()
        groups = self.node_groups()
        if subtopology_id not in groups:
            raise TopologyError(f"no sub-topology {subtopology_id}; the topology has {sorted(groups)}")
        return self._build(subtopology_id, groups[subtopology_id], self._stores, config)

    def build_global_subtopology(self, config: StreamsConfig) -> ProcessorTopology | None:
        """The sources, processors and stores of every global store as one topology (None without any).

        Its id is the one `describe()` shows for the first global store.
        """
        if not self._global_stores:
            return None
        names = tuple(n for n in self._factories if n in self._global_nodes)
        return self._build(len(self.node_groups()), names, self._global_stores, config)

    def describe(self) -> TopologyDescription:
        subtopologies: list[Any] = []
        for subtopology_id, names in self.node_groups().items():
            described = {name: self._factories[name].describe() for name in names}
            link(described, {name: self._factories[name].parents for name in names})
            subtopologies.append(SubtopologyDescription(subtopology_id, described.values()))
        next_id = len(subtopologies)
        for store_name in self._global_stores:
            names = tuple(n for n, s in self._global_nodes.items() if s == store_name)
            described = {name: self._factories[name].describe() for name in names}
            link(described, {name: self._factories[name].parents for name in names})
            subtopologies.append(GlobalStoreDescription(next_id, tuple(described.values())))
            next_id += 1
        return TopologyDescription(subtopologies)

    def _build(
        self,
        subtopology_id: int,
        names: tuple[str, ...],
        store_factories: Mapping[str, StateStoreFactory],
        config: StreamsConfig,
    ) -> ProcessorTopology:
        self.apply_config(config)
        decorate = self._decorator()
        nodes: dict[str, ProcessorNode] = {}
        stores: dict[str, Any] = {}
        for name in names:
            factory = self._factories[name]
            node = factory.build(config, decorate)
            for parent in factory.parents:
                nodes[parent].add_child(node)
            if isinstance(factory, ProcessorNodeFactory):
                for store_name in factory.store_names:
                    if store_name not in stores and store_name in store_factories:
                        stores[store_name] = store_factories[store_name].builder.build()
            nodes[name] = node
        log.debug("Built sub-topology %d: nodes %s, stores %s", subtopology_id, list(nodes), list(stores))
        return ProcessorTopology(subtopology_id, tuple(nodes.values()), stores)

    def _decorator(self) -> Decorate:
        """The function giving a topic its full name; TopologyError while internal topics lack an application id."""
        if not self._internal_topics:
            return same_topic
        application_id = self._application_id
        if application_id is None:
            raise TopologyError(
                f"the topology has internal topics {sorted(self._internal_topics)}: call "
                "InternalTopologyBuilder.set_application_id(application_id) before building it"
            )
        internal = self._internal_topics

        def decorate(topic: str) -> str:
            return f"{application_id}-{topic}" if topic in internal else topic

        return decorate

    def _undecorate(self, topic: str) -> str:
        application_id = self._application_id
        if application_id is not None and topic.startswith(application_id + "-"):
            short = topic[len(application_id) + 1 :]
            if short in self._internal_topics:
                return short
        return topic

    def _connect_global(self, processor_name: str, store_name: str) -> None:
        factory = self._factories.get(processor_name)
        if not isinstance(factory, ProcessorNodeFactory):
            raise TopologyError(
                f"cannot connect global store {store_name!r} to {processor_name!r}: no such processor is added"
            )
        if store_name not in factory.store_names:
            factory.store_names.append(store_name)


    # -- rewriting: the DSL's `merge.repartition.topics` optimization -----------------------------

    def parents_of(self, name: str) -> tuple[str, ...]:
        return self._factories[name].parents

    def remove_nodes(self, names: Iterable[str]) -> None:
        """Drop nodes an optimization replaces (and the internal topics their sources read); `reorder` follows."""
        for name in names:
            factory = self._factories.pop(name)
            if isinstance(factory, SourceNodeFactory):
                for topic in factory.topics:
                    del self._topic_to_source[topic]
                    self._internal_topics.pop(topic, None)
        for store in self._stores.values():
            store.users[:] = [user for user in store.users if user in self._factories]
        self._node_groups = None

    def remove_state_store(self, store_name: str) -> None:
        """Drop a store an optimization made needless (`single.store.self.join`'s other-side store)."""
        del self._stores[store_name]
        self._node_groups = None

    def set_parents(self, name: str, parents: Iterable[str]) -> None:
        self._factories[name].parents = tuple(parents)
        self._node_groups = None

    def reorder(self, order: Iterable[str]) -> None:
        """Keep the nodes in `order` (every node, parents first), then regroup the sub-topologies."""
        self._factories = {name: self._factories[name] for name in order}
        self._regroup()

    def replace_copartition_source(self, old: str, new: str) -> None:
        """Java's `maybeUpdateCopartitionSourceGroups`: a replaced source's co-partition groups name its replacement."""
        self._copartition_sources = [
            tuple(dict.fromkeys(new if name == old else name for name in group)) for group in self._copartition_sources
        ]

    def _regroup(self) -> None:
        grouper = QuickUnion()
        for name in self._factories:
            grouper.add(name)
        for name, factory in self._factories.items():
            grouper.unite(name, *factory.parents)
        for store in self._stores.values():
            if store.users:
                grouper.unite(store.users[0], *store.users[1:])
        self._grouper = grouper
        self._node_groups = None

    # -- helpers -------------------------------------------------------------------------------

    def _add(self, factory: NodeFactory) -> None:
        self._factories[factory.name] = factory
        self._grouper.add(factory.name)
        self._node_groups = None

    def _check_new_name(self, name: str, kind: str) -> None:
        if not isinstance(name, str) or not name:
            raise TopologyError(f"a {kind} needs a non-empty string name, got {name!r}")
        if name in self._factories:
            existing = kind_of(self._factories[name])
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
            if isinstance(factory, SinkNodeFactory):
                raise TopologyError(f"sink {parent!r} cannot be a parent (of {kind} {name!r})")
        if len(set(parents)) != len(parents):
            raise TopologyError(f"{kind} {name!r} lists a parent more than once: {list(parents)}")
        return parents

    def _connect(self, processor_name: str, store_name: str) -> None:
        if store_name in self._global_stores and store_name not in self._stores:
            self._connect_global(processor_name, store_name)
            return
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
        if not isinstance(factory, ProcessorNodeFactory):
            raise TopologyError(
                f"cannot connect state store {store_name!r} to {kind_of(factory)} {processor_name!r}: "
                "only processors have state stores"
            )
        if store_name not in factory.store_names:
            factory.store_names.append(store_name)
        if processor_name not in store.users:
            if store.users:
                self._grouper.unite(store.users[0], processor_name)
            store.users.append(processor_name)


