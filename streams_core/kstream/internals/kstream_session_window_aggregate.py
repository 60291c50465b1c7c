"""KStreamSessionWindowAggregate: session-window aggregation (Java's algorithm).

A record at t joins the key's sessions that end no earlier than `t - gap` and start no later
than `t + gap`; they merge into one session with the record (their aggregates combined by the
merger). Merged-away sessions are deleted and retracted downstream (`Change(None, old)`), then
the merged session is forwarded (`Change(new, None)`), each keyed by its `Windowed` key with
the session end as timestamp. A record whose merged session would end before
`observed stream time - grace - gap` is late: dropped and counted. With
`EmitStrategy.on_window_close()` nothing is forwarded until a session closes, then its final
value once, ordered by session end (WindowCloseEmitter).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic

from streams_core.common.change import Change
from streams_core.kstream.emit_strategy import EmitStrategy
from streams_core.kstream.internals.kstream_window_aggregate import (
    ON_WINDOW_UPDATE,
    WindowedAggregation,
    init_window_forwarding,
    window_aggregate_drop,
)
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import VR, K, V
from streams_core.state.session_store import SessionStore
from streams_core.state.windowed import SessionWindow, Windowed

if TYPE_CHECKING:
    from streams_core.kstream.windows import SessionWindows

__all__ = ["KStreamSessionWindowAggregate"]


class KStreamSessionWindowAggregate(WindowedAggregation[K, V, VR]):
    """`aggregator(key, value, agg)` per key and session; `merger(key, agg1, agg2)` joins sessions."""

    def __init__(
        self,
        windows: SessionWindows,
        store_name: str,
        initializer: Callable[[], VR],
        aggregator: Callable[[K, V, VR], VR],
        merger: Callable[[K, VR, VR], VR],
        emit_strategy: EmitStrategy = ON_WINDOW_UPDATE,
    ) -> None:
        super().__init__(store_name, initializer, aggregator, emit_strategy, windows.grace_period_ms)
        self._gap = windows.inactivity_gap_ms
        self._merger = merger

    def init(self, context: ProcessorContext[Windowed[K], Change[VR]]) -> None:
        store: SessionStore[K, VR] = context.get_state_store(self._store_name)
        self._context = context
        self._store = store
        self._forward, self._emitter = init_window_forwarding(
            context,
            self._store_name,
            _SessionEndStamped(store),
            self._emit_strategy,
            self._emit_bounds,
            self._closed_sessions,
        )

    @staticmethod
    def _emit_bounds(last: int, close_time: int) -> tuple[int, int] | None:
        """Ends of the sessions closed since `last` (both inclusive, as Java's)."""
        lower, upper = max(0, last), close_time - 1
        return (lower, upper) if upper >= 0 and upper >= lower else None

    def _closed_sessions(self, lower: int, upper: int) -> Iterator[tuple[Windowed[K], VR, int]]:
        """Sessions of every key ending in [lower, upper], by end (Java's time-ordered session store)."""
        sessions = [s for s in self._store.find_sessions(None, None, lower, upper) if s.key.window.end <= upper]
        sessions.sort(key=lambda session: session.key.window.end)
        return ((windowed, aggregate, windowed.window.end) for windowed, aggregate in sessions)

    def process(self, record: Record[K, V]) -> None:
        key, value, timestamp, headers = record
        if not self._observe(record):
            return
        gap = self._gap
        close_time = self._observed - self._grace - gap
        store = self._store
        merged = list(store.find_sessions(key, timestamp - gap, timestamp + gap))
        aggregate = self._initializer()
        start = end = timestamp
        for session, session_aggregate in merged:
            aggregate = self._merger(key, aggregate, session_aggregate)
            start = min(start, session.window.start)
            end = max(end, session.window.end)
        late = end < close_time
        if self._emitter is not None:
            # Java emits after the update, from a store that keeps closed sessions a while; we
            # emit first (our store drops them at once) and leave out the sessions this record
            # merges away, which is what Java's store holds by then.
            self._emitter.maybe_emit(record, close_time, () if late else {s for s, _ in merged})
        if late:
            window_aggregate_drop(self, "late: its session closed", record, close_time)
            return
        forward = self._forward
        if start != timestamp or end != timestamp:
            for session, session_aggregate in merged:
                store.remove(session)
                if forward is not None:
                    forward(Record(session, Change(None, session_aggregate), session.window.end, headers))
        aggregate = self._aggregator(key, value, aggregate)
        session_key = Windowed(key, SessionWindow(start, end))
        store.put(session_key, aggregate)
        if forward is not None:
            forward(Record(session_key, Change(aggregate, None), end, headers))


class _SessionEndStamped(Generic[K, VR]):
    """The session store as the forwarder sees it: flushed sessions carry their end as timestamp,
    as every update is forwarded without the cache (Java's SessionCacheFlushListener)."""

    __slots__ = ("_store",)

    def __init__(self, store: Any) -> None:  # the task's session store, with its caching layer's set_flush_listener
        self._store = store

    def set_flush_listener(self, listener: Callable[[Windowed[K], VR | None, VR | None, int], None]) -> bool:
        def stamped(session: Windowed[K], new: VR | None, old: VR | None, _timestamp: int) -> None:
            listener(session, new, old, session.window.end)

        return bool(self._store.set_flush_listener(stamped))
