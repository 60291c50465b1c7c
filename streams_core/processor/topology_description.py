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
from typing import Any

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
        extractor = getattr(self.topic_extractor, "__qualname__", None) or type(self.topic_extractor).__qualname__
        return f"Sink: {self.name} (extractor class: {extractor}){self._links()}"


class SubtopologyDescription:
    """One sub-topology: its id (the first part of its task ids) and its nodes in print order."""

    __slots__ = ("id", "nodes")

    def __init__(self, subtopology_id: int, nodes: Iterable[NodeDescription]) -> None:
        self.id = subtopology_id
        self.nodes = tuple(sorted(nodes, key=_print_order))

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
    """Connect described nodes to their parents and compute Java's sort key (sub-graph size)."""
    successors: dict[str, list[NodeDescription]] = {name: [] for name in nodes}
    for name, node in nodes.items():
        node.predecessors = tuple(nodes[p] for p in parents.get(name, ()))
        for parent in parents.get(name, ()):
            successors[parent].append(node)
    sizes: dict[str, int] = {}

    def size(node: NodeDescription) -> int:
        if node.name not in sizes:
            sizes[node.name] = 1 + sum(size(child) for child in successors[node.name])
        return sizes[node.name]

    for node in nodes.values():
        node.size = size(node)
    for name, node in nodes.items():
        node.successors = tuple(sorted(successors[name], key=_print_order))
        node.predecessors = tuple(sorted(node.predecessors, key=_print_order))


def _print_order(node: NodeDescription) -> tuple[int, str]:
    return (-node.size, node.name)


def _names(nodes: tuple[NodeDescription, ...]) -> str:
    return ", ".join(node.name for node in nodes) if nodes else "none"


def _set(items: Iterable[str]) -> str:
    """A set printed in the order Java's `HashSet<String>` iterates it (Java prints stores and topics so)."""
    return "[" + ", ".join(java_hash_set_order(items)) + "]"


def _java_string_hash(text: str) -> int:
    """Java's `String.hashCode()` over UTF-16 code units, as an unsigned 32-bit int."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_set_order(items: Iterable[str]) -> list[str]:
    """The iteration order of a `new HashSet<>(items)`: by bucket of the spread hash (capacity 16,
    doubled past 3/4 load); names sharing a bucket in the order given (Java's insertion order)."""
    names = list(dict.fromkeys(items))
    capacity = 16
    while len(names) > 0.75 * capacity:
        capacity *= 2

    def bucket(name: str) -> int:
        h = _java_string_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(names, key=bucket)
