"""One Kafka Streams task's session aggregation over its records, without Spark: `TaskSessions`.

KStreamSessionWindowAggregate's algorithm over the task's session store (Kafka Streams' rule of
retention) and stream time, with the user's initializer, aggregator and session merger called per
record in Kafka Streams' order, and the record cache's flush per micro-batch (the micro-batch
being the commit). The native session stage (native_session_count.py) runs it per task; a count
is the aggregation with `COUNT`'s functions, its values kept as ints.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from streams_core.kstream.internals.functions import count_add, zero

__all__ = ["COUNT", "NO_TIME", "AggregateFunctions", "TaskSessions"]

log = logging.getLogger(__name__)

#: A stream time before any record.
NO_TIME = -1


def _sum(key: object, one: int, two: int) -> int:
    return one + two


@dataclass(frozen=True)
class AggregateFunctions:
    """The aggregation's user functions (a session aggregation's merger; None for time windows),
    and how its store holds the values: Kafka Streams' store
    holds the value serde's bytes (`serialize`, `deserialize`: the store's serde bound to its
    changelog topic); without them the values are kept as they are (the count's ints, whose round
    trip through the Long serde is the identity)."""

    initializer: Callable[[], Any]
    aggregator: Callable[[Any, Any, Any], Any]
    merger: Callable[[Any, Any, Any], Any] | None
    serialize: Callable[[Any], bytes | None] | None = None
    deserialize: Callable[[bytes], Any] | None = None


#: `count()`'s functions (the DSL's: 0, one more, the sum of two sessions' counts).
COUNT = AggregateFunctions(zero, count_add, _sum)

#: A changed session in a micro-batch: [its stored value, or None once removed; whether the store had it before].
_Dirty = list[Any]


class TaskSessions:
    """One Kafka Streams task's sessions: KStreamSessionWindowAggregate's algorithm over its
    session store and stream time, and the record cache's flush per micro-batch.

    `sessions` is the store: key (its serde bytes, or the string for String keys) -> its sessions
    [start, end, stored value], by end."""

    #: The changelog rows' columns in Spark state, before the value.
    COLUMNS = ("key", "start", "end")

    def __init__(self, gap: int, grace: int, retention: int, functions: AggregateFunctions = COUNT) -> None:
        self.gap, self.grace, self.retention = gap, grace, retention
        self.functions = functions
        #: key -> its sessions [start, end, value], in the order they were stored.
        self.sessions: dict[Any, list[list[Any]]] = {}
        #: The task's stream time: the largest timestamp the aggregation received.
        self.observed = NO_TIME
        #: The store's stream time: the largest session end it was given.
        self.stored = NO_TIME
        #: Records dropped as late (Kafka Streams' dropped-records).
        self.dropped = 0
        #: The store's stream time at the last `expire()`.
        self._expired_at = NO_TIME

    def live(self) -> int:
        """The number of sessions the store holds."""
        return sum(len(s) for s in self.sessions.values())

    def load(self, rows: Iterable[tuple[Any, int, int, Any]]) -> None:
        """The store from its changelog rows (key, start, end, value or None: removed), in order."""
        sessions = self.sessions
        for key, start, end, value in rows:
            found = sessions.setdefault(key, [])
            found[:] = [s for s in found if s[0] != start or s[1] != end]
            if value is not None:
                found.append([start, end, value])
                found.sort(key=_by_end)
                self.stored = max(self.stored, end)
            elif not found:
                del sessions[key]

    def expire(self) -> None:
        """Drop the sessions past retention (the store no longer returns them)."""
        self._expired_at = self.stored
        cutoff = self.stored - self.retention
        for key in [k for k, found in self.sessions.items() if any(s[1] <= cutoff for s in found)]:
            kept = [s for s in self.sessions[key] if s[1] > cutoff]
            if kept:
                self.sessions[key] = kept
            else:
                del self.sessions[key]

    def process(self, keys: Sequence[Any], stamps: Sequence[int], values: Sequence[Any] | None = None,
                user_keys: Sequence[Any] | None = None) -> dict[tuple[Any, int, int], _Dirty]:  # fmt: skip
        """The records (in the task's order) through the aggregation; the sessions they changed, in
        the record cache's order (last write last): (key, start, end) -> [stored value or None, stored before].

        `values` are the records' values (None: the count's, which reads none); `user_keys` the keys
        the user's functions receive (None: `keys`). Per record, as Kafka Streams: `initializer()`,
        `merger(key, aggregate, session's)` per session it merges (by end), then, unless late,
        `aggregator(key, value, aggregate)`. A key's sessions are kept by end; those the store still
        returns do not overlap, so the ones a record merges (end >= t - gap, start <= t + gap) are
        consecutive, found from the latest back."""
        gap, grace, retention = self.gap, self.grace, self.retention
        functions = self.functions
        initializer, aggregator, merger = functions.initializer, functions.aggregator, functions.merger
        assert merger is not None, "a session aggregation has a merger"
        write, read = functions.serialize, functions.deserialize
        counting = functions is COUNT  # its functions inline (the same calls' results, no call per record)
        sessions = self.sessions
        dirty: dict[tuple[Any, int, int], _Dirty] = {}
        pop = dirty.pop
        observed, stored, dropped = self.observed, self.stored, self.dropped
        records = zip(keys, keys if user_keys is None else user_keys, repeat(None, len(keys)) if values is None else values,
                      stamps, strict=True)  # fmt: skip
        for key, user_key, value, t in records:
            if t > observed:
                observed = t
            found = sessions.get(key)
            start = end = t
            aggregate = 0 if counting else initializer()
            i = j = 0
            if found:
                # find_sessions(key, t - gap, t + gap) of a store keeping the sessions ending after stored - retention
                earliest = t - gap
                if stored - retention >= earliest:
                    earliest = stored - retention + 1
                latest = t + gap
                i = len(found)
                while i and found[i - 1][0] > latest:
                    i -= 1
                j = i
                while j and found[j - 1][1] >= earliest:
                    j -= 1
                    if counting:
                        aggregate += found[j][2]
                if i > j:  # the merged sessions, found[j:i], do not overlap: the first starts, the last ends
                    if found[j][0] < start:
                        start = found[j][0]
                    if found[i - 1][1] > end:
                        end = found[i - 1][1]
                    if not counting:
                        for s in found[j:i]:  # in the store's order (by end)
                            aggregate = merger(user_key, aggregate, s[2] if read is None else read(s[2]))
            if end < observed - grace - gap:
                dropped += 1
                log.debug("session aggregation: skipping a late record: key=%r timestamp=%d stream time=%d", key, t,
                          observed)  # fmt: skip
                continue
            if found is None:
                found = sessions[key] = []
            if end > stored:
                stored = end
            overwritten = start == t and end == t and i > j  # the session [t, t] itself: put over, not removed
            if not overwritten:
                for s in found[j:i]:  # merged away, in the store's order (by end)
                    session = (key, s[0], s[1])
                    entry = pop(session, None)
                    if entry is None:
                        dirty[session] = [None, True]
                    elif entry[1]:
                        entry[0] = None
                        dirty[session] = entry
                    # else: created and merged away within the micro-batch, never forwarded
            if counting:
                data = aggregate + 1
            else:
                aggregate = aggregator(user_key, value, aggregate)
                data = aggregate if write is None else write(aggregate)
            if data is not None and end > stored - retention:  # else removed, or dropped by the store as expired
                found[j:i] = [[start, end, data]]
            else:
                del found[j:i]
                if not found:
                    del sessions[key]
            session = (key, start, end)
            entry = pop(session, None)
            if entry is None:
                entry = [data, overwritten]
            else:
                entry[0] = data
            dirty[session] = entry
        self.observed, self.stored, self.dropped = observed, stored, dropped
        if stored - self._expired_at > retention:
            self.expire()
        return dirty

    @staticmethod
    def flushed(dirty: Mapping[tuple[Any, int, int], _Dirty]) -> list[tuple[Any, int, int, Any]]:
        """What the cache's flush forwards: each changed session's stored value; a removed one's tombstone
        only if the store had it before the micro-batch (one created and removed within it: nothing)."""
        return [(key, start, end, v) for (key, start, end), (v, below) in dirty.items() if v is not None or below]

    def changes(self, dirty: Mapping[tuple[Any, int, int], _Dirty]) -> list[tuple[Any, int, int, Any]]:
        """The micro-batch's changelog rows (key, start, end, value or None): the sessions the store
        keeps, and the removal of those it had."""
        cutoff = self.stored - self.retention
        return [(key, start, end, v) for (key, start, end), (v, below) in dirty.items()
                if (v is None and below) or (v is not None and end > cutoff)]  # fmt: skip

    def rows(self) -> list[tuple[Any, int, int, Any]]:
        """The live sessions as changelog rows."""
        return [(key, s, e, v) for key, found in self.sessions.items() for s, e, v in found]


def _by_end(session: list[Any]) -> tuple[int, int]:
    return session[1], session[0]
