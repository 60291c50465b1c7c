"""What the bytes window stores share: stream-time tracking, expiry, duplicates, `fetch` overloads.

Retention follows Kafka Streams' in-memory window store. Observed stream time is the largest
window start put (or restored). A window is live while `start > observed - retention_period`:
a put of an expired window is dropped (counted in `expired_records_dropped`), fetches clip their
time range to live windows, and expired rows are deleted in bulk each time observed stream time
passes another `segment_interval` (so they are invisible at once and gone soon after). A
time-ordered store (Java's, under emit-on-close aggregations) keeps one millisecond more: a
window is live while `start >= observed - retention_period`.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any

from streams_core.common.store import KeyValue, StateStore, StateStoreContext
from streams_core.errors import InvalidStateStoreError
from streams_core.state.internals import window_key_schema
from streams_core.state.internals.byte_order import is_inverted_range
from streams_core.state.windowed import TimeWindow, Windowed

__all__ = [
    "NO_TIMESTAMP",
    "AbstractWindowStore",
    "RetentionTracking",
    "WindowReads",
    "default_segment_interval",
]

log = logging.getLogger(__name__)

NO_TIMESTAMP = -(2**63)
"""Observed stream time before the first record."""

_MAX_SEQNUM = 2**31 - 1
"""Seqnums travel in 4 bytes of the changelog key; they wrap like Kafka Streams' do."""


