"""TopologyDescription: what `Topology.describe()` returns, printing like Kafka Streams' own.

Sub-topologies in id order; in each, nodes sorted as Java sorts them (larger downstream
sub-graph first, then by name), each with its topics or stores and its links:

    Topologies:
       Sub-topology: 0
        Source: SOURCE (topics: [input])
          --> PROCESS
        Processor: PROCESS (stores: [sums])
          --> SINK
          <-- SOURCE
        Sink: SINK (topic: output)
          <-- PROCESS

The text matches Java's byte for byte (including the extra space before the first
"Sub-topology"), so tools that read Kafka Streams descriptions read ours.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cmp_to_key
from typing import Any

from streams_core.processor.internals.java_collections import JavaTreeSet, java_hash_set_order

__all__ = [
    "NodeDescription",
    "ProcessorDescription",
    "SinkDescription",
    "SourceDescription",
    "SubtopologyDescription",
    "TopologyDescription",
]


class NodeDescription:
    """A node's name and its links; `predecessors` and `successors` are in Java's print order."""

    __slots__ = ("name", "predecessors", "size", "successors")

    def __init__(self, name: str) -> None:
        self.name = name
        self.predecessors: tuple[NodeDescription, ...] = ()
        self.successors: tuple[NodeDescription, ...] = ()
        self.size = 1

    def _links(self) -> str:
        lines = ""
        if not isinstance(self, SinkDescription):
            lines += "\n      --> " + _names(self.successors)
        if not isinstance(self, SourceDescription):
            lines += "\n      <-- " + _names(self.predecessors)
        return lines

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class SourceDescription(NodeDescription):
    """A source: the topics it reads, or the pattern it subscribes with."""

    __slots__ = ("topic_pattern", "topics")

    def __init__(self, name: str, topics: Iterable[str], topic_pattern: re.Pattern[str] | None) -> None:
        super().__init__(name)
        self.topics = frozenset(topics)
        self.topic_pattern = topic_pattern

    def __str__(self) -> str:
        shown = self.topic_pattern.pattern if self.topic_pattern is not None else _set(self.topics)
        return f"Source: {self.name} (topics: {shown}){self._links()}"


class ProcessorDescription(NodeDescription):
    """A processor and the names of the state stores connected to it."""

    __slots__ = ("_connected", "stores")

    def __init__(self, name: str, stores: Iterable[str]) -> None:
        super().__init__(name)
        self._connected = tuple(dict.fromkeys(stores))  # connection order: Java's HashSet breaks bucket ties so
        self.stores = frozenset(self._connected)

    def __str__(self) -> str:
        return f"Processor: {self.name} (stores: {_set(self._connected)}){self._links()}"


class SinkDescription(NodeDescription):
    """A sink: its topic, or the extractor that picks a topic per record."""

    __slots__ = ("topic", "topic_extractor")

    def __init__(self, name: str, topic: str | None, topic_extractor: Any = None) -> None:
        super().__init__(name)
        self.topic = topic
        self.topic_extractor = topic_extractor

    def __str__(self) -> str:
        if self.topic is not None:
            return f"Sink: {self.name} (topic: {self.topic}){self._links()}"
        return f"Sink: {self.name} (extractor class: {extractor_text(self.topic_extractor)}){self._links()}"


def extractor_text(extractor: Any) -> str:
    """How a sink's topic extractor prints: its `str()` when its class defines one (Java prints the
    extractor's `toString()`), else its qualified name (a function's or a class's default `str()`
    holds a memory address, which would make descriptions differ from run to run)."""
    kind: Any = type(extractor)
    if kind.__str__ is not object.__str__ or kind.__repr__ not in (object.__repr__, _FUNCTION_REPR):
        return str(extractor)
    return str(getattr(extractor, "__qualname__", None) or kind.__qualname__)


_FUNCTION_REPR = type(extractor_text).__repr__


class SubtopologyDescription:
    """One sub-topology: its id (the first part of its task ids) and its nodes in print order."""

    __slots__ = ("id", "nodes")

    def __init__(self, subtopology_id: int, nodes: Iterable[NodeDescription]) -> None:
        self.id = subtopology_id
        self.nodes = tuple(sorted(nodes, key=cmp_to_key(_compare)))  # Java: a TreeSet of NODE_COMPARATOR

    def node(self, name: str) -> NodeDescription:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def __str__(self) -> str:
        return f"Sub-topology: {self.id}\n" + "".join(f"    {node}\n" for node in self.nodes) + "\n"

    def __repr__(self) -> str:
        return f"SubtopologyDescription({self.id}, {[n.name for n in self.nodes]})"


class TopologyDescription:
    """The sub-topologies of a topology; `str()` gives Kafka Streams' text form."""

    __slots__ = ("subtopologies",)

    def __init__(self, subtopologies: Iterable[SubtopologyDescription]) -> None:
        self.subtopologies = tuple(sorted(subtopologies, key=lambda s: s.id))

    def subtopology(self, subtopology_id: int) -> SubtopologyDescription:
        for subtopology in self.subtopologies:
            if subtopology.id == subtopology_id:
                return subtopology
        raise KeyError(subtopology_id)

    def __str__(self) -> str:
        return "Topologies:\n " + "".join(f"  {subtopology}" for subtopology in self.subtopologies)

    def __repr__(self) -> str:
        return f"TopologyDescription({list(self.subtopologies)!r})"


def link(nodes: dict[str, NodeDescription], parents: dict[str, tuple[str, ...]]) -> None:
    """Connect described nodes to their parents as Java's `describeSubtopology` does.

    Nodes are visited in `HashMap<String, ...>` order, each connected to its parents in the order
    given; a node's predecessors and successors are `TreeSet`s ordered by sub-graph size (larger
    first) then name, each size read when the link is added, and a link adds the child's size so
    far to its parent and the parent's known ancestors. So a node's several parents print in
    Java's order, which the final sizes alone do not give.
    """
    predecessors = {name: JavaTreeSet[NodeDescription](_compare) for name in nodes}
    successors = {name: JavaTreeSet[NodeDescription](_compare) for name in nodes}

    def grow(node: NodeDescription, delta: int) -> None:
        node.size += delta
        for parent in predecessors[node.name]:
            grow(parent, delta)

    for name in java_hash_set_order(nodes):
        node = nodes[name]
        for parent_name in parents.get(name, ()):
            parent = nodes[parent_name]
            predecessors[name].add(parent)
            successors[parent_name].add(node)
            grow(parent, node.size)
    for name, node in nodes.items():
        node.predecessors = tuple(predecessors[name])
        node.successors = tuple(successors[name])


def _compare(a: NodeDescription, b: NodeDescription) -> int:
    """Kafka's `NODE_COMPARATOR`: the larger sub-graph first, then the name (Java's `String.compareTo`)."""
    if a is b:
        return 0
    if a.size != b.size:
        return b.size - a.size
    key_a, key_b = a.name.encode("utf-16-be"), b.name.encode("utf-16-be")
    return (key_a > key_b) - (key_a < key_b)


def _names(nodes: tuple[NodeDescription, ...]) -> str:
    return ", ".join(node.name for node in nodes) if nodes else "none"


def _set(items: Iterable[str]) -> str:
    """A set printed in the order Java's `HashSet<String>` iterates it (Java prints stores and topics so)."""
    return "[" + ", ".join(java_hash_set_order(items)) + "]"
