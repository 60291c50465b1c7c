"""WindowCloseEmitter: the final results of `EmitStrategy.on_window_close()` (KIP-825).

After each record a windowed aggregation asks it to emit the windows that closed since the
last emission: it fetches them from the store by time range (the bounds per window kind are
Kafka Streams'), forwards each as `Change(value, None)` keyed by its `Windowed` key, with the
window's timestamp and the triggering record's headers, and remembers the close time. Java
throttles this check to once per second of wall-clock time (an internal setting); we check on
every record, as Kafka's own tests do by setting that interval to 0, so results never depend
on the wall clock. As Java's, it keeps the last close time in the task's processor metadata,
under the store's name: the runtime commits it with the offsets, and the processor of the next
owner of the task (after a restart or a rebalance) starts from it, so no window is emitted twice.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import Any, Protocol

from streams_core.common.change import Change
from streams_core.processor.processor import Record

__all__ = ["NO_TIMESTAMP", "EmitContext", "WindowCloseEmitter"]

NO_TIMESTAMP = -1

Bounds = Callable[[int, int], "tuple[int, int] | None"]
"""(last close time, close time) -> the inclusive range to fetch, or None for nothing to emit."""

Fetch = Callable[[int, int], Iterable[tuple[Any, Any, int]]]
"""(lower, upper) -> (windowed key, value, timestamp) of the windows to emit, in order."""


class EmitContext(Protocol):
    """What the emitter uses of the task's processor context (Java's `InternalProcessorContext`)."""

    def forward(self, record: Record[Any, Any], child_name: str | None = None) -> None: ...

    def add_processor_metadata_key_value(self, key: str, value: int) -> None: ...

    def processor_metadata_for_key(self, key: str) -> int | None: ...


class WindowCloseEmitter:
    """Forwards windows as they close; `bounds` and `fetch` say which, per window kind. `key` (the
    store's name) names its last close time in the processor metadata, read back at creation."""

    __slots__ = ("_bounds", "_context", "_fetch", "_key", "last_close_time")

    def __init__(self, context: EmitContext, key: str, bounds: Bounds, fetch: Fetch) -> None:
        self._context = context
        self._key = key
        self._bounds = bounds
        self._fetch = fetch
        committed = context.processor_metadata_for_key(key)
        self.last_close_time = NO_TIMESTAMP if committed is None else committed

    def maybe_emit(self, record: Record[Any, Any], close_time: int, exclude: Container[Any] = ()) -> None:
        """Emit what closed, if the close time moved since the last emission (except `exclude`d keys)."""
        last = self.last_close_time
        if last != NO_TIMESTAMP and last >= close_time:
            return
        bounds = self._bounds(last, close_time)
        if bounds is None:
            return
        forward, headers = self._context.forward, record.headers
        for windowed, value, timestamp in list(self._fetch(*bounds)):
            if windowed in exclude:
                continue
            forward(Record(windowed, Change(value, None), timestamp, headers))
        self.last_close_time = close_time
        self._context.add_processor_metadata_key_value(self._key, close_time)
