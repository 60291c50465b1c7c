"""KGroupedStream: a stream grouped by key, ready to be aggregated (count, reduce, aggregate).

A grouping whose key was changed upstream is repartitioned when it is aggregated, through
`<application.id>-<name>-repartition`, `<name>` being the `Grouped` name or else the store's.
The result is a KTable materialised in a store named by `Materialized.as_(...)` (queryable)
or generated (`KSTREAM-AGGREGATE-STATE-STORE-<n>`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, overload

from streams_core.kstream.internals import names
from streams_core.kstream.internals.functions import check_callable
from streams_core.kstream.internals.kstream_aggregate import KStreamAggregate, KStreamReduce
from streams_core.kstream.internals.ktable_value_getters import StoreValueGetterSupplier
from streams_core.kstream.internals.materialize import key_value_store, store_name
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


def _count_add(key: object, value: object, count: int) -> int:
    return count + 1


def _zero() -> int:
    return 0


class KGroupedStream(Generic[K, V]):
    """A grouped stream: the node to aggregate from, serdes, and whether to repartition first."""

    __slots__ = (
        "_builder", "_repartition_source", "grouped_name", "key_serde", "name", "repartition_required", "source_nodes",
        "value_serde",
    )  # fmt: skip

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
        self._builder = builder
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.source_nodes = source_nodes
        self.repartition_required = repartition_required
        self.grouped_name = grouped_name
        self._repartition_source: str | None = None

    def __repr__(self) -> str:
        return f"KGroupedStream({self.name!r})"

    def count(self, materialized: Materialized | None = None, named: Named_ = None) -> KTable[K, int]:
        """The number of records per key (records with a None key or value are not counted)."""
        self._builder.burn_count_store_name(materialized)
        return self._aggregate(names.KSTREAM_AGGREGATE, named, materialized, Serdes.Long(),
                               lambda store: KStreamAggregate(store, _zero, _count_add, "count"))  # fmt: skip

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

    def _aggregate(
        self,
        prefix: str,
        named: Named_,
        materialized: Materialized | None,
        value_serde: Serde[VR] | None,
        factory: Callable[[str], object],
    ) -> KTable[K, VR]:
        from streams_core.kstream.ktable import KTable

        b = self._builder
        m = (materialized or Materialized()).merged_serdes(self.key_serde, value_serde)
        store = store_name(b, materialized, prefix)
        name = b.processor_name(named, prefix)
        parent, sources = self.upstream(store)
        builder = key_value_store(b, store, m, m.key_serde, m.value_serde)
        b.add_processor(name, lambda: factory(store), (parent,), stores=(builder,))
        return KTable(b, name, m.key_serde, m.value_serde, sources, StoreValueGetterSupplier(store), store,
                      queryable=m.store_name)  # fmt: skip

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
