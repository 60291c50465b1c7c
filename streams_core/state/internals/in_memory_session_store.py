"""InMemorySessionStore: a bytes session store in a dict with a lazily sorted session index."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from streams_core.state.internals.abstract_session_store import AbstractSessionStore
from streams_core.state.internals.in_memory_store import InMemoryStore
from streams_core.state.internals.sorted_index import SortedIndex

__all__ = ["InMemorySessionStore"]

_Entry = tuple[bytes, int, int]
"""(key, session end, session start): the sort order of sessions."""


class InMemorySessionStore(InMemoryStore, AbstractSessionStore):
    """Sessions sorted by (key, end, start); not persistent, iterators as `InMemoryStore` says."""

    def __init__(self, name: str, retention_period: int, segment_interval: int | None = None) -> None:
        super().__init__(name, retention_period, segment_interval)
        self._map: dict[_Entry, bytes] = {}
        self._sessions: SortedIndex[_Entry] = SortedIndex()
        self._indexes = (self._sessions,)
        self._open = False

    def _write(self, key: bytes, start: int, end: int, value: bytes) -> None:
        entry = (key, end, start)
        if entry not in self._map:
            self._sessions.add(entry)
        self._map[entry] = value

    def _delete(self, key: bytes, start: int, end: int) -> None:
        entry = (key, end, start)
        if self._map.pop(entry, None) is not None:
            self._sessions.remove(entry)

    def _write_batch(self, rows: list[tuple[bytes, int, int, bytes | None]]) -> None:
        for key, start, end, value in rows:
            if value is None:
                self._delete(key, start, end)
            else:
                self._write(key, start, end, value)

    def _get(self, key: bytes, start: int, end: int) -> bytes | None:
        return self._map.get((key, end, start))

    def _find(
        self, key_from: bytes | None, key_to: bytes | None, earliest_end: int, latest_start: int, reverse: bool
    ) -> Iterator[tuple[bytes, int, int, bytes]]:
        sessions = self._sessions.settled()
        low = 0 if key_from is None else bisect_left(sessions, (key_from,))
        high = len(sessions) if key_to is None else bisect_left(sessions, (key_to + b"\x00",))
        snapshot = [e for e in sessions[low:high] if e[1] >= earliest_end and e[2] <= latest_start]
        if reverse:
            snapshot.reverse()
        return self._values(snapshot)

    def _values(self, snapshot: list[_Entry]) -> Iterator[tuple[bytes, int, int, bytes]]:
        return ((key, start, end, value) for (key, end, start), value in self._live(snapshot))

    def _drop_expired(self, cutoff: int) -> None:
        for entry in [e for e in self._map if e[1] <= cutoff]:
            key, end, start = entry
            self._delete(key, start, end)

    def approximate_num_entries(self) -> int:
        """Sessions held, expired ones not yet dropped included."""
        return len(self._map)

    def __repr__(self) -> str:
        return f"InMemorySessionStore({self._name!r})"