def default_segment_interval(retention_period: int) -> int:
    """Kafka Streams' default: half the retention, at least a minute."""
    return max(retention_period // 2, 60_000)


class RetentionTracking(ABC):
    """What time-based stores share: the highest time seen, expiry of records older than the
    retention period, and a bulk delete of expired rows each `segment_interval` (`_drop_expired`)."""

    def __init__(self, name: str, retention_period: int, segment_interval: int | None, live_span: int | None = None) -> None:
        self._name = name
        self._retention_period = retention_period
        self._live_span = retention_period if live_span is None else live_span
        self._segment_interval = segment_interval or default_segment_interval(retention_period)
        self._observed = NO_TIMESTAMP
        self._next_cleanup = NO_TIMESTAMP
        self.expired_records_dropped = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def retention_period(self) -> int:
        return self._retention_period

    @property
    def segment_interval(self) -> int:
        return self._segment_interval

    @property
    def expired_through(self) -> int:
        """The latest time that has expired: records at or before it are dropped and invisible."""
        return self._observed - self._live_span

    @property
    @abstractmethod
    def is_open(self) -> bool: ...

    @abstractmethod
    def init(self, context: StateStoreContext, root: StateStore) -> None: ...

    @abstractmethod
    def _drop_expired(self, cutoff: int) -> None: ...

    def _check_open(self) -> None:
        if not self.is_open:
            raise InvalidStateStoreError(f"store {self._name!r} is not open")

    def _observe(self, time: int) -> None:
        if time > self._observed:
            self._observed = time
            if time >= self._next_cleanup:
                self._next_cleanup = time + self._segment_interval
                self._drop_expired(time - self._live_span)


class WindowReads(ABC):
    """The iterator reads of a bytes window store, through `_fetch_iterator(args, reverse)` and `_all`."""

    def backward_fetch(self, *args: Any) -> Any:
        """fetch(key, from, to) or fetch(key_from, key_to, from, to), newest / last key first."""
        return self._fetch_iterator(args, reverse=True)

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        """Every live entry with time_from <= window start <= time_to, by start then key."""
        return self._all(time_from, time_to, reverse=False)

    def backward_fetch_all(self, time_from: int, time_to: int) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        return self._all(time_from, time_to, reverse=True)

    def all(self) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        return self._all(NO_TIMESTAMP, 2**63 - 1, reverse=False)

    def backward_all(self) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        return self._all(NO_TIMESTAMP, 2**63 - 1, reverse=True)

    @abstractmethod
    def _fetch_iterator(self, args: tuple[Any, ...], reverse: bool) -> Iterator[Any]:
        """fetch with 3 or 4 arguments, forwards or backwards."""

    @abstractmethod
    def _all(self, time_from: int, time_to: int, reverse: bool) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        """Live entries with time_from <= window start <= time_to, by start then key."""


class AbstractWindowStore(WindowReads, RetentionTracking):
    """A bytes window store; subclasses provide storage (`_write`, `_fetch_*`, `_drop_expired`)."""

    def __init__(
        self,
        name: str,
        retention_period: int,
        window_size: int,
        retain_duplicates: bool = False,
        segment_interval: int | None = None,
        time_ordered: bool = False,
    ) -> None:
        super().__init__(name, retention_period, segment_interval, retention_period + 1 if time_ordered else None)
        self._window_size = window_size
        self._retain_duplicates = retain_duplicates
        self._seqnum = 0

    @property
    def window_size(self) -> int:
        return self._window_size

    @property
    def retain_duplicates(self) -> bool:
        return self._retain_duplicates

    @property
    def time_ordered(self) -> bool:
        """Whether the window at exactly `observed - retention` is still live (Java's time-ordered store)."""
        return self._live_span > self._retention_period

    @property
    def observed_stream_time(self) -> int:
        """The largest window start seen; `NO_TIMESTAMP` before the first."""
        return self._observed

    def _is_expired(self, window_start: int) -> bool:
        if window_start <= self.expired_through:
            self.expired_records_dropped += 1
            log.debug("store %s: skipping a record for expired window start %d", self._name, window_start)
            return True
        return False

    def put(self, key: bytes, value: bytes | None, window_start_timestamp: int) -> None:
        """Store `value` for (key, window start); None deletes (a no-op when keeping duplicates)."""
        self._check_open()
        self._observe(window_start_timestamp)
        if self._is_expired(window_start_timestamp):
            return
        if value is not None:
            self._write(key, window_start_timestamp, self._next_seqnum(), value)
        elif not self._retain_duplicates:
            self._delete(key, window_start_timestamp)

    def _next_seqnum(self) -> int:
        if not self._retain_duplicates:
            return 0
        self._seqnum = self._seqnum + 1 if self._seqnum < _MAX_SEQNUM else 1
        return self._seqnum

    def restore_batch(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply changelog records keyed by `window_key_schema` (value None deletes)."""
        self._check_open()
        batch: dict[tuple[bytes, int, int], bytes | None] = {}
        for binary, value in records:
            key, start, seqnum = window_key_schema.from_store_key_binary(binary)
            self._observe(start)
            if self._retain_duplicates:
                self._seqnum = max(self._seqnum, seqnum)
            batch[(key, start, seqnum)] = value
        cutoff = self.expired_through
        self._write_batch([(k, s, q, v) for (k, s, q), v in batch.items() if s > cutoff])

    def fetch(self, *args: Any) -> Any:
        """fetch(key, start) -> value; fetch(key, from, to); fetch(key_from, key_to, from, to)."""
        if len(args) == 2:
            self._check_open()
            key, start = args
            if start <= self.expired_through:
                return None
            return self._fetch_value(key, start)
        return self._fetch_iterator(args, reverse=False)


    def _fetch_iterator(self, args: tuple[Any, ...], reverse: bool) -> Iterator[Any]:
        self._check_open()
        if len(args) == 3:
            key, time_from, time_to = args
            time_from = max(time_from, self._live_from())
            if time_from > time_to:
                return iter(())
            return (KeyValue(s, v) for s, v in self._fetch_key(key, time_from, time_to, reverse))
        if len(args) == 4:
            key_from, key_to, time_from, time_to = args
            time_from = max(time_from, self._live_from())
            if time_from > time_to or is_inverted_range(self._name, key_from, key_to):
                return iter(())
            return self._windowed(self._fetch_key_range(key_from, key_to, time_from, time_to, reverse))
        raise TypeError(f"fetch takes 2, 3 or 4 arguments ({len(args)} given)")

    def _all(self, time_from: int, time_to: int, reverse: bool) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        self._check_open()
        time_from = max(time_from, self._live_from())
        if time_from > time_to:
            return iter(())
        return self._windowed(self._fetch_time_range(time_from, time_to, reverse))

    def _live_from(self) -> int:
        return self.expired_through + 1

    def _windowed(self, rows: Iterator[tuple[bytes, int, bytes]]) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        size = self._window_size
        for key, start, value in rows:
            yield KeyValue(Windowed(key, TimeWindow(start, start + size)), value)

    @abstractmethod
    def _write(self, key: bytes, start: int, seqnum: int, value: bytes) -> None: ...

    @abstractmethod
    def _delete(self, key: bytes, start: int) -> None: ...

    @abstractmethod
    def _write_batch(self, rows: list[tuple[bytes, int, int, bytes | None]]) -> None:
        """Apply (key, start, seqnum, value or None) rows, each (key, start, seqnum) at most once."""

    @abstractmethod
    def _fetch_value(self, key: bytes, start: int) -> bytes | None:
        """The value of (key, start); with duplicates, the latest one put."""

    @abstractmethod
    def _fetch_key(self, key: bytes, time_from: int, time_to: int, reverse: bool) -> Iterator[tuple[int, bytes]]:
        """(start, value) of one key, by start then seqnum."""

    @abstractmethod
    def _fetch_key_range(
        self, key_from: bytes | None, key_to: bytes | None, time_from: int, time_to: int, reverse: bool
    ) -> Iterator[tuple[bytes, int, bytes]]:
        """(key, start, value) by key, start, seqnum."""

    @abstractmethod
    def _fetch_time_range(self, time_from: int, time_to: int, reverse: bool) -> Iterator[tuple[bytes, int, bytes]]:
        """(key, start, value) by start, key, seqnum."""

    @abstractmethod
    def _drop_expired(self, cutoff: int) -> None:
        """Delete every entry with window start <= cutoff."""
