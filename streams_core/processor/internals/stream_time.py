"""StreamTime: a task's stream time, held in one place (also the cell of a partition's time).

The runtime's partition group advances it as records are polled (the highest timestamp taken);
the task processor reads it for stream-time punctuation and `ProcessorContext.current_stream_time_ms`.
A record queue's `extracted_time` is one too: the partition time its timestamp extractor receives.
"""

from __future__ import annotations

__all__ = ["UNKNOWN_TIME", "StreamTime"]

UNKNOWN_TIME = -1
"""Stream time before the first record."""


class StreamTime:
    """A mutable cell with the stream time of one task; only ever moves forward."""

    __slots__ = ("value",)

    def __init__(self, value: int = UNKNOWN_TIME) -> None:
        self.value = value

    def advance(self, timestamp: int) -> None:
        """Raise stream time to `timestamp` if it is later (stream time never decreases)."""
        if timestamp > self.value:
            self.value = timestamp

    def reset(self) -> None:
        self.value = UNKNOWN_TIME

    def __repr__(self) -> str:
        return f"StreamTime({self.value})"
