"""KStreamSlidingWindowAggregate: sliding-window aggregation, Java's algorithm.

Sliding windows `[start, start + d]` (both ends inclusive, d the time difference) exist for
each distinct set of a key's records within d of each other. A record at t has a left window
`[t - d, t]` and, when later records fall within d after it, a right window `[t + 1, t + 1 + d]`.
Each record therefore: updates the existing windows that contain it, creates its own left
window (seeded with the aggregate of the records before it within d), creates its right window
if records follow it within d, and creates the right window of the previous record if the new
record is the first in it. Records earlier than d (window starts would be negative) go into
the window `[0, d]`. Late records (all windows closed) are dropped and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streams_core.kstream.internals.change import Change
from streams_core.kstream.internals.forwarding import ChangeForwarder
from streams_core.kstream.internals.kstream_window_aggregate import NO_TIMESTAMP, window_aggregate_drop
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.processor.processor import Record
from streams_core.state.windowed import TimeWindow, Windowed

__all__ = ["KStreamSlidingWindowAggregate"]

log = logging.getLogger(__name__)


class KStreamSlidingWindowAggregate:
    """`aggregator(key, value, aggregate)` per key and sliding window (`SlidingWindows`)."""

    def __init__(
        self,
        windows: Any,
        store_name: str,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
    ) -> None:
        self._difference = windows.time_difference_ms
        self._grace = windows.grace_period_ms
        self._store_name = store_name
        self._initializer = initializer
        self._aggregator = aggregator
        self._observed = NO_TIMESTAMP
        self.dropped_records = 0

    def init(self, context: Any) -> None:
        view = context.get_state_store(self._store_name)
        self._context = context
        self._store = view.timestamped
        self._forwarder = ChangeForwarder(context, view)
        self._forward = self._forwarder.forward

    def close(self) -> None:
        """The store is closed by the task."""

    def process(self, record: Record[Any, Any]) -> None:
        key, value, timestamp, _ = record
        if key is None or value is None:
            window_aggregate_drop(self, "None key or value", record)
            return
        if timestamp > self._observed:
            self._observed = timestamp
        close_time = self._observed - self._grace
        if timestamp + 1 + self._difference <= close_time:
            window_aggregate_drop(self, "late: every window closed", record, close_time)
            return
        self._record = record
        if timestamp < self._difference:
            self._process_early(key, value, timestamp, close_time)
        else:
            self._process_in_order(key, value, timestamp, close_time)

    def _process_in_order(self, key: Any, value: Any, timestamp: int, close_time: int) -> None:
        d = self._difference
        starts: set[int] = set()
        left_agg: ValueAndTimestamp[Any] | None = None
        right_agg: ValueAndTimestamp[Any] | None = None
        left_created = right_created = False
        previous: int | None = None
        for windowed, stored in list(self._store.fetch(key, key, max(0, timestamp - 2 * d), timestamp + 1)):
            start = windowed.window.start
            starts.add(start)
            end = start + d
            if end < timestamp:
                left_agg = stored
                previous = stored.timestamp
            elif end == timestamp:
                left_created = True
                if stored.timestamp < timestamp:
                    previous = stored.timestamp
                self._update(start, stored, key, value, timestamp, close_time)
            elif start <= timestamp:
                right_agg = stored
                self._update(start, stored, key, value, timestamp, close_time)
            elif start == timestamp + 1:
                right_created = True
        if previous is not None:
            previous_right = previous + 1
            if previous_right not in starts and previous_right + d >= timestamp:
                self._update_new(previous_right, key, value, timestamp, close_time)
        if not left_created:
            if previous is not None and timestamp - d <= previous:
                seed = ValueAndTimestamp(left_agg.value, timestamp)  # type: ignore[union-attr]
            else:
                seed = ValueAndTimestamp(self._initializer(), timestamp)
            self._update(timestamp - d, seed, key, value, timestamp, close_time, fresh=True)
        if not right_created and right_agg is not None and right_agg.timestamp > timestamp:
            self._create_right_window(key, timestamp, right_agg)

    def _process_early(self, key: Any, value: Any, timestamp: int, close_time: int) -> None:
        starts: set[int] = set()
        combined: tuple[int, ValueAndTimestamp[Any]] | None = None
        right_agg: ValueAndTimestamp[Any] | None = None
        right_created = False
        previous: int | None = None
        for windowed, stored in list(self._store.fetch(key, key, 0, timestamp + 1)):
            start = windowed.window.start
            starts.add(start)
            if start == 0:
                combined = (start, stored)
                if stored.timestamp < timestamp:
                    previous = stored.timestamp
            elif start <= timestamp:
                right_agg = stored
                self._update(start, stored, key, value, timestamp, close_time)
            elif start == timestamp + 1:
                right_created = True
        if right_agg is None and combined is not None and combined[1].timestamp > timestamp:
            right_agg = combined[1]
        if not right_created and right_agg is not None and right_agg.timestamp > timestamp:
            self._create_right_window(key, timestamp, right_agg)
        if previous is not None and previous + 1 not in starts:
            self._update_new(previous + 1, key, value, timestamp, close_time)
        if combined is None:
            self._update_new(0, key, value, timestamp, close_time)
        else:
            self._update(0, combined[1], key, value, timestamp, close_time)

    def _create_right_window(self, key: Any, timestamp: int, right_agg: ValueAndTimestamp[Any]) -> None:
        start = timestamp + 1
        self._store.put(key, right_agg, start)
        if self._forward is not None:
            window = TimeWindow(start, start + self._difference)
            change = Change(right_agg.value, None)
            self._forward(Record(Windowed(key, window), change, right_agg.timestamp, self._record.headers))

    def _update_new(self, start: int, key: Any, value: Any, timestamp: int, close_time: int) -> None:
        """Create the window at `start` from `initializer()` with the record in it."""
        self._update(start, ValueAndTimestamp(self._initializer(), timestamp), key, value, timestamp, close_time, True)

    def _update(
        self,
        start: int,
        stored: ValueAndTimestamp[Any],
        key: Any,
        value: Any,
        timestamp: int,
        close_time: int,
        fresh: bool = False,
    ) -> None:
        """Fold the record into the window at `start` (`stored` is its aggregate, or the seed of a new one)."""
        end = start + self._difference
        if end <= close_time:
            log.debug("%s: window [%d,%d] of key %r closed at %d", self._store_name, start, end, key, close_time)
            return
        old = None if fresh else stored.value
        new = self._aggregator(key, value, stored.value)
        new_timestamp = timestamp if fresh else max(timestamp, stored.timestamp)
        self._store.put(key, ValueAndTimestamp(new, new_timestamp), start)
        if self._forward is not None:
            window = TimeWindow(start, end)
            self._forward(Record(Windowed(key, window), Change(new, old), new_timestamp, self._record.headers))
