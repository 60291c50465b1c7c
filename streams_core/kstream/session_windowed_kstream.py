"""SessionWindowedKStream: a grouped stream aggregated per session (`SessionWindows`).

The result is a KTable keyed by `Windowed(key, SessionWindow(start, end))` in a session store
(queryable: `fetch(key)`, `find_sessions(...)`). When a record merges sessions, the merged
ones are retracted (None) and the new session forwarded. Aggregations need a `merger(key,
agg1, agg2)` that combines two sessions' aggregates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from streams_core.kstream.internals import names
from streams_core.kstream.internals.functions import check_callable, count_add, zero
from streams_core.kstream.internals.kstream_session_window_aggregate import KStreamSessionWindowAggregate
from streams_core.kstream.internals.ktable_value_getters import SessionStoreValueGetterSupplier
from streams_core.kstream.internals.materialize import session_store
from streams_core.kstream.internals.windowed_stream import WindowedStream
from streams_core.kstream.materialized import Materialized
from streams_core.kstream.named import Named
from streams_core.kstream.windowed_serdes import SessionWindowedSerde
from streams_core.kstream.windows import SessionWindows
from streams_core.processor.type_vars import VR, K, V
from streams_core.serde import Serde, Serdes

if TYPE_CHECKING:
    from streams_core.kstream.ktable import KTable
    from streams_core.state.windowed import Windowed

__all__ = ["SessionWindowedKStream"]

Named_ = Named | str | None


def _sum_merge(key: object, one: int, two: int) -> int:
    return one + two


def _none() -> None:
    return None


class SessionWindowedKStream(WindowedStream[K, V, SessionWindows]):
    """A grouped stream with `SessionWindows`."""

    __slots__ = ()

    def count(self, materialized: Materialized | None = None, named: Named_ = None) -> KTable[Windowed[K], int]:
        """Records per key and session."""
        self._grouped._builder.burn_count_store_name(materialized)
        return self._aggregate(named, materialized, Serdes.Long(), zero, count_add, _sum_merge)

    def reduce(self, reducer: Callable[[V, V], V], materialized: Materialized | None = None,
               named: Named_ = None) -> KTable[Windowed[K], V]:  # fmt: skip
        """`reducer(aggregate, value)` per key and session (also merging sessions)."""
        check_callable(reducer, "reduce's reducer")

        def aggregator(key: K, value: V, aggregate: V | None) -> V:
            return value if aggregate is None else reducer(aggregate, value)

        def merger(key: K, one: V, two: V) -> V:
            return aggregator(key, two, one)

        return self._aggregate(named, materialized, self._grouped.value_serde, _none, aggregator, merger,
                               names.KSTREAM_REDUCE)  # fmt: skip

    def aggregate(
        self,
        initializer: Callable[[], VR],
        aggregator: Callable[[K, V, VR], VR],
        merger: Callable[[K, VR, VR], VR],
        materialized: Materialized | None = None,
        named: Named_ = None,
    ) -> KTable[Windowed[K], VR]:
        """`aggregator(key, value, agg)` per key and session from `initializer()`; `merger(key, agg1, agg2)`."""
        for function, what in ((initializer, "initializer"), (aggregator, "aggregator"), (merger, "merger")):
            check_callable(function, f"aggregate's {what}")
        value_serde = self._grouped._builder.infer(self._grouped.value_serde, "value")
        return self._aggregate(named, materialized, value_serde, initializer, aggregator, merger)

    def _aggregate(
        self,
        named: Named_,
        materialized: Materialized | None,
        value_serde: Serde[VR] | None,
        initializer: Callable[[], VR | None],
        aggregator: Callable[[K, V, VR], VR],
        merger: Callable[[K, VR, VR], VR],
        prefix: str = names.KSTREAM_AGGREGATE,
    ) -> KTable[Windowed[K], VR]:
        from streams_core.kstream.ktable import KTable

        windows = self.windows
        b, m, store, name, parent, sources = self._aggregation_node(named, materialized, value_serde, prefix)
        minimum = windows.inactivity_gap_ms + windows.grace_period_ms
        emit = self._emit_strategy
        if emit.emits_on_close:
            m = m.with_caching_disabled()  # as Java: the final results come from the store, not the cache
        builder = session_store(b, store, m, minimum, m.key_serde, m.value_serde)
        # a reduce folds from None: its aggregate is V | None until the first value, hence no inference here
        processor: Callable[..., object] = KStreamSessionWindowAggregate
        b.add_processor(name, lambda: processor(windows, store, initializer, aggregator, merger, emit), (parent,),
                        stores=(builder,))  # fmt: skip
        key_serde = b.bound(SessionWindowedSerde(m.key_serde))
        final_after = 2 * windows.inactivity_gap_ms + windows.grace_period_ms + 1
        return KTable(b, name, key_serde, m.value_serde, sources, SessionStoreValueGetterSupplier(store), store,
                      ("session", final_after), queryable=m.store_name)  # fmt: skip
