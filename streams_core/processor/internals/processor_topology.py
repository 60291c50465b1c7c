"""ProcessorTopology: the instantiated nodes and stores of one sub-topology, for one task."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams_core.errors import TopologyError
from streams_core.processor.internals.processor_node import ProcessorNode, SinkNode, SourceNode

__all__ = ["ProcessorTopology"]


class ProcessorTopology:
    """Nodes in topological order (parents before children), sources by topic, and built stores.

    The stores are built but not initialised; the task initialises them before its processors.
    Sources that subscribe by pattern are matched on first use of a topic and remembered.
    """

    __slots__ = ("_pattern_sources", "_sources_by_topic", "nodes", "state_stores", "subtopology_id")

    def __init__(
        self,
        subtopology_id: int,
        nodes: tuple[ProcessorNode, ...],
        state_stores: Mapping[str, Any],
    ) -> None:
        self.subtopology_id = subtopology_id
        self.nodes = nodes
        self.state_stores: dict[str, Any] = dict(state_stores)
        self._sources_by_topic: dict[str, SourceNode] = {}
        self._pattern_sources: tuple[SourceNode, ...] = ()
        for node in nodes:
            if isinstance(node, SourceNode):
                for topic in node.topics:
                    self._sources_by_topic[topic] = node
                if node.pattern is not None:
                    self._pattern_sources = (*self._pattern_sources, node)

    def __repr__(self) -> str:
        return f"ProcessorTopology({self.subtopology_id}, nodes={[n.name for n in self.nodes]})"

    @property
    def sources(self) -> tuple[SourceNode, ...]:
        return tuple(n for n in self.nodes if isinstance(n, SourceNode))

    @property
    def sinks(self) -> tuple[SinkNode, ...]:
        return tuple(n for n in self.nodes if isinstance(n, SinkNode))

    @property
    def processors(self) -> tuple[ProcessorNode, ...]:
        """The user processor nodes (neither sources nor sinks)."""
        return tuple(n for n in self.nodes if not isinstance(n, (SourceNode, SinkNode)))

    @property
    def source_topics(self) -> frozenset[str]:
        """Topics named by sources, plus pattern-matched topics seen so far."""
        return frozenset(self._sources_by_topic)

    def node(self, name: str) -> ProcessorNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def source(self, topic: str) -> SourceNode | None:
        """The source node reading `topic` (exact name first, then patterns), or None."""
        found = self._sources_by_topic.get(topic)
        if found is not None or not self._pattern_sources:
            return found
        matches = [s for s in self._pattern_sources if s.pattern.fullmatch(topic)]  # type: ignore[union-attr]
        if len(matches) > 1:
            raise TopologyError(
                f"topic {topic!r} matches the patterns of several sources: "
                + ", ".join(f"{s.name!r} ({s.pattern.pattern!r})" for s in matches)  # type: ignore[union-attr]
            )
        if matches:
            self._sources_by_topic[topic] = matches[0]
            return matches[0]
        return None
