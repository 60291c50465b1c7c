"""The pieces `InternalTopologyBuilder` is made of: node factories, store entries, union-find.

A factory remembers how a node was declared and builds a fresh node per task (`build(config,
decorate)`, where `decorate` gives internal topics their full names); `describe()` gives its
part of the topology description. `QuickUnion` groups nodes into sub-topologies.
`GlobalStoreDescription` prints a global store the way Kafka Streams does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streams_core.config import StreamsConfig
from streams_core.errors import TopologyError
from streams_core.processor.internals.processor_node import ProcessorNode, SinkNode, SourceNode
from streams_core.processor.stream_partitioner import StreamPartitioner
from streams_core.processor.timestamp_extractor import FailOnInvalidTimestamp, as_extract_function
from streams_core.processor.topic_name_extractor import TopicNameExtractor
from streams_core.processor.topology_description import (
    NodeDescription,
    ProcessorDescription,
    SinkDescription,
    SourceDescription,
)
from streams_core.serde import Serde

__all__ = [
    "Decorate",
    "GlobalStoreDescription",
    "NewProcessors",
    "NodeFactory",
    "ProcessorNodeFactory",
    "QuickUnion",
    "SinkNodeFactory",
    "SourceNodeFactory",
    "StateStoreFactory",
    "check_pattern_free",
    "check_topic_free",
    "compile_pattern",
    "kind_of",
    "processor_factory",
    "same_topic",
    "stores_of",
]

Decorate = Callable[[str], str]
"""Gives a topic its full name (internal topics get the application id in front)."""


def same_topic(topic: str) -> str:
    """The `Decorate` of a topology without internal topics."""
    return topic


@dataclass(eq=False)
class SourceNodeFactory:
    """A declared source: its topics or pattern, serdes and timestamp extractor."""

    name: str
    topics: tuple[str, ...]
    pattern: re.Pattern[str] | None
    key_serde: Serde[Any] | None
    value_serde: Serde[Any] | None
    timestamp_extractor: Any
    parents: tuple[str, ...] = ()

    def build(self, config: StreamsConfig, decorate: Decorate = same_topic) -> SourceNode:
        extractor = self.timestamp_extractor or config["default.timestamp.extractor"] or FailOnInvalidTimestamp()
        return SourceNode(
            self.name,
            tuple(decorate(topic) for topic in self.topics),
            self.pattern,
            self.key_serde or config["default.key.serde"],
            self.value_serde or config["default.value.serde"],
            as_extract_function(extractor),
        )

    def describe(self) -> NodeDescription:
        return SourceDescription(self.name, self.topics, self.pattern)


@dataclass(eq=False)
class ProcessorNodeFactory:
    """A declared processor: its parents, how to make its processor, its stores."""

    name: str
    parents: tuple[str, ...]
    make_processor: Callable[[], Any]
    """A `NewProcessors` (from `processor_factory`): a new, checked processor per call."""
    store_names: list[str] = field(default_factory=list)

    def build(self, config: StreamsConfig, decorate: Decorate = same_topic) -> ProcessorNode:
        return ProcessorNode(self.name, self.make_processor(), frozenset(self.store_names))

    def describe(self) -> NodeDescription:
        return ProcessorDescription(self.name, self.store_names)


@dataclass(eq=False)
class SinkNodeFactory:
    """A declared sink: its topic or topic extractor, serdes and partitioner."""

    name: str
    parents: tuple[str, ...]
    topic: str | None
    topic_extractor: TopicNameExtractor | None
    key_serde: Serde[Any] | None
    value_serde: Serde[Any] | None
    partitioner: StreamPartitioner | None

    def build(self, config: StreamsConfig, decorate: Decorate = same_topic) -> SinkNode:
        return SinkNode(
            self.name,
            None if self.topic is None else decorate(self.topic),
            self.topic_extractor,
            self.key_serde or config["default.key.serde"],
            self.value_serde or config["default.value.serde"],
            self.partitioner,
        )

    def describe(self) -> NodeDescription:
        return SinkDescription(self.name, self.topic, self.topic_extractor)


NodeFactory = SourceNodeFactory | ProcessorNodeFactory | SinkNodeFactory


@dataclass(eq=False)
class StateStoreFactory:
    """A store builder and the processors connected to it."""

    builder: Any
    users: list[str] = field(default_factory=list)


class GlobalStoreDescription:
    """A global store's source and processor; prints as Java's `GlobalStore` description."""

    __slots__ = ("id", "nodes")

    def __init__(self, subtopology_id: int, nodes: tuple[NodeDescription, ...]) -> None:
        self.id = subtopology_id
        self.nodes = nodes

    def node(self, name: str) -> NodeDescription:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def __str__(self) -> str:
        return (
            f"Sub-topology: {self.id} for global store (will not generate tasks)\n"
            + "".join(f"    {node}\n" for node in self.nodes)
        )

    def __repr__(self) -> str:
        return f"GlobalStoreDescription({self.id}, {[n.name for n in self.nodes]})"


class QuickUnion:
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


def kind_of(factory: NodeFactory) -> str:
    """"source", "sink" or "processor", for error messages."""
    if isinstance(factory, SourceNodeFactory):
        return "source"
    if isinstance(factory, SinkNodeFactory):
        return "sink"
    return "processor"


def stores_of(factories: list[NodeFactory]) -> tuple[str, ...]:
    """The store names of these factories' processors, without repeats, in order."""
    names: dict[str, None] = {}
    for factory in factories:
        if isinstance(factory, ProcessorNodeFactory):
            names.update(dict.fromkeys(factory.store_names))
    return tuple(names)


