"""The stream time a processor keeps outside its stores, for runners that rebuild it between batches.

Windowed aggregations keep Java's `observedStreamTime` (and, emitting on window close, the last
close time) in the processor, not in a store: the asyncio runtime keeps the processor for the
task's life. A runner that rebuilds a task's processors for each batch (the Spark runner saves the
stores' changelog in Spark state, see docs/spark.md) carries this over with
`stream_time_state()` and `restore_stream_time_state()`.
"""

from __future__ import annotations

from streams_core.kstream.internals.window_close_emitter import NO_TIMESTAMP, WindowCloseEmitter

__all__ = ["ObservedStreamTime"]


class ObservedStreamTime:
    """Mixin of the windowed aggregations: their observed stream time and last close-emission time."""

    _observed: int
    _emitter: WindowCloseEmitter | None

    def stream_time_state(self) -> tuple[int, int]:
        """(observed stream time, last close time emitted or NO_TIMESTAMP)."""
        return self._observed, NO_TIMESTAMP if self._emitter is None else self._emitter.last_close_time

    def restore_stream_time_state(self, state: tuple[int, int]) -> None:
        """Resume from `stream_time_state()` of the same processor in an earlier batch (after `init`)."""
        self._observed, last_close = state
        if self._emitter is not None:
            self._emitter.last_close_time = last_close
