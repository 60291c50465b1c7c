"""One Kafka Streams task's tumbling or hopping window aggregation, without Spark: `TaskWindows`.

KStreamWindowAggregate's algorithm over the task's window store and stream time, with the user's
initializer and aggregator called per record and window in Kafka Streams' order, and the record
cache's flush per micro-batch (the micro-batch being the commit). The native per-task stage
(native_session_count.py's `SessionTask`) runs it per task, as it runs `TaskSessions`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any

from streams_core.spark.task_sessions import NO_TIME, AggregateFunctions

__all__ = ["TaskWindows"]

log = logging.getLogger(__name__)

#: A changed window in a micro-batch: [its stored value, or None once removed; its timestamp; whether the store had it before].
_Dirty = list[Any]


class TaskWindows:
    """One Kafka Streams task's windows: (key, window start) -> [stored value, timestamp] (the
    window's largest record timestamp, as Kafka Streams' timestamped window store keeps it)."""

    #: The changelog rows' columns in Spark state, before the value.
    COLUMNS = ("key", "start", "ts")

    def __init__(self, size: int, advance: int, grace: int, functions: AggregateFunctions) -> None:
        self.size, self.advance, self.grace = size, advance, grace
        self.functions = functions
        self.windows: dict[tuple[Any, int], list[Any]] = {}
        #: The task's stream time: the largest timestamp the aggregation received.
        self.observed = NO_TIME
        #: Unused (a session store's stream time); kept so both steps have the same state row.
        self.stored = NO_TIME
        #: Records dropped as late, once per closed window they fall in (Kafka Streams' dropped-records).
        self.dropped = 0
        #: The stream time at the last `expire()`.
        self._expired_at = NO_TIME

    def live(self) -> int:
        """The number of windows the store holds."""
        return len(self.windows)

    def load(self, rows: Iterable[tuple[Any, int, int, Any]]) -> None:
        """The store from its changelog rows (key, start, timestamp, value or None: removed), in order."""
        windows = self.windows
        for key, start, ts, value in rows:
            if value is None:
                windows.pop((key, start), None)
            else:
                windows[key, start] = [value, ts]

    def expire(self) -> None:
        """Drop the closed windows: no record reaches them again (every window still open is within
        the store's retention, at least size + grace)."""
        self._expired_at = self.observed
        closed = self.observed - self.grace - self.size
        for slot in [slot for slot in self.windows if slot[1] <= closed]:
            del self.windows[slot]

    def process(self, keys: Sequence[Any], stamps: Sequence[int], values: Sequence[Any] | None = None,
                user_keys: Sequence[Any] | None = None) -> dict[tuple[Any, int], _Dirty]:  # fmt: skip
        """The records (in the task's order) through the aggregation; the windows they changed, in the
        record cache's order (last write last): (key, start) -> [stored value or None, timestamp, stored before].

        Per record, as Kafka Streams: for each window containing it (by start), closed (end <= stream
        time - grace): dropped; else `aggregator(key, value, stored aggregate or initializer())`."""
        size, advance, grace = self.size, self.advance, self.grace
        functions = self.functions
        initializer, aggregator = functions.initializer, functions.aggregator
        write, read = functions.serialize, functions.deserialize
        windows = self.windows
        dirty: dict[tuple[Any, int], _Dirty] = {}
        pop = dirty.pop
        observed, dropped = self.observed, self.dropped
        records = zip(keys, keys if user_keys is None else user_keys, repeat(None, len(keys)) if values is None else values,
                      stamps, strict=True)  # fmt: skip
        for key, user_key, value, t in records:
            if t > observed:
                observed = t
            close = observed - grace
            for start in range((max(0, t - size + advance) // advance) * advance, t + 1, advance):
                if start + size <= close:
                    dropped += 1
                    log.debug("window aggregation: skipping a record for closed window [%d,%d): key=%r timestamp=%d "
                              "stream time=%d", start, start + size, key, t, observed)  # fmt: skip
                    continue
                slot = (key, start)
                stored = windows.get(slot)
                if stored is None:
                    aggregate, ts = aggregator(user_key, value, initializer()), t
                else:
                    aggregate = aggregator(user_key, value, stored[0] if read is None else read(stored[0]))
                    ts = t if t > stored[1] else stored[1]
                data = aggregate if write is None else write(aggregate)
                entry = pop(slot, None)
                if entry is None:
                    entry = [data, ts, stored is not None]
                else:
                    entry[0], entry[1] = data, ts
                dirty[slot] = entry
                if data is None:
                    windows.pop(slot, None)
                else:
                    windows[slot] = [data, ts]
        self.observed, self.stored, self.dropped = observed, observed, dropped
        if observed - self._expired_at > size + grace:
            self.expire()
        return dirty

    @staticmethod
    def flushed(dirty: Mapping[tuple[Any, int], _Dirty]) -> list[tuple[Any, int, int, Any]]:
        """What the cache's flush forwards: (key, start, timestamp, value) per changed window; a removed
        one's tombstone only if the store had it before the micro-batch."""
        return [(key, start, ts, v) for (key, start), (v, ts, below) in dirty.items() if v is not None or below]

    def changes(self, dirty: Mapping[tuple[Any, int], _Dirty]) -> list[tuple[Any, int, int, Any]]:
        """The micro-batch's changelog rows (key, start, timestamp, value or None)."""
        return [(key, start, ts, v) for (key, start), (v, ts, below) in dirty.items() if v is not None or below]

    def rows(self) -> list[tuple[Any, int, int, Any]]:
        """The live windows as changelog rows."""
        return [(key, start, ts, v) for (key, start), (v, ts) in self.windows.items()]
