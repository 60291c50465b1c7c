"""KGroupedStream: a stream grouped by key, ready to be aggregated (count, reduce, aggregate).

A grouping whose key was changed upstream is repartitioned when it is aggregated, through
`<application.id>-<name>-repartition`, `<name>` being the `Grouped` name or else the store's.
The result is a KTable materialised in a store named by `Materialized.as_(...)` (queryable)
or generated (`KSTREAM-AGGREGATE-STATE-STORE-<n>`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, overload

from streams_core.kstream.internals import names
from streams_core.kstream.internals.functions import check_callable, count_add, zero
from streams_core.kstream.internals.grouped_aggregation import GroupedAggregation
from streams_core.kstream.internals.kstream_aggregate import KStreamAggregate, KStreamReduce
from streams_core.kstream.materialized import Materialized
from streams_core.kstream.named import Named
from streams_core.processor.type_vars import VR, K, V
from streams_core.serde import Serde, Serdes

if TYPE_CHECKING:
    from streams_core.kstream.cogrouped_kstream import CogroupedKStream
    from streams_core.kstream.internals.internal_streams_builder import InternalStreamsBuilder
    from streams_core.kstream.ktable import KTable
    from streams_core.kstream.session_windowed_kstream import SessionWindowedKStream
    from streams_core.kstream.time_windowed_kstream import TimeWindowedKStream
    from streams_core.kstream.windows import SessionWindows, SlidingWindows, TimeWindows

__all__ = ["KGroupedStream"]

Named_ = Named | str | None


class KGroupedStream(GroupedAggregation[K, V]):
    """A grouped stream: the node to aggregate from, serdes, and whether to repartition first."""

    __slots__ = ("repartition_required", "source_nodes")

    def __init__(
        self,
        builder: InternalStreamsBuilder,
        name: str,
        key_serde: Serde[K] | None,
        value_serde: Serde[V] | None,
        source_nodes: frozenset[str],
        repartition_required: bool,
        grouped_name: str | None,
    ) -> None:
        super().__init__(builder, name, key_serde, value_serde, grouped_name)
        self.source_nodes = source_nodes
        self.repartition_required = repartition_required

    def count(self, materialized: Materialized | None = None, named: Named_ = None) -> KTable[K, int]:
        """The number of records per key (records with a None key or value are not counted)."""
        self._builder.burn_count_store_name(materialized)
        return self._aggregate(names.KSTREAM_AGGREGATE, named, materialized, Serdes.Long(),
                               lambda store: KStreamAggregate(store, zero, count_add, "count"))  # fmt: skip

    def reduce(self, reducer: Callable[[V, V], V], materialized: Materialized | None = None,
               named: Named_ = None) -> KTable[K, V]:  # fmt: skip
        """`reducer(aggregate, value)` per key; a key's first value is its aggregate."""
        check_callable(reducer, "reduce's reducer")
        return self._aggregate(names.KSTREAM_REDUCE, named, materialized, self.value_serde,
                               lambda store: KStreamReduce(store, reducer))  # fmt: skip

    def aggregate(
        self,
        initializer: Callable[[], VR],
        aggregator: Callable[[K, V, VR], VR],
        materialized: Materialized | None = None,
        named: Named_ = None,
    ) -> KTable[K, VR]:
        """`aggregator(key, value, aggregate)` per key, starting from `initializer()`."""
        check_callable(initializer, "aggregate's initializer")
        check_callable(aggregator, "aggregate's aggregator")
        return self._aggregate(names.KSTREAM_AGGREGATE, named, materialized,
                               self._builder.infer(self.value_serde, "value"),
                               lambda store: KStreamAggregate(store, initializer, aggregator))  # fmt: skip

    def cogroup(self, aggregator: Callable[[K, V, VR], VR]) -> CogroupedKStream[K, VR]:
        """Start a cogroup (KIP-150): this stream folded by `aggregator(key, value, aggregate)`, more
        grouped streams added with `.cogroup(grouped, aggregator)`, then `.aggregate(initializer)`."""
        from streams_core.kstream.cogrouped_kstream import CogroupedKStream

        return CogroupedKStream(self, aggregator)

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedKStream[K, V]: ...

    @overload
    def windowed_by(self, windows: TimeWindows | SlidingWindows) -> TimeWindowedKStream[K, V]: ...

    def windowed_by(
        self, windows: TimeWindows | SlidingWindows | SessionWindows
    ) -> TimeWindowedKStream[K, V] | SessionWindowedKStream[K, V]:
        """Aggregate per window: `TimeWindows`, `SlidingWindows` or `SessionWindows`."""
        from streams_core.kstream.session_windowed_kstream import SessionWindowedKStream
        from streams_core.kstream.time_windowed_kstream import TimeWindowedKStream
        from streams_core.kstream.windows import SessionWindows, SlidingWindows, TimeWindows

        if isinstance(windows, SessionWindows):
            return SessionWindowedKStream(self, windows)
        if isinstance(windows, (TimeWindows, SlidingWindows)):
            return TimeWindowedKStream(self, windows)
        raise TypeError(f"windowed_by takes TimeWindows, SlidingWindows or SessionWindows, got {windows!r}")

    def _upstream(self, store: str, named: Named_, prefix: str) -> tuple[str, str, frozenset[str]]:
        name = self._builder.processor_name(named, prefix)
        return (name, *self.upstream(store))

    def upstream(self, store: str) -> tuple[str, frozenset[str]]:
        """The node to aggregate from and its sources: a repartition source when the key changed."""
        if not self.repartition_required:
            return self.name, self.source_nodes
        if self._repartition_source is not None and self.grouped_name is not None:
            # Java reuses a named grouping's repartition topic for each aggregation of it
            self._builder.burn_repartition_names()
            return self._repartition_source, frozenset({self._repartition_source})
        source = self._builder.repartition(self.name, self.grouped_name or store, self.key_serde, self.value_serde)
        self._repartition_source = source
        return source, frozenset({source})
