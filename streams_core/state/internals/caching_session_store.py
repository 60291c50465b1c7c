"""CachingSessionStore: the record cache in front of a session bytes store (Kafka Streams' CachingSessionStore).

Writes (and removes, cached as deletes) go to the thread cache under the changelog key
`key | end | start`; a session created and merged away between two commits never reaches the
store, the changelog or downstream. Reads merge the dirty entries with the store below in
session order (key, end, start; reversed for `backward_`) without flushing.

Reads serve what the cache holds, flushed or not, even a session the store below has expired
(live there while `end > observed - retention`, by its own observed stream time), as Kafka
Streams' CachingSessionStore does until the entry is evicted; see docs/state.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import itemgetter
from typing import Any

from streams_core.common.store import KeyValue
from streams_core.state.internals import session_key_schema
from streams_core.state.internals.abstract_session_store import SessionReads
from streams_core.state.internals.byte_order import is_inverted_range
from streams_core.state.internals.caching_state_store import CachingTimeKeyedStore
from streams_core.state.internals.merged_sorted_cache_iterator import merged_sorted
from streams_core.state.windowed import SessionWindow, Windowed

__all__ = ["CachingSessionStore"]

_POSITION = itemgetter(0)


def _session_order(entry: KeyValue[Windowed[bytes], bytes]) -> tuple[bytes, int, int]:
    window = entry.key.window
    return entry.key.key, window.end, window.start


class CachingSessionStore(SessionReads, CachingTimeKeyedStore):
    """Caches a session bytes store in the thread's record cache."""

    def put(self, session_key: Windowed[bytes], value: bytes | None) -> None:
        """Cache the session's value; None removes it. The store below gets it on flush."""
        key, window = session_key.key, session_key.window
        cache_key = session_key_schema.to_binary(key, window.start, window.end)
        self._put_time_keyed(key, cache_key, window.start, window.end, window.end, value)

    def remove(self, session_key: Windowed[bytes]) -> None:
        self.put(session_key, None)

    def fetch_session(self, key: bytes, session_start_time: int, session_end_time: int) -> bytes | None:
        entry = self._cached(session_key_schema.to_binary(key, session_start_time, session_end_time))
        if entry is not None:
            return entry.value
        return self._wrapped.fetch_session(key, session_start_time, session_end_time)  # type: ignore[no-any-return]

    def _find_sessions(self, args: tuple[Any, ...], reverse: bool) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        if len(args) == 3:
            key_from, earliest_end, latest_start = args
            key_to = key_from
        elif len(args) == 4:
            key_from, key_to, earliest_end, latest_start = args
            if is_inverted_range(self.name, key_from, key_to):
                return iter(())
        else:
            raise TypeError(f"find_sessions takes 3 or 4 arguments ({len(args)} given)")
        dirty = []
        for key, start, end, value in self._cached_windows(key_from, key_to, earliest_end):
            if end >= earliest_end and start <= latest_start:
                entry = None if value is None else KeyValue(Windowed(key, SessionWindow(start, end)), value)
                dirty.append(((key, end, start), entry))
        dirty.sort(key=_POSITION, reverse=reverse)
        below = self._wrapped.backward_find_sessions if reverse else self._wrapped.find_sessions
        stored = below(key_from, earliest_end, latest_start) if len(args) == 3 else below(
            key_from, key_to, earliest_end, latest_start
        )
        return merged_sorted(dirty, stored, _session_order, reverse)

    # -- flushing -----------------------------------------------------------------------------

    def _location(self, cache_key: bytes) -> tuple[Windowed[bytes], Windowed[bytes]]:
        key, start, end = session_key_schema.from_binary(cache_key)
        session = Windowed(key, SessionWindow(start, end))
        return session, session

    def _read_below(self, location: Windowed[bytes]) -> bytes | None:
        return self._wrapped.fetch_session(location.key, location.window.start, location.window.end)  # type: ignore[no-any-return]

    def _write_below(self, location: Windowed[bytes], value: bytes | None) -> None:
        self._wrapped.put(location, value)

    def __repr__(self) -> str:
        return f"CachingSessionStore({self._wrapped!r})"
