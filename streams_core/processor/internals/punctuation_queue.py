"""PunctuationQueue: a task's scheduled punctuations of one type, ordered by their next time.

Semantics are Kafka Streams': `maybe_punctuate(now)` fires every schedule whose time is <= now,
each at most once per call and with `now` as its argument; the next time is the first interval
boundary (counted from the schedule's first time) after `now`, so a gap of several intervals
gives one punctuation, not a burst. A schedule cancelled before or during its callback is
dropped. Stream-time schedules start at 0 (they fire on the first record, then at each interval
boundary); wall-clock schedules start at now + interval.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from itertools import count
from typing import Any

from streams_core.processor.processor import PunctuationType, Punctuator

__all__ = ["PunctuationQueue", "PunctuationSchedule"]


class PunctuationSchedule:
    """One scheduled punctuation: the node it runs for, its callback, interval and next time.

    It is also the `Cancellable` handed to the processor.
    """

    __slots__ = ("cancelled", "interval_ms", "next_time", "node", "punctuation_type", "punctuator")

    def __init__(
        self,
        node: Any,
        punctuator: Punctuator,
        interval_ms: int,
        punctuation_type: PunctuationType,
        first_time: int,
    ) -> None:
        self.node = node
        self.punctuator = punctuator
        self.interval_ms = interval_ms
        self.punctuation_type = punctuation_type
        self.next_time = first_time
        self.cancelled = False

    def cancel(self) -> None:
        """Stop this punctuation; takes effect immediately, even from inside its own callback."""
        self.cancelled = True

    def advance(self, now: int) -> None:
        """Move `next_time` to the first interval boundary after `now` (Java's `next(now)`)."""
        next_time = self.next_time + self.interval_ms
        if now >= next_time:
            missed = (now - self.next_time) // self.interval_ms
            next_time = self.next_time + (missed + 1) * self.interval_ms
        self.next_time = next_time

    def __repr__(self) -> str:
        state = ", cancelled" if self.cancelled else ""
        node = getattr(self.node, "name", self.node)
        return (
            f"PunctuationSchedule({node}, {self.punctuation_type.name}, every {self.interval_ms} ms, "
            f"next at {self.next_time}{state})"
        )


PunctuateCallback = Callable[[PunctuationSchedule, int], None]
"""Runs one schedule's punctuator at a time; the task sets up the processor context around it."""


NEVER = 2**63 - 1
"""A `due` time no stream or wall-clock time reaches."""


class PunctuationQueue:
    """A min-heap of schedules by next time (ties in scheduling order)."""

    __slots__ = ("_heap", "_sequence", "due")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, PunctuationSchedule]] = []
        self._sequence = count()
        self.due = NEVER
        """The earliest time a schedule may be due (NEVER when none): a per-record check costs one compare."""

    def __len__(self) -> int:
        return sum(1 for _, _, schedule in self._heap if not schedule.cancelled)

    def schedule(self, schedule: PunctuationSchedule) -> PunctuationSchedule:
        """Add a schedule; returns it (it is its own Cancellable)."""
        heapq.heappush(self._heap, (schedule.next_time, next(self._sequence), schedule))
        self.due = self._heap[0][0]
        return schedule

    @property
    def next_time(self) -> int | None:
        """When the earliest live schedule is due, or None when there is none."""
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def maybe_punctuate(self, now: int, punctuate: PunctuateCallback) -> bool:
        """Fire every schedule due at `now`; True if at least one fired."""
        heap = self._heap
        punctuated = False
        while heap and heap[0][0] <= now:
            schedule = heapq.heappop(heap)[2]
            if schedule.cancelled:
                continue
            punctuate(schedule, now)
            punctuated = True
            if not schedule.cancelled:
                schedule.advance(now)
                heapq.heappush(heap, (schedule.next_time, next(self._sequence), schedule))
        self.due = heap[0][0] if heap else NEVER
        return punctuated

    def clear(self) -> None:
        """Drop every schedule (the task is closing)."""
        self._heap.clear()
        self.due = NEVER
