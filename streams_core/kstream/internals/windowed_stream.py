"""WindowedStream: what TimeWindowedKStream and SessionWindowedKStream share.

Both hold a grouped stream, its windows and an emit strategy, and both add an aggregation the
same way: the user's Materialized with the grouping's serdes, a store name and a processor name
from the prefix, and the node to aggregate from (a repartition source when the key changed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Self, TypeVar

from streams_core.kstream.emit_strategy import EmitStrategy, with_emit_strategy
from streams_core.kstream.internals.materialize import store_name
from streams_core.kstream.materialized import Materialized
from streams_core.kstream.named import Named
from streams_core.processor.type_vars import K, V
from streams_core.serde import Serde

if TYPE_CHECKING:
    from streams_core.kstream.internals.internal_streams_builder import InternalStreamsBuilder
    from streams_core.kstream.kgrouped_stream import KGroupedStream

__all__ = ["AggregationNode", "WindowedStream"]

W = TypeVar("W")


class AggregationNode(NamedTuple):
    """Where a windowed aggregation goes: builder, merged Materialized, store, node, parent, sources."""

    builder: InternalStreamsBuilder
    materialized: Materialized
    store: str
    name: str
    parent: str
    sources: frozenset[str]


class WindowedStream(Generic[K, V, W]):
    """A grouped stream with windows `W` and the strategy of when its aggregations forward."""

    __slots__ = ("_emit_strategy", "_grouped", "windows")

    def __init__(self, grouped: KGroupedStream[K, V], windows: W) -> None:
        self._grouped = grouped
        self.windows = windows
        self._emit_strategy = EmitStrategy.on_window_update()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._grouped.name!r}, {self.windows!r})"

    def emit_strategy(self, emit_strategy: EmitStrategy) -> Self:
        """When the aggregations below forward results: every update (default) or once per closed window."""
        return with_emit_strategy(self, emit_strategy)

    def _aggregation_node(
        self, named: Named | str | None, materialized: Materialized | None, value_serde: Serde[Any] | None, prefix: str
    ) -> AggregationNode:
        """The store and node names and the parent of a new aggregation (`prefix`: AGGREGATE, REDUCE...)."""
        grouped = self._grouped
        b = grouped._builder
        m = (materialized or Materialized()).merged_serdes(grouped.key_serde, value_serde)
        store = store_name(b, materialized, prefix)
        name = b.processor_name(named, prefix)
        parent, sources = grouped.upstream(store)
        return AggregationNode(b, m, store, name, parent, sources)
