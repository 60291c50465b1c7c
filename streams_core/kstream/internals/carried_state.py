"""What a processor keeps outside its stores between records, for runners that rebuild it between batches.

Windowed aggregations keep Java's `observedStreamTime` (and, emitting on window close, the last
close time) in the processor, stream-stream joins their task's stream time, suppress its observed stream time:
the asyncio runtime keeps a processor for its task's life. A runner that rebuilds a task's
processors for each batch (the Spark runner, which keeps the stores' changelog in Spark state;
see docs/spark.md) carries this over: `carried_state()` after a batch, `restore_carried_state()`
after `init()` in the next. Processors with such state implement both (duck-typed).
"""

from __future__ import annotations

from streams_core.kstream.internals.window_close_emitter import NO_TIMESTAMP, WindowCloseEmitter

__all__ = ["ObservedStreamTime"]


class ObservedStreamTime:
    """Mixin of the windowed aggregations: their observed stream time and last close-emission time."""

    _observed: int
    _emitter: WindowCloseEmitter | None

    def carried_state(self) -> tuple[int, int]:
        """(observed stream time, last close time emitted or NO_TIMESTAMP)."""
        return self._observed, NO_TIMESTAMP if self._emitter is None else self._emitter.last_close_time

    def restore_carried_state(self, state: tuple[int, int]) -> None:
        """Resume from `carried_state()` of the same processor in an earlier batch (after `init`)."""
        self._observed, last_close = state
        if self._emitter is not None:
            self._emitter.last_close_time = last_close
