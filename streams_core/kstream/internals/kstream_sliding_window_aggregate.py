"""KStreamSlidingWindowAggregate: sliding-window aggregation, Java's algorithm.

Sliding windows `[start, start + d]` (both ends inclusive, d the time difference) exist for
each distinct set of a key's records within d of each other. A record at t has a left window
`[t - d, t]` and, when later records fall within d after it, a right window `[t + 1, t + 1 + d]`.
Each record therefore: updates the existing windows that contain it, creates its own left
window (seeded with the aggregate of the records before it within d), creates its right window
if records follow it within d, and creates the right window of the previous record if the new
record is the first in it. Records earlier than d (window starts would be negative) go into
the window `[0, d]`.

A window is open while its end is at least the close time (observed stream time - grace):
with grace 0 a record's left window ending at the current stream time is still updated. A
record whose right-most possible window `[t, t + d]` ends before the close time is dropped;
otherwise each closed window it would update counts one dropped record. The store is read
newest window first, as Java does with a store that iterates backwards (all of Java's
built-in stores), which fixes the order of the updates forwarded for one record.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from streams_core.common.change import Change
from streams_core.kstream.internals.kstream_window_aggregate import (
    NO_TIMESTAMP,
    TimestampedWindowAggregation,
    window_aggregate_drop,
)
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.processor.processor import Record
from streams_core.processor.type_vars import VR, K, V
from streams_core.state.windowed import TimeWindow, Windowed

if TYPE_CHECKING:
    from streams_core.kstream.windows import SlidingWindows

__all__ = ["KStreamSlidingWindowAggregate"]

log = logging.getLogger(__name__)


class KStreamSlidingWindowAggregate(TimestampedWindowAggregation[K, V, VR, "SlidingWindows"]):
    """`aggregator(key, value, aggregate)` per key and sliding window (`SlidingWindows`)."""

    def _configure(self, windows: SlidingWindows) -> None:
        self._difference = windows.time_difference_ms

    def _emit_bounds(self, last: int, close_time: int) -> tuple[int, int] | None:
        """Starts of the windows closed since `last` (ends are inclusive, hence the - 1)."""
        d = self._difference
        upper = close_time - d - 1
        if upper < 0:
            return None
        return (0 if last == NO_TIMESTAMP else max(0, last - d)), upper

    def process(self, record: Record[K, V]) -> None:
        key, _, timestamp, _ = record
        if not self._observe(record):
            return
        close_time = self._observed - self._grace
        if timestamp + self._difference < close_time:
            window_aggregate_drop(self, "late: every window closed", record, close_time)
            return
        self._record = record
        if timestamp < self._difference:
            self._process_early(key, timestamp, close_time)
            return
        if self._emitter is not None:
            # Java emits after the updates; the windows emitted (end < close time) and the ones
            # updated (end >= close time) are disjoint, and emitting first keeps the closed
            # windows clear of the store's expiry.
            self._emitter.maybe_emit(record, close_time)
        self._process_reverse(key, timestamp, close_time)

    def _process_reverse(self, key: K, timestamp: int, close_time: int) -> None:
        d = self._difference
        starts: set[int] = set()
        left_agg: ValueAndTimestamp[VR] | None = None
        right_agg: ValueAndTimestamp[VR] | None = None
        left_created = right_created = False
        previous: int | None = None
        windows = self._store.backward_fetch(key, key, max(0, timestamp - 2 * d), timestamp + 1)
        for windowed, stored in list(windows):
            start = windowed.window.start
            starts.add(start)
            end = start + d
            if start == timestamp + 1:
                right_created = True
            elif end > timestamp:
                if right_agg is None:
                    right_agg = stored
                self._update(start, stored, key, close_time)
            elif end == timestamp:
                left_created = True
                self._update(start, stored, key, close_time)
                if stored.timestamp >= timestamp:
                    return
                previous = stored.timestamp
            else:
                left_agg = stored
                previous = stored.timestamp
                break
        if previous is not None:
            previous_right = previous + 1
            if previous_right not in starts and previous_right + d >= timestamp:
                self._update_new(previous_right, key, close_time)
        if not left_created:
            if previous is not None and left_agg is not None and timestamp - d <= previous:
                seed = ValueAndTimestamp(left_agg.value, timestamp)
            else:
                seed = ValueAndTimestamp(self._initializer(), timestamp)
            self._update(timestamp - d, seed, key, close_time, fresh=True)
        if not right_created and right_agg is not None and right_agg.timestamp > timestamp:
            self._create_right_window(key, timestamp, right_agg)

    def _process_early(self, key: K, timestamp: int, close_time: int) -> None:
        starts: set[int] = set()
        combined: ValueAndTimestamp[VR] | None = None
        right_agg: ValueAndTimestamp[VR] | None = None
        right_created = False
        previous: int | None = None
        for windowed, stored in list(self._store.fetch(key, key, 0, timestamp + 1)):
            start = windowed.window.start
            starts.add(start)
            if start == 0:
                combined = stored
                if stored.timestamp < timestamp:
                    previous = stored.timestamp
            elif start <= timestamp:
                right_agg = stored
                self._update(start, stored, key, close_time)
            elif start == timestamp + 1:
                right_created = True
        if right_agg is None and combined is not None and combined.timestamp > timestamp:
            right_agg = combined
        if not right_created and right_agg is not None and right_agg.timestamp > timestamp:
            self._create_right_window(key, timestamp, right_agg)
        if previous is not None and previous + 1 not in starts:
            self._update_new(previous + 1, key, close_time)
        if combined is None:
            self._update_new(0, key, close_time)
        else:
            self._update(0, combined, key, close_time)

    def _create_right_window(self, key: K, timestamp: int, right_agg: ValueAndTimestamp[VR]) -> None:
        start = timestamp + 1
        self._store.put(key, right_agg, start)
        if self._forward is not None:
            window = TimeWindow(start, start + self._difference)
            change = Change(right_agg.value, None)
            self._forward(Record(Windowed(key, window), change, right_agg.timestamp, self._record.headers))

    def _update_new(self, start: int, key: K, close_time: int) -> None:
        """Create the window at `start` from `initializer()` with the record in it."""
        seed = ValueAndTimestamp(self._initializer(), self._record.timestamp)
        self._update(start, seed, key, close_time, fresh=True)

    def _update(self, start: int, stored: ValueAndTimestamp[VR], key: K, close_time: int, fresh: bool = False) -> None:
        """Fold the record into the window at `start` (`stored` is its aggregate, or the seed of a new one)."""
        end = start + self._difference
        record = self._record
        if end < close_time:
            window_aggregate_drop(self, f"window [{start},{end}] closed", record, close_time)
            return
        timestamp = record.timestamp
        new = self._aggregator(key, record.value, stored.value)
        new_timestamp = timestamp if fresh else max(timestamp, stored.timestamp)
        self._store.put(key, ValueAndTimestamp(new, new_timestamp), start)
        if self._forward is not None:
            change = Change(new, None if fresh else stored.value)
            self._forward(Record(Windowed(key, TimeWindow(start, end)), change, new_timestamp, record.headers))
