"""KStreamWindowAggregate: tumbling and hopping window aggregation (Java's KStreamWindowAggregate).

For each record, every window containing its timestamp is updated, unless the window has
closed: a window closes when the processor's observed stream time (the largest timestamp it
has seen) reaches `window end + grace`. A record whose windows are all closed is late: it is
dropped and counted. Updates are forwarded as `Change(new, old)` keyed by
`Windowed(key, TimeWindow(start, end))`, with the largest timestamp in the window.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streams_core.kstream.internals.change import Change
from streams_core.kstream.internals.forwarding import ChangeForwarder
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.processor.processor import Record
from streams_core.state.windowed import TimeWindow, Windowed

__all__ = ["KStreamWindowAggregate", "window_aggregate_drop"]

log = logging.getLogger(__name__)

NO_TIMESTAMP = -1


def window_aggregate_drop(processor: Any, reason: str, record: Record[Any, Any], close_time: int | None = None) -> None:
    """Count and log a record a windowed aggregation cannot use."""
    processor.dropped_records += 1
    context = processor._context
    log.debug(
        "%s: skipping a record (%s): key=%r timestamp=%d topic=%s partition=%s offset=%s close time=%s",
        processor._store_name, reason, record.key, record.timestamp, context.topic, context.partition,
        context.offset, close_time,
    )  # fmt: skip


class KStreamWindowAggregate:
    """`aggregator(key, value, aggregate)` per key and time window (`TimeWindows`)."""

    def __init__(
        self,
        windows: Any,
        store_name: str,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
    ) -> None:
        self._size = windows.size_ms
        self._advance = windows.advance_ms
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

    def process(self, record: Record[Any, Any]) -> None:
        key, value, timestamp, headers = record
        if key is None or value is None:
            window_aggregate_drop(self, "None key or value", record)
            return
        if timestamp > self._observed:
            self._observed = timestamp
        close_time = self._observed - self._grace
        size, advance = self._size, self._advance
        store, forward = self._store, self._forward
        start = (max(0, timestamp - size + advance) // advance) * advance
        updated = False
        while start <= timestamp:
            end = start + size
            if end > close_time:
                updated = True
                stored = store.fetch(key, start)
                if stored is None:
                    old = None
                    new = self._aggregator(key, value, self._initializer())
                    new_timestamp = timestamp
                else:
                    old = stored.value
                    new = self._aggregator(key, value, old)
                    new_timestamp = max(timestamp, stored.timestamp)
                store.put(key, ValueAndTimestamp(new, new_timestamp), start)
                if forward is not None:
                    forward(Record(Windowed(key, TimeWindow(start, end)), Change(new, old), new_timestamp, headers))
            start += advance
        if not updated:
            window_aggregate_drop(self, "late: every window closed", record, close_time)

    def close(self) -> None:
        """The store is closed by the task."""