class NewProcessors:
    """Calls a processor supplier and refuses None or the instance it returned last (Kafka's `checkSupplier`).

    Its memory of the last instance is not pickled: that processor holds its task (context,
    nodes, stores), which stays behind when a topology is shipped to another process.
    """

    __slots__ = ("_kind", "_last", "_make", "_name")

    def __init__(self, name: str, make: Callable[[], Any], kind: str) -> None:
        self._name = name
        self._make = make
        self._kind = kind
        self._last: Any = None

    def __call__(self) -> Any:
        processor = self._make()
        if processor is None or processor is self._last:
            raise TopologyError(
                f"processor {self._name!r}: its supplier returned "
                + ("None" if processor is None else "the same instance twice")
                + f"; it must return a new {self._kind} on every call (each task needs its own)"
            )
        self._last = processor
        return processor

    def __reduce__(self) -> tuple[type[NewProcessors], tuple[str, Callable[[], Any], str]]:
        return NewProcessors, (self._name, self._make, self._kind)


def processor_factory(name: str, supplier: Any, kind: str = "Processor") -> NewProcessors:
    """A zero-argument callable making a new processor per call, from a class, a factory or a supplier."""
    get = getattr(supplier, "get", None)
    if isinstance(supplier, type):
        return NewProcessors(name, supplier, kind)
    if callable(get):
        return NewProcessors(name, get, kind)
    if callable(supplier):
        return NewProcessors(name, supplier, kind)
    if callable(getattr(supplier, "process", None)):
        raise TopologyError(
            f"processor {name!r}: got a processor instance ({supplier!r}); pass its class or a zero-argument "
            "factory instead, so that every task gets its own processor"
        )
    raise TopologyError(
        f"processor {name!r}: expected a Processor class, a zero-argument factory or a supplier with get(), got {supplier!r}"
    )


def check_topic_free(
    name: str, topic: str, topic_to_source: dict[str, str], pattern_to_source: dict[str, tuple[re.Pattern[str], str]]
) -> None:
    """TopologyError if `topic` is already read by a source (by name or pattern)."""
    owner = topic_to_source.get(topic)
    if owner is not None:
        raise TopologyError(f"topic {topic!r} is already consumed by source {owner!r}; source {name!r} cannot also consume it")
    for compiled, owner in pattern_to_source.values():
        if compiled.fullmatch(topic):
            raise TopologyError(
                f"topic {topic!r} of source {name!r} matches pattern {compiled.pattern!r} already consumed by source {owner!r}"
            )


def check_pattern_free(
    name: str, compiled: re.Pattern[str], topic_to_source: dict[str, str],
    pattern_to_source: dict[str, tuple[re.Pattern[str], str]],
) -> None:  # fmt: skip
    """TopologyError if the pattern is already read, or matches a topic a source reads."""
    same = pattern_to_source.get(compiled.pattern)
    if same is not None:
        raise TopologyError(
            f"pattern {compiled.pattern!r} is already consumed by source {same[1]!r}; source {name!r} cannot also consume it"
        )
    for topic, owner in topic_to_source.items():
        if compiled.fullmatch(topic):
            raise TopologyError(
                f"pattern {compiled.pattern!r} of source {name!r} matches topic {topic!r} already consumed by source {owner!r}"
            )


def compile_pattern(name: str, pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    """A source's pattern compiled; TopologyError for what is not a regular expression."""
    if isinstance(pattern, re.Pattern):
        return pattern
    if not isinstance(pattern, str) or not pattern:
        raise TopologyError(f"source {name!r}: expected a regular expression, got {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise TopologyError(f"source {name!r}: invalid pattern {pattern!r}: {exc}") from exc
