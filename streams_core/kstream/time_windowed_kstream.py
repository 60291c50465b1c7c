"""TimeWindowedKStream: a grouped stream aggregated per time window (tumbling, hopping or sliding).

The result is a KTable keyed by `Windowed(key, TimeWindow(start, end))`, materialised in a
window store (queryable by name: `fetch(key, time_from, time_to)` gives the windows' values)
whose retention is at least the window size plus the grace period. Records later than their
windows' grace period are dropped and counted. `suppress(Suppressed.until_window_closes(...))`
on the result emits one final value per window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streams_core.kstream.emit_strategy import EmitStrategy, with_emit_strategy
from streams_core.kstream.internals import names
from streams_core.kstream.internals.functions import check_callable
from streams_core.kstream.internals.kstream_sliding_window_aggregate import KStreamSlidingWindowAggregate
from streams_core.kstream.internals.kstream_window_aggregate import KStreamWindowAggregate
from streams_core.kstream.internals.ktable_value_getters import WindowStoreValueGetterSupplier
from streams_core.kstream.internals.materialize import store_name, window_store
from streams_core.kstream.materialized import Materialized
from streams_core.kstream.named import Named
from streams_core.kstream.windowed_serdes import TimeWindowedSerde
from streams_core.kstream.windows import SlidingWindows, TimeWindows
from streams_core.serde import Serde, Serdes

if TYPE_CHECKING:
    from streams_core.kstream.kgrouped_stream import KGroupedStream
    from streams_core.kstream.ktable import KTable

__all__ = ["TimeWindowedKStream"]

Named_ = Named | str | None


def _zero() -> int:
    return 0


def _count_add(key: Any, value: Any, count: int) -> int:
    return count + 1


def _none() -> None:
    return None


class TimeWindowedKStream:
    """A grouped stream with `TimeWindows` or `SlidingWindows`."""

    __slots__ = ("_emit_strategy", "_grouped", "windows")

    def __init__(self, grouped: KGroupedStream, windows: TimeWindows | SlidingWindows) -> None:
        self._grouped = grouped
        self.windows = windows
        self._emit_strategy = EmitStrategy.on_window_update()

    def __repr__(self) -> str:
        return f"TimeWindowedKStream({self._grouped.name!r}, {self.windows!r})"

    def emit_strategy(self, emit_strategy: EmitStrategy) -> TimeWindowedKStream:
        """When the aggregations below forward results: every update (default) or once per closed window."""
        return with_emit_strategy(self, emit_strategy)

    def count(self, materialized: Materialized | None = None, named: Named_ = None) -> KTable:
        """Records per key and window."""
        self._grouped._builder.burn_count_store_name(materialized)
        return self._aggregate(named, materialized, Serdes.Long(), _zero, _count_add)

    def reduce(self, reducer: Callable[[Any, Any], Any], materialized: Materialized | None = None,
               named: Named_ = None) -> KTable:  # fmt: skip
        """`reducer(aggregate, value)` per key and window."""
        check_callable(reducer, "reduce's reducer")

        def aggregator(key: Any, value: Any, aggregate: Any) -> Any:
            return value if aggregate is None else reducer(aggregate, value)

        return self._aggregate(named, materialized, self._grouped.value_serde, _none, aggregator, names.KSTREAM_REDUCE)

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        materialized: Materialized | None = None,
        named: Named_ = None,
    ) -> KTable:
        """`aggregator(key, value, aggregate)` per key and window, from `initializer()`."""
        check_callable(initializer, "aggregate's initializer")
        check_callable(aggregator, "aggregate's aggregator")
        value_serde = self._grouped._builder.infer(self._grouped.value_serde, "value")
        return self._aggregate(named, materialized, value_serde, initializer, aggregator)

    def _aggregate(
        self,
        named: Named_,
        materialized: Materialized | None,
        value_serde: Serde[Any] | None,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        prefix: str = names.KSTREAM_AGGREGATE,
    ) -> KTable:
        from streams_core.kstream.ktable import KTable

        grouped, windows = self._grouped, self.windows
        b = grouped._builder
        m = (materialized or Materialized()).merged_serdes(grouped.key_serde, value_serde)
        store = store_name(b, materialized, prefix)
        name = b.processor_name(named, prefix)
        parent, sources = grouped.upstream(store)
        processor: type[Any]
        if isinstance(windows, SlidingWindows):
            processor, size = KStreamSlidingWindowAggregate, windows.time_difference_ms
            retention = 2 * size + windows.grace_period_ms
        else:
            processor, size = KStreamWindowAggregate, windows.size_ms
            retention = size + windows.grace_period_ms
        emit = self._emit_strategy
        builder = window_store(b, store, m, size, retention, m.key_serde, m.value_serde, emit.emits_on_close)
        b.add_processor(name, lambda: processor(windows, store, initializer, aggregator, emit), (parent,),
                        stores=(builder,))  # fmt: skip
        key_serde = b.bound(TimeWindowedSerde(m.key_serde, size))
        return KTable(b, name, key_serde, m.value_serde, sources, WindowStoreValueGetterSupplier(store), store,
                      ("time", windows.grace_period_ms), queryable=m.store_name)  # fmt: skip
