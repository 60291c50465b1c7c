"""CogroupedKStream (KIP-150): several grouped streams aggregated into one table, one store.

    totals = (clicks.group_by_key().cogroup(lambda k, click, agg: agg + 1)
              .cogroup(purchases.group_by_key(), lambda k, purchase, agg: agg + purchase["amount"])
              .aggregate(lambda: 0, materialized=Materialized.as_("totals")))

Each grouped stream gets its own aggregation processor (`COGROUPKSTREAM-AGGREGATE-<n>`, or
`<named>-cogroup-agg-<i>`) with its own aggregator, all writing the same store; a pass-through
merge (`COGROUPKSTREAM-MERGE-<n>` / `<named>-cogroup-merge`) is the table. A key-changed
grouped stream is repartitioned first (topic: its `Grouped` name, else the store name), and all
inputs are co-partitioned. `windowed_by` gives time, sliding or session windowed cogroups.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, overload

from streams_core.errors import TopologyError
from streams_core.kstream.emit_strategy import EmitStrategy
from streams_core.kstream.internals import names
from streams_core.kstream.internals.functions import check_callable
from streams_core.kstream.internals.kstream_aggregate import KStreamAggregate
from streams_core.kstream.internals.kstream_session_window_aggregate import KStreamSessionWindowAggregate
from streams_core.kstream.internals.kstream_sliding_window_aggregate import KStreamSlidingWindowAggregate
from streams_core.kstream.internals.kstream_window_aggregate import KStreamWindowAggregate
from streams_core.kstream.internals.ktable_value_getters import (
    SessionStoreValueGetterSupplier,
    StoreValueGetterSupplier,
    WindowStoreValueGetterSupplier,
)
from streams_core.kstream.internals.materialize import key_value_store, session_store, store_name, window_store
from streams_core.kstream.materialized import Materialized, named_and_materialized
from streams_core.kstream.named import Named, name_of
from streams_core.kstream.windowed_serdes import SessionWindowedSerde, TimeWindowedSerde
from streams_core.kstream.windows import SessionWindows, SlidingWindows, TimeWindows
from streams_core.processor.internals.stateless_processors import KStreamPassThrough
from streams_core.processor.type_vars import VR, K, V

if TYPE_CHECKING:
    from streams_core.kstream.kgrouped_stream import KGroupedStream
    from streams_core.kstream.ktable import KTable
    from streams_core.state.windowed import Windowed

__all__ = ["CogroupedKStream", "SessionWindowedCogroupedKStream", "TimeWindowedCogroupedKStream"]

Named_ = Named | str | None


class CogroupedKStream(Generic[K, VR]):
    """Grouped streams with their aggregators, to be aggregated together (`KGroupedStream.cogroup`)."""

    __slots__ = ("_groups",)

    def __init__(self, grouped: KGroupedStream[K, V], aggregator: Callable[[K, V, VR], VR]) -> None:
        check_callable(aggregator, "cogroup's aggregator")
        self._groups: dict[int, tuple[KGroupedStream[K, Any], Callable[[K, Any, VR], VR]]] = {
            id(grouped): (grouped, aggregator)
        }

    def __repr__(self) -> str:
        return f"CogroupedKStream({[g.name for g, _ in self._groups.values()]!r})"

    def cogroup(self, grouped: KGroupedStream[K, V], aggregator: Callable[[K, V, VR], VR]) -> CogroupedKStream[K, VR]:
        """Add another grouped stream (same key type) and how it folds into the aggregate."""
        from streams_core.kstream.kgrouped_stream import KGroupedStream

        if not isinstance(grouped, KGroupedStream):
            raise TypeError(f"cogroup takes a KGroupedStream, got {grouped!r}")
        check_callable(aggregator, "cogroup's aggregator")
        first = next(iter(self._groups.values()))[0]
        if grouped._builder is not first._builder:
            raise TopologyError(f"{grouped!r} belongs to another StreamsBuilder than {first!r}")
        self._groups[id(grouped)] = (grouped, aggregator)  # as Java's LinkedHashMap: a repeat keeps its place
        return self

    def aggregate(
        self,
        initializer: Callable[[], VR],
        *options: Named | str | Materialized | None,
        named: Named_ = None,
        materialized: Materialized | None = None,
    ) -> KTable[K, VR]:
        """The aggregate per key, from `initializer()`, updated by each stream's aggregator."""
        check_callable(initializer, "aggregate's initializer")
        named, materialized = named_and_materialized(options, named, materialized, "aggregate")
        return _build(self, named, materialized, None, lambda store, aggregator: KStreamAggregate(
            store, initializer, aggregator))  # fmt: skip

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedCogroupedKStream[K, VR]: ...

    @overload
    def windowed_by(self, windows: TimeWindows | SlidingWindows) -> TimeWindowedCogroupedKStream[K, VR]: ...

    def windowed_by(
        self, windows: TimeWindows | SlidingWindows | SessionWindows
    ) -> TimeWindowedCogroupedKStream[K, VR] | SessionWindowedCogroupedKStream[K, VR]:
        """Aggregate per window: `TimeWindows`, `SlidingWindows` or `SessionWindows`."""
        if isinstance(windows, SessionWindows):
            return SessionWindowedCogroupedKStream(self, windows)
        if isinstance(windows, (TimeWindows, SlidingWindows)):
            return TimeWindowedCogroupedKStream(self, windows)
        raise TypeError(f"windowed_by takes TimeWindows, SlidingWindows or SessionWindows, got {windows!r}")


