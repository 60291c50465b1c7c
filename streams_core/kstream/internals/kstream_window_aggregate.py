"""KStreamWindowAggregate: tumbling and hopping window aggregation (Java's KStreamWindowAggregate).

For each record, every window containing its timestamp is updated, unless the window has
closed: a window closes when the processor's observed stream time (the largest timestamp it
has seen) reaches `window end + grace`. Each closed window a record falls in counts one
dropped record (Java's `dropped-records`), even when the record updates other windows.
Updates are forwarded as `Change(new, old)` keyed by `Windowed(key, TimeWindow(start, end))`,
with the largest timestamp in the window; with `EmitStrategy.on_window_close()` nothing is
forwarded until a window closes, then its final value once (WindowCloseEmitter).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, cast

from streams_core.common.change import Change
from streams_core.kstream.emit_strategy import EmitStrategy
from streams_core.kstream.internals.carried_state import ObservedStreamTime
from streams_core.kstream.internals.forwarding import ChangeForwarder
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.kstream.internals.window_close_emitter import (
    NO_TIMESTAMP,
    Bounds,
    EmitContext,
    Fetch,
    WindowCloseEmitter,
)
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.topic_name_extractor import RecordContext
from streams_core.processor.type_vars import VR, K, V
from streams_core.state.window_store import WindowStore
from streams_core.state.windowed import TimeWindow, Windowed

if TYPE_CHECKING:
    from streams_core.kstream.windows import TimeWindows

__all__ = [
    "NO_TIMESTAMP",
    "ON_WINDOW_UPDATE",
    "KStreamWindowAggregate",
    "TimestampedWindowAggregation",
    "WindowedAggregation",
    "init_window_forwarding",
    "window_aggregate_drop",
]

log = logging.getLogger(__name__)

ON_WINDOW_UPDATE = EmitStrategy.on_window_update()


class DroppingAggregation(Protocol):
    """What `window_aggregate_drop` reads and counts on a windowed aggregation."""

    dropped_records: int
    _store_name: str

    @property
    def _context(self) -> RecordContext: ...


def window_aggregate_drop(
    processor: DroppingAggregation, reason: str, record: Record[K, V], close_time: int | None = None
) -> None:
    """Count and log a record a windowed aggregation cannot use."""
    processor.dropped_records += 1
    context = processor._context
    log.debug(
        "%s: skipping a record (%s): key=%r timestamp=%d topic=%s partition=%s offset=%s close time=%s",
        processor._store_name, reason, record.key, record.timestamp, context.topic, context.partition,
        context.offset, close_time,
    )  # fmt: skip


def init_window_forwarding(
    context: ProcessorContext[K, Change[VR]],
    store_name: str,
    store: object,
    emit_strategy: EmitStrategy,
    bounds: Bounds,
    fetch: Fetch,
) -> tuple[Callable[[Record[K, Change[VR]]], None] | None, WindowCloseEmitter | None]:
    """How a windowed aggregation forwards: per update (None when the cache forwards), or the close
    emitter, which keeps its last close time in the task's processor metadata under `store_name`
    (the task's context is its `EmitContext`, as Java casts to its internal context)."""
    if emit_strategy.emits_on_close:
        return None, WindowCloseEmitter(cast(EmitContext, context), store_name, bounds, fetch)
    return ChangeForwarder(context, store).forward, None


def timestamped_windows(store: WindowStore[K, ValueAndTimestamp[VR]]) -> Fetch:
    """The `fetch` of a WindowCloseEmitter over a timestamped window store: windows by start time."""

    def fetch(lower: int, upper: int) -> Iterator[tuple[Windowed[K], VR, int]]:
        return ((windowed, stored.value, stored.timestamp) for windowed, stored in store.fetch_all(lower, upper))

    return fetch


class WindowedAggregation(ObservedStreamTime, Generic[K, V, VR]):
    """What every windowed aggregation holds: its store's name, the user's functions, the grace
    period, the observed stream time and the dropped-record count. The task closes the store."""

    _context: ProcessorContext[Windowed[K], Change[VR]]

    def __init__(
        self,
        store_name: str,
        initializer: Callable[[], VR],
        aggregator: Callable[[K, V, VR], VR],
        emit_strategy: EmitStrategy,
        grace_ms: int,
    ) -> None:
        self._store_name = store_name
        self._initializer = initializer
        self._aggregator = aggregator
        self._emit_strategy = emit_strategy
        self._grace = grace_ms
        self._observed = NO_TIMESTAMP
        self.dropped_records = 0

    def close(self) -> None:
        """The store is closed by the task."""

    def _observe(self, record: Record[K, V]) -> bool:
        """False for a record without key or value (dropped and counted); else advance the
        observed stream time to its timestamp and say True."""
        if record.key is None or record.value is None:
            window_aggregate_drop(self, "None key or value", record)
            return False
        if record.timestamp > self._observed:
            self._observed = record.timestamp
        return True


class GracedWindows(Protocol):
    """Windows with a grace period (`TimeWindows`, `SlidingWindows`)."""

    @property
    def grace_period_ms(self) -> int: ...


WindowsT = TypeVar("WindowsT", bound=GracedWindows)


class TimestampedWindowAggregation(WindowedAggregation[K, V, VR], Generic[K, V, VR, WindowsT]):
    """A windowed aggregation over a timestamped window store (time and sliding windows); a
    subclass reads the sizes it needs from its windows in `_configure`."""

    def __init__(
        self,
        windows: WindowsT,
        store_name: str,
        initializer: Callable[[], VR],
        aggregator: Callable[[K, V, VR], VR],
        emit_strategy: EmitStrategy = ON_WINDOW_UPDATE,
        operation: str = "aggregate",
    ) -> None:
        super().__init__(store_name, initializer, aggregator, emit_strategy, windows.grace_period_ms)
        #: The DSL operator that built it ("count", "reduce" or "aggregate"): what other engines compile.
        self.operation = operation
        self._configure(windows)

    def _configure(self, windows: WindowsT) -> None:
        """Keep what the subclass needs of `windows` (sizes, advance) as attributes."""
        raise NotImplementedError

    def init(self, context: ProcessorContext[Windowed[K], Change[VR]]) -> None:
        view = context.get_state_store(self._store_name)
        self._context = context
        self._store: WindowStore[K, ValueAndTimestamp[VR]] = view.timestamped
        self._forward, self._emitter = init_window_forwarding(
            context, self._store_name, view, self._emit_strategy, self._emit_bounds, timestamped_windows(self._store)
        )

    def _emit_bounds(self, last: int, close_time: int) -> tuple[int, int] | None:
        """Starts of the windows closed since `last` (Java's emitRange bounds), None when there are none."""
        raise NotImplementedError


class KStreamWindowAggregate(TimestampedWindowAggregation[K, V, VR, "TimeWindows"]):
    """`aggregator(key, value, aggregate)` per key and time window (`TimeWindows`)."""

    def _configure(self, windows: TimeWindows) -> None:
        self._size = windows.size_ms
        self._advance = windows.advance_ms

    def _starts(self, timestamp: int) -> range:
        """The starts of the windows containing `timestamp` (Java's `windowsFor`)."""
        advance = self._advance
        first = (max(0, timestamp - self._size + advance) // advance) * advance
        return range(first, timestamp + 1, advance)

    def _emit_bounds(self, last: int, close_time: int) -> tuple[int, int] | None:
        """Starts of the windows closed since `last` (Java's emitRange bounds and shouldRangeFetch)."""
        upper = close_time - self._size
        if upper < 0:
            return None
        if last == NO_TIMESTAMP:
            return 0, upper
        lower = max(0, last - self._size) + 1
        if self._starts(upper) == self._starts(lower - 1):
            return None
        return lower, upper

    def process(self, record: Record[K, V]) -> None:
        key, value, timestamp, headers = record
        if not self._observe(record):
            return
        close_time = self._observed - self._grace
        emitter = self._emitter
        if emitter is not None:
            emitter.maybe_emit(record, close_time)
        size = self._size
        store, forward = self._store, self._forward
        for start in self._starts(timestamp):
            end = start + size
            if end <= close_time:
                window_aggregate_drop(self, f"window [{start},{end}) closed", record, close_time)
            else:
                stored = store.fetch(key, start)
                if stored is None:
                    old = None
                    new = self._aggregator(key, value, self._initializer())
                    new_timestamp = timestamp
                else:
                    old = stored.value
                    new = self._aggregator(key, value, old)
                    new_timestamp = max(timestamp, stored.timestamp)
                store.put(key, ValueAndTimestamp(new, new_timestamp), start)
                if forward is not None:
                    forward(Record(Windowed(key, TimeWindow(start, end)), Change(new, old), new_timestamp, headers))
