"""What the bytes session stores share: stream-time tracking, expiry and the method overloads.

Retention follows Kafka Streams' in-memory session store. Observed stream time is the largest
session end put (or restored). A session is live while `end > observed - retention_period`: a
put of an expired session is dropped (counted in `expired_records_dropped`), reads skip expired
sessions, and expired rows are deleted in bulk each time observed stream time passes another
`segment_interval`.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any

from streams_core.common.store import KeyValue
from streams_core.state.internals import session_key_schema
from streams_core.state.internals.abstract_window_store import RetentionTracking
from streams_core.state.internals.byte_order import is_inverted_range
from streams_core.state.windowed import SessionWindow, Windowed

__all__ = ["AbstractSessionStore", "SessionReads"]

log = logging.getLogger(__name__)

_LATEST = 2**63 - 1


def _fetch_key_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(args) not in (1, 2):
        raise TypeError(f"fetch takes a key or a key range ({len(args)} arguments given)")
    return args


class SessionReads(ABC):
    """The overloaded reads of a bytes session store, all through one `_find_sessions(args, reverse)`."""

    def find_sessions(self, *args: Any) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        """find_sessions(key, earliest_end, latest_start) or (key_from, key_to, earliest_end, latest_start)."""
        return self._find_sessions(args, reverse=False)

    def backward_find_sessions(self, *args: Any) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        return self._find_sessions(args, reverse=True)

    def fetch(self, *args: Any) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        """fetch(key) or fetch(key_from, key_to): every live session."""
        return self._find_sessions((*_fetch_key_args(args), 0, _LATEST), reverse=False)

    def backward_fetch(self, *args: Any) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        return self._find_sessions((*_fetch_key_args(args), 0, _LATEST), reverse=True)

    @abstractmethod
    def _find_sessions(self, args: tuple[Any, ...], reverse: bool) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        """find_sessions with 3 or 4 arguments, forwards or backwards."""


class AbstractSessionStore(SessionReads, RetentionTracking):
    """A bytes session store; subclasses provide storage (`_write`, `_find`, `_drop_expired`)."""

    def __init__(self, name: str, retention_period: int, segment_interval: int | None = None) -> None:
        super().__init__(name, retention_period, segment_interval)

    @property
    def observed_stream_time(self) -> int:
        """The largest session end seen; `NO_TIMESTAMP` before the first."""
        return self._observed

    def put(self, session_key: Windowed[bytes], value: bytes | None) -> None:
        """Store the session's value; None removes it."""
        self._check_open()
        key, window = session_key.key, session_key.window
        self._observe(window.end)
        if window.end <= self._observed - self._retention_period:
            self.expired_records_dropped += 1
            log.debug("store %s: skipping a record for an expired session ending at %d", self._name, window.end)
            return
        if value is None:
            self._delete(key, window.start, window.end)
        else:
            self._write(key, window.start, window.end, value)

    def remove(self, session_key: Windowed[bytes]) -> None:
        self.put(session_key, None)

    def restore_batch(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply changelog records keyed by `session_key_schema` (value None deletes)."""
        self._check_open()
        batch: dict[tuple[bytes, int, int], bytes | None] = {}
        for binary, value in records:
            key, start, end = session_key_schema.from_binary(binary)
            self._observe(end)
            batch[(key, start, end)] = value
        cutoff = self._observed - self._retention_period
        self._write_batch([(k, s, e, v) for (k, s, e), v in batch.items() if e > cutoff])

    def fetch_session(self, key: bytes, session_start_time: int, session_end_time: int) -> bytes | None:
        self._check_open()
        if session_end_time <= self._observed - self._retention_period:
            return None
        return self._get(key, session_start_time, session_end_time)

    def _find_sessions(self, args: tuple[Any, ...], reverse: bool) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        self._check_open()
        if len(args) == 3:
            key, earliest_end, latest_start = args
            key_from = key_to = key
        elif len(args) == 4:
            key_from, key_to, earliest_end, latest_start = args
            if is_inverted_range(self._name, key_from, key_to):
                return iter(())
        else:
            raise TypeError(f"find_sessions takes 3 or 4 arguments ({len(args)} given)")
        earliest_end = max(earliest_end, self._observed - self._retention_period + 1)
        rows = self._find(key_from, key_to, earliest_end, latest_start, reverse)
        return (KeyValue(Windowed(k, SessionWindow(s, e)), v) for k, s, e, v in rows)

    @abstractmethod
    def _write(self, key: bytes, start: int, end: int, value: bytes) -> None: ...

    @abstractmethod
    def _delete(self, key: bytes, start: int, end: int) -> None: ...

    @abstractmethod
    def _write_batch(self, rows: list[tuple[bytes, int, int, bytes | None]]) -> None:
        """Apply (key, start, end, value or None) rows, each session at most once."""

    @abstractmethod
    def _get(self, key: bytes, start: int, end: int) -> bytes | None: ...

    @abstractmethod
    def _find(
        self, key_from: bytes | None, key_to: bytes | None, earliest_end: int, latest_start: int, reverse: bool
    ) -> Iterator[tuple[bytes, int, int, bytes]]:
        """(key, start, end, value) with end >= earliest_end and start <= latest_start, by key, end, start."""

    @abstractmethod
    def _drop_expired(self, cutoff: int) -> None:
        """Delete every session with end <= cutoff."""
