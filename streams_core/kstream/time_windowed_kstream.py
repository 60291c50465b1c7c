"""TimeWindowedKStream: a grouped stream aggregated per time window (tumbling, hopping or sliding).

The result is a KTable keyed by `Windowed(key, TimeWindow(start, end))`, materialised in a
window store (queryable by name: `fetch(key, time_from, time_to)` gives the windows' values)
whose retention is at least the window size plus the grace period. Records later than their
windows' grace period are dropped and counted. `suppress(Suppressed.until_window_closes(...))`
on the result emits one final value per window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from streams_core.kstream.internals import names
from streams_core.kstream.internals.functions import check_callable, count_add, zero
from streams_core.kstream.internals.kstream_sliding_window_aggregate import KStreamSlidingWindowAggregate
from streams_core.kstream.internals.kstream_window_aggregate import KStreamWindowAggregate
from streams_core.kstream.internals.ktable_value_getters import WindowStoreValueGetterSupplier
from streams_core.kstream.internals.materialize import window_store
from streams_core.kstream.internals.windowed_stream import WindowedStream
from streams_core.kstream.materialized import Materialized
from streams_core.kstream.named import Named
from streams_core.kstream.windowed_serdes import TimeWindowedSerde
from streams_core.kstream.windows import SlidingWindows, TimeWindows
from streams_core.processor.type_vars import VR, K, V
from streams_core.serde import Serde, Serdes

if TYPE_CHECKING:
    from streams_core.kstream.ktable import KTable
    from streams_core.state.windowed import Windowed

__all__ = ["TimeWindowedKStream"]

Named_ = Named | str | None


def _none() -> None:
    return None


class TimeWindowedKStream(WindowedStream[K, V, TimeWindows | SlidingWindows]):
    """A grouped stream with `TimeWindows` or `SlidingWindows`."""

    __slots__ = ()

    def count(self, materialized: Materialized | None = None, named: Named_ = None) -> KTable[Windowed[K], int]:
        """Records per key and window."""
        self._grouped._builder.burn_count_store_name(materialized)
        return self._aggregate(named, materialized, Serdes.Long(), zero, count_add, operation="count")

    def reduce(self, reducer: Callable[[V, V], V], materialized: Materialized | None = None,
               named: Named_ = None) -> KTable[Windowed[K], V]:  # fmt: skip
        """`reducer(aggregate, value)` per key and window."""
        check_callable(reducer, "reduce's reducer")

        def aggregator(key: K, value: V, aggregate: V | None) -> V:
            return value if aggregate is None else reducer(aggregate, value)

        return self._aggregate(named, materialized, self._grouped.value_serde, _none, aggregator, names.KSTREAM_REDUCE,
                               "reduce")  # fmt: skip

    def aggregate(
        self,
        initializer: Callable[[], VR],
        aggregator: Callable[[K, V, VR], VR],
        materialized: Materialized | None = None,
        named: Named_ = None,
    ) -> KTable[Windowed[K], VR]:
        """`aggregator(key, value, aggregate)` per key and window, from `initializer()`."""
        check_callable(initializer, "aggregate's initializer")
        check_callable(aggregator, "aggregate's aggregator")
        value_serde = self._grouped._builder.infer(self._grouped.value_serde, "value")
        return self._aggregate(named, materialized, value_serde, initializer, aggregator)

    def _aggregate(
        self,
        named: Named_,
        materialized: Materialized | None,
        value_serde: Serde[VR] | None,
        initializer: Callable[[], VR | None],
        aggregator: Callable[[K, V, VR], VR],
        prefix: str = names.KSTREAM_AGGREGATE,
        operation: str = "aggregate",
    ) -> KTable[Windowed[K], VR]:
        from streams_core.kstream.ktable import KTable

        windows = self.windows
        b, m, store, name, parent, sources = self._aggregation_node(named, materialized, value_serde, prefix)
        # a reduce folds from None: its aggregate is V | None until the first value, hence no inference here
        sliding = isinstance(windows, SlidingWindows)
        processor: Callable[..., object] = KStreamSlidingWindowAggregate if sliding else KStreamWindowAggregate
        if isinstance(windows, SlidingWindows):
            size = windows.time_difference_ms
            retention = 2 * size + windows.grace_period_ms
        else:
            size = windows.size_ms
            retention = size + windows.grace_period_ms
        emit = self._emit_strategy
        builder = window_store(b, store, m, size, retention, m.key_serde, m.value_serde, emit.emits_on_close)
        b.add_processor(name, lambda: processor(windows, store, initializer, aggregator, emit, operation), (parent,),
                        stores=(builder,))  # fmt: skip
        key_serde = b.bound(TimeWindowedSerde(m.key_serde, size))
        return KTable(b, name, key_serde, m.value_serde, sources, WindowStoreValueGetterSupplier(store), store,
                      ("time", windows.grace_period_ms), queryable=m.store_name)  # fmt: skip
