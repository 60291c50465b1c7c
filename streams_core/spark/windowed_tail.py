"""What follows a windowed table on a native query: `to_stream()`, fused stateless operators, sinks.

The native windowed count (native_window_count.py) and session count (native_session_count.py)
run it in Python on their updated windows only, so it must be nothing but stateless operators
ending in sinks to fixed topics. `WindowedTail` is also the base of what those stages know of
their windows (`WindowCount`, `SessionAggregation`): the tail, and the tasks they run per.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from streams_core.kstream.internals.ktable_processors import KTableToStream
from streams_core.processor.internals.processor_node import ProcessorNode, SinkNode
from streams_core.processor.internals.stateless_chain import fused_nodes

__all__ = ["WindowedTail", "windowed_tail"]


@dataclass(frozen=True)
class WindowedTail:
    """`to_stream()`'s node, the fused stateless nodes after it, the sinks and their topics; the
    tasks of the aggregation before it."""

    to_stream: str
    #: The fused stateless nodes between `to_stream()` and the sinks (run on the updated windows).
    tail: tuple[str, ...]
    sinks: tuple[str, ...]
    topics: tuple[str, ...]
    #: The repartition topic whose partitions are the aggregation's tasks; None: the source's partitions.
    partitions_of: str | None = None

    def fields(self) -> dict[str, Any]:
        """The tail's fields, to build a subclass from it (`WindowCount(size=..., **tail.fields())`)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(WindowedTail)}


def windowed_tail(agg: ProcessorNode, readback: frozenset[str]) -> WindowedTail | str:
    """What follows the windowed aggregation `agg` when it is `to_stream()`, fused stateless
    operators and sinks to fixed topics without a custom partitioner, none read back; else why not."""
    if len(agg.children) != 1:
        return "its windowed table feeds more than to_stream()"
    (to_stream,) = agg.children
    if not (isinstance(to_stream.processor, KTableToStream) and to_stream.processor.key_mapper is None):
        return "its windowed table feeds more than to_stream() (suppress, a join, to_stream(mapper))"
    tail: list[str] = []
    sinks: list[SinkNode] = []
    for child in to_stream.children:
        nodes, terminals = fused_nodes(child)
        tail.extend(n.name for n in nodes if n.name not in tail)
        for end in terminals:
            if not isinstance(end, SinkNode):
                return f"after to_stream(), {end.name} is not a stateless operator or a sink"
            if end.topic is None or end.partitioner is not None or end.topic in readback:
                return f"sink {end.name} chooses its topic per record, has a custom partitioner or is read back"
            sinks.append(end)
    if not sinks:
        return "its windowed table is written nowhere"
    return WindowedTail(to_stream.name, tuple(tail), tuple(dict.fromkeys(s.name for s in sinks)),
                        tuple(dict.fromkeys(str(s.topic) for s in sinks)))  # fmt: skip
