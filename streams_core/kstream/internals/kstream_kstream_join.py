"""KStream-KStream windowed joins: KStreamJoinWindow and KStreamKStreamJoin (Java's algorithm).

Each side's records go through a `KStreamJoinWindow`, which forwards them to that side's join
processor and keeps them in the side's window store (retention: window size + grace,
duplicates kept). A join processor looks a record up in the *other* side's store: a left
record at t meets right records in `[t - before, t + after]`, a right record left records in
`[t - after, t + before]`. Each match forwards `joiner(key, left, right)` at the later
timestamp of the two.

Left and outer joins (the spurious-result fix of Kafka Streams 3.1): a record without a match
waits in the shared outer-join store; when stream time (the largest timestamp either side has
seen, tracked per task by `TimeTracker`) passes its window's end plus grace, it is emitted
with None for the missing side, oldest first. A later match removes it from the store. A
record already past that point when it arrives (out of order) is emitted at once. An emitted
unmatched record carries the headers of the record whose arrival closed its window. Records with
a None value are dropped and counted; a None key is dropped too, except on an outer side where
it is emitted at once with None (KIP-962).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic

from streams_core.common.headers import Headers
from streams_core.common.store import KeyValueStore
from streams_core.common.task_id import TaskId
from streams_core.kstream.internals.outer_join_store import SideValues, TimestampedKeyAndJoinSide
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import VO, VR, K, V
from streams_core.state.window_store import WindowStore

if TYPE_CHECKING:
    from streams_core.kstream.windows import JoinWindows

__all__ = ["KStreamJoinWindow", "KStreamKStreamJoin", "TimeTracker", "TimeTrackers"]

log = logging.getLogger(__name__)

_MAX_TIME = sys.maxsize


class TimeTracker:
    """Stream time of one task's join (both sides) and the oldest unmatched record's time."""

    __slots__ = ("min_time", "stream_time")

    def __init__(self) -> None:
        self.stream_time = -1
        self.min_time = _MAX_TIME


class TimeTrackers:
    """One `TimeTracker` per task, shared by the task's two join processors."""

    def __init__(self) -> None:
        self._trackers: dict[TaskId, TimeTracker] = {}

    def get(self, task_id: TaskId) -> TimeTracker:
        tracker = self._trackers.get(task_id)
        if tracker is None:
            tracker = self._trackers[task_id] = TimeTracker()
        return tracker

    def remove(self, task_id: TaskId) -> None:
        self._trackers.pop(task_id, None)


class KStreamJoinWindow(Generic[K, V]):
    """Forwards each record to its side's join processor, then keeps it in the side's window store."""

    __slots__ = ("_forward", "_store", "_store_name")

    def __init__(self, store_name: str) -> None:
        self._store_name = store_name

    def init(self, context: ProcessorContext[K, V]) -> None:
        self._store: WindowStore[K, V] = context.get_state_store(self._store_name)
        self._forward = context.forward

    def process(self, record: Record[K, V]) -> None:
        self._forward(record)
        key, value, timestamp, _ = record
        if key is not None and value is not None:
            self._store.put(key, value, timestamp)

    def close(self) -> None:
        """The store is closed by the task."""


