"""Windows and windowed keys: what window and session stores (and the DSL) hand to users.

Times are epoch milliseconds. `Windowed(key, window)` is the key of a windowed aggregate; its
window is a `TimeWindow` (fixed size, from window stores) or a `SessionWindow` (from session
stores). Both ends are inclusive for sessions; a time window covers `[start, end)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K")

__all__ = ["SessionWindow", "TimeWindow", "Window", "Windowed"]


@dataclass(frozen=True, slots=True)
class Window:
    """A time interval in milliseconds; windows of different kinds never compare equal."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0:
            raise ValueError(f"window start cannot be negative: {self.start}")
        if self.end < self.start:
            raise ValueError(f"window end {self.end} cannot be smaller than its start {self.start}")

    def overlap(self, other: Window) -> bool:
        """True if the two windows share at least one millisecond (as Java's `Window.overlap`)."""
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True, slots=True)
class TimeWindow(Window):
    """A fixed-size window `[start, end)`, as tumbling, hopping and sliding windows make."""


@dataclass(frozen=True, slots=True)
class SessionWindow(Window):
    """A session `[start, end]`: from its first to its last record, both inclusive."""

    def overlap(self, other: Window) -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True, slots=True)
class Windowed(Generic[K]):
    """A key together with the window it was aggregated in."""

    key: K
    window: Window

    def __str__(self) -> str:
        return f"[{self.key}@{self.window.start}/{self.window.end}]"
