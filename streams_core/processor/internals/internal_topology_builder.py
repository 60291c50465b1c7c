"""InternalTopologyBuilder: the node factories behind `Topology`, its sub-topologies, builds and description.

The builder is made in layers, one concept a module: internal topics' names
(`internal_topic_naming.py`), the nodes and stores as added with their checks
(`node_registry.py`), the sub-topologies with their topics and co-partition groups
(`node_grouping.py`); this module builds a sub-topology's nodes and stores for a task, describes
the topology, and rewrites it for the DSL's `merge.repartition.topics` optimization.

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
from collections.abc import Iterable, Mapping
from typing import Any

from streams_core.config import StreamsConfig
from streams_core.errors import TopologyError
from streams_core.processor.internals.node_factories import (
    GlobalStoreDescription,
    ProcessorNodeFactory,
    QuickUnion,
    SourceNodeFactory,
    StateStoreFactory,
)
from streams_core.processor.internals.node_grouping import NodeGrouping, TopicsInfo
from streams_core.processor.internals.processor_node import ProcessorNode
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.processor.topology_description import SubtopologyDescription, TopologyDescription, link

__all__ = ["GlobalStoreDescription", "InternalTopologyBuilder", "TopicsInfo"]

log = logging.getLogger(__name__)


class InternalTopologyBuilder(NodeGrouping):
    """Collects node factories and store builders; builds per-task ProcessorTopology instances."""

    # -- building and describing -----------------------------------------------------------------

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