class KStreamKStreamJoin(Generic[K, V, VO, VR]):
    """One side of a windowed join; `is_left` says which (the joiner always gets (key, left, right)).

    V is this side's values, VO the other's, so the joiner's value parameters are loose.
    """

    def __init__(
        self,
        is_left: bool,
        other_store_name: str,
        windows: JoinWindows,
        joiner: Callable[[K, V | VO | None, V | VO | None], VR],
        outer: bool,
        trackers: TimeTrackers,
        outer_store_name: str | None,
    ) -> None:
        self._is_left = is_left
        self._windows = windows
        self._other_store_name = other_store_name
        self._before = windows.before_ms if is_left else windows.after_ms
        self._after = windows.after_ms if is_left else windows.before_ms
        self._windows_after = windows.after_ms
        self._windows_before = windows.before_ms
        self._grace = windows.grace_period_ms
        self._joiner = joiner
        self._outer = outer
        self._trackers = trackers
        self._outer_store_name = outer_store_name
        self.dropped_records = 0

    @property
    def is_left(self) -> bool:
        """The left side's processor (the joiner gets this side's value first)."""
        return self._is_left

    @property
    def outer(self) -> bool:
        """This side's unmatched records are emitted (a left join's left side, both sides of an outer join)."""
        return self._outer

    @property
    def windows(self) -> JoinWindows:
        return self._windows

    @property
    def joiner(self) -> Callable[[K, V | VO | None, V | VO | None], VR]:
        """The joiner, taking (key, left value, right value)."""
        return self._joiner

    def init(self, context: ProcessorContext[K, VR]) -> None:
        self._context = context
        self._forward = context.forward
        self._other: WindowStore[K, VO] = context.get_state_store(self._other_store_name)
        self._tracker = self._trackers.get(context.task_id)
        self._outer_store: KeyValueStore[TimestampedKeyAndJoinSide, SideValues] | None = None if self._outer_store_name is None else context.get_state_store(self._outer_store_name)

    def close(self) -> None:
        self._trackers.remove(self._context.task_id)

    def carried_state(self) -> tuple[int, int]:
        """The task's join stream time and oldest unmatched time, for a runner that rebuilds the
        processor between batches (see carried_state.py)."""
        return self._tracker.stream_time, self._tracker.min_time

    def restore_carried_state(self, state: tuple[int, int]) -> None:
        self._tracker.stream_time, self._tracker.min_time = state

    def _join(self, key: K, this: V | None, other: VO | None) -> VR:
        return self._joiner(key, this, other) if self._is_left else self._joiner(key, other, this)

    def process(self, record: Record[K, V]) -> None:
        key, value, timestamp, headers = record
        tracker = self._tracker
        if timestamp > tracker.stream_time:
            tracker.stream_time = timestamp
        if value is None or key is None:
            if self._outer and value is not None:
                self._forward(record.with_value(self._join(key, value, None)))
                return
            self.dropped_records += 1
            log.debug("join: skipping a record with a None key or value at offset %s", self._context.offset)
            return
        outer_store = self._outer_store
        if outer_store is not None and timestamp == tracker.stream_time:
            self._emit_non_joined(outer_store, headers)
        time_from = max(0, timestamp - self._before)
        time_to = max(0, timestamp + self._after)
        matched = False
        forward = self._forward
        for other_timestamp, other_value in list(self._other.fetch(key, time_from, time_to)):
            matched = True
            if outer_store is not None:
                outer_store.delete(TimestampedKeyAndJoinSide(other_timestamp, not self._is_left, key))
            forward(Record(key, self._join(key, value, other_value), max(timestamp, other_timestamp), headers))
        if matched or not self._outer:
            return
        if outer_store is None or time_to < tracker.stream_time:
            forward(record.with_value(self._join(key, value, None)))
            return
        if timestamp < tracker.min_time:
            tracker.min_time = timestamp
        store_key = TimestampedKeyAndJoinSide(timestamp, self._is_left, key)
        waiting = outer_store.get(store_key)
        values = (value,) if waiting is None else (*waiting.values, value)
        outer_store.put(store_key, SideValues(self._is_left, values))

    def _emit_non_joined(self, store: KeyValueStore[TimestampedKeyAndJoinSide, SideValues], headers: Headers) -> None:
        """Emit, oldest first, the unmatched records whose window and grace have passed, with the
        headers of the record whose arrival closed them (Java forwards the current record)."""
        tracker = self._tracker
        grace = self._grace
        if tracker.min_time + min(self._windows_after, self._windows_before) + grace >= tracker.stream_time:
            return
        tracker.min_time = _MAX_TIME
        left_open = right_open = False
        emitted: list[TimestampedKeyAndJoinSide] = []
        joiner, forward = self._joiner, self._forward
        for store_key, waiting in store.all():
            timestamp, is_left, key = store_key
            tracker.min_time = timestamp
            if left_open and right_open:
                break
            look_back = self._windows_after if is_left else self._windows_before
            if timestamp + look_back + grace >= tracker.stream_time:
                if is_left:
                    left_open = True
                else:
                    right_open = True
                continue
            for value in waiting.values:
                joined = joiner(key, value, None) if is_left else joiner(key, None, value)
                forward(Record(key, joined, timestamp, headers))
            emitted.append(store_key)
        for store_key in emitted:
            store.delete(store_key)