class TimeWindowedCogroupedKStream(Generic[K, VR]):
    """A cogroup aggregated per time or sliding window (keys: `Windowed(key, TimeWindow)`)."""

    __slots__ = ("_cogrouped", "windows")

    def __init__(self, cogrouped: CogroupedKStream[K, VR], windows: TimeWindows | SlidingWindows) -> None:
        self._cogrouped = cogrouped
        self.windows = windows

    def aggregate(
        self,
        initializer: Callable[[], VR],
        *options: Named | str | Materialized | None,
        named: Named_ = None,
        materialized: Materialized | None = None,
    ) -> KTable[Windowed[K], VR]:
        check_callable(initializer, "aggregate's initializer")
        named, materialized = named_and_materialized(options, named, materialized, "aggregate")
        windows = self.windows
        kind: type[Any] = KStreamSlidingWindowAggregate if isinstance(windows, SlidingWindows) else KStreamWindowAggregate
        return _build(self._cogrouped, named, materialized, windows, lambda store, aggregator: kind(
            windows, store, initializer, aggregator, EmitStrategy.on_window_update()))  # fmt: skip


class SessionWindowedCogroupedKStream(Generic[K, VR]):
    """A cogroup aggregated per session (keys: `Windowed(key, SessionWindow)`)."""

    __slots__ = ("_cogrouped", "windows")

    def __init__(self, cogrouped: CogroupedKStream[K, VR], windows: SessionWindows) -> None:
        self._cogrouped = cogrouped
        self.windows = windows

    def aggregate(
        self,
        initializer: Callable[[], VR],
        merger: Callable[[K, VR, VR], VR],
        *options: Named | str | Materialized | None,
        named: Named_ = None,
        materialized: Materialized | None = None,
    ) -> KTable[Windowed[K], VR]:
        check_callable(initializer, "aggregate's initializer")
        check_callable(merger, "aggregate's merger")
        named, materialized = named_and_materialized(options, named, materialized, "aggregate")
        windows = self.windows
        return _build(self._cogrouped, named, materialized, windows, lambda store, aggregator: (
            KStreamSessionWindowAggregate(windows, store, initializer, aggregator, merger)))  # fmt: skip


def _build(
    cogrouped: CogroupedKStream[K, VR],
    named: Named_,
    materialized: Materialized | None,
    windows: TimeWindows | SlidingWindows | SessionWindows | None,
    processor: Callable[[str, Callable[[K, Any, VR], VR]], object],
) -> KTable[Any, VR]:
    """The shared part of Java's CogroupedStreamAggregateBuilder: repartitions, one processor
    per grouped stream on one store, the merge node."""
    from streams_core.kstream.ktable import KTable

    groups = list(cogrouped._groups.values())
    first = groups[0][0]
    b = first._builder
    m = (materialized or Materialized()).merged_serdes(first.key_serde, None)
    store = store_name(b, materialized, names.COGROUPKSTREAM_AGGREGATE)
    parents: list[str] = []
    sources: frozenset[str] = frozenset()
    for grouped, _ in groups:
        parent, grouped_sources = grouped.upstream(store)
        parents.append(parent)
        sources |= grouped_sources
    b.copartition(sources)
    store_builder: Any
    if windows is None:
        store_builder = key_value_store(b, store, m, m.key_serde, m.value_serde)
        getter: Any = StoreValueGetterSupplier(store)
        key_serde, window_info = m.key_serde, None
    elif isinstance(windows, SessionWindows):
        store_builder = session_store(b, store, m, windows.inactivity_gap_ms + windows.grace_period_ms, m.key_serde,
                                      m.value_serde)  # fmt: skip
        getter = SessionStoreValueGetterSupplier(store)
        key_serde = b.bound(SessionWindowedSerde(m.key_serde))
        window_info = ("session", 2 * windows.inactivity_gap_ms + windows.grace_period_ms + 1)
    else:
        sliding = isinstance(windows, SlidingWindows)
        size = windows.time_difference_ms if isinstance(windows, SlidingWindows) else windows.size_ms
        retention = (2 * size if sliding else size) + windows.grace_period_ms
        store_builder = window_store(b, store, m, size, retention, m.key_serde, m.value_serde)
        getter = WindowStoreValueGetterSupplier(store)
        key_serde = b.bound(TimeWindowedSerde(m.key_serde, size))
        window_info = ("time", windows.grace_period_ms)
    given = name_of(named)
    aggregators: list[str] = []
    for index, ((_, aggregator), parent) in enumerate(zip(groups, parents, strict=True)):
        name = b.suffixed_name(given, f"-cogroup-agg-{index}", names.COGROUPKSTREAM_AGGREGATE)
        b.add_processor(name, functools.partial(processor, store, aggregator), (parent,),
                        stores=(store_builder,) if index == 0 else (), connected=() if index == 0 else (store,))  # fmt: skip
        aggregators.append(name)
    merge = b.suffixed_name(given, "-cogroup-merge", names.COGROUPKSTREAM_MERGE)
    b.add_processor(merge, KStreamPassThrough, tuple(aggregators))
    return KTable(b, merge, key_serde, m.value_serde, sources, getter, store, window_info, queryable=m.store_name)
