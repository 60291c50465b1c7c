"""The nodes and state stores of a topology as they are added, with the checks made on adding.

Nodes are kept in the order they were added, which is a topological order because a parent must
be added before its children. Most mistakes raise `TopologyError` when the offending node is
added (duplicate names, unknown or sink parents, a topic read by two sources); what can only be
judged on the whole topology (a state store connected to no processor) raises in `validate()`,
which every build runs. Processors are united with their parents, and processors sharing a store
with each other, in a `QuickUnion`, from which `node_grouping.py` makes the sub-topologies.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from streams_core.config import StreamsConfig
from streams_core.errors import TopologyError
from streams_core.processor.internals.internal_topic_naming import InternalTopicNaming
from streams_core.processor.internals.node_factories import (
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
)
from streams_core.processor.stream_partitioner import StreamPartitioner
from streams_core.processor.timestamp_extractor import as_extract_function
from streams_core.processor.topic_name_extractor import TopicNameExtractor
from streams_core.serde import Serde

__all__ = ["NodeRegistry"]


class NodeRegistry(InternalTopicNaming):
    """The node factories, store factories, source topics and patterns, co-partitioned sources and build hooks."""

    def __init__(self) -> None:
        super().__init__()
        self._factories: dict[str, NodeFactory] = {}
        self._stores: dict[str, StateStoreFactory] = {}
        self._topic_to_source: dict[str, str] = {}
        self._pattern_to_source: dict[str, tuple[re.Pattern[str], str]] = {}
        self._grouper = QuickUnion()
        self._node_groups: dict[int, tuple[str, ...]] | None = None
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

    # -- what was added ------------------------------------------------------------------------

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(self._factories)

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

    def _connect_global(self, processor_name: str, store_name: str) -> None:
        factory = self._factories.get(processor_name)
        if not isinstance(factory, ProcessorNodeFactory):
            raise TopologyError(
                f"cannot connect global store {store_name!r} to {processor_name!r}: no such processor is added"
            )
        if store_name not in factory.store_names:
            factory.store_names.append(store_name)

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
