"""WindowCloseEmitter: the final results of `EmitStrategy.on_window_close()` (KIP-825).

After each record a windowed aggregation asks it to emit the windows that closed since the
last emission: it fetches them from the store by time range (the bounds per window kind are
Kafka Streams'), forwards each as `Change(value, None)` keyed by its `Windowed` key, with the
window's timestamp and the triggering record's headers, and remembers the close time. Java
throttles this check to once per second of wall-clock time (an internal setting); we check on
every record, as Kafka's own tests do by setting that interval to 0, so results never depend
on the wall clock. The last close time lives in memory: after a restart, closed windows still
in the store may be emitted again (Java keeps it with the committed offsets).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import Any

from streams_core.kstream.internals.change import Change
from streams_core.processor.processor import Record

__all__ = ["NO_TIMESTAMP", "WindowCloseEmitter"]

NO_TIMESTAMP = -1

Bounds = Callable[[int, int], "tuple[int, int] | None"]
"""(last close time, close time) -> the inclusive range to fetch, or None for nothing to emit."""

Fetch = Callable[[int, int], Iterable[tuple[Any, Any, int]]]
"""(lower, upper) -> (windowed key, value, timestamp) of the windows to emit, in order."""


class WindowCloseEmitter:
    """Forwards windows as they close; `bounds` and `fetch` say which, per window kind."""

    __slots__ = ("_bounds", "_fetch", "_forward", "last_close_time")

    def __init__(self, forward: Callable[[Record[Any, Any]], None], bounds: Bounds, fetch: Fetch) -> None:
        self._forward = forward
        self._bounds = bounds
        self._fetch = fetch
        self.last_close_time = NO_TIMESTAMP

    def maybe_emit(self, record: Record[Any, Any], close_time: int, exclude: Container[Any] = ()) -> None:
        """Emit what closed, if the close time moved since the last emission (except `exclude`d keys)."""
        last = self.last_close_time
        if last != NO_TIMESTAMP and last >= close_time:
            return
        bounds = self._bounds(last, close_time)
        if bounds is None:
            return
        forward, headers = self._forward, record.headers
        for windowed, value, timestamp in list(self._fetch(*bounds)):
            if windowed in exclude:
                continue
            forward(Record(windowed, Change(value, None), timestamp, headers))
        self.last_close_time = close_time
