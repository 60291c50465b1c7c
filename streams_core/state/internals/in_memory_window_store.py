"""InMemoryWindowStore: a bytes window store in a dict with two lazily sorted entry indexes."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from streams_core.state.internals.abstract_window_store import AbstractWindowStore
from streams_core.state.internals.in_memory_store import InMemoryStore
from streams_core.state.internals.sorted_index import SortedIndex

__all__ = ["InMemoryWindowStore"]

_Entry = tuple[bytes, int, int]
"""(key, window start, seqnum)"""


class InMemoryWindowStore(InMemoryStore, AbstractWindowStore):
    """Entries sorted by (key, start, seqnum) and by (start, key, seqnum) for time scans; not
    persistent, iterators as `InMemoryStore` says."""

    def __init__(
        self,
        name: str,
        retention_period: int,
        window_size: int,
        retain_duplicates: bool = False,
        segment_interval: int | None = None,
    ) -> None:
        super().__init__(name, retention_period, window_size, retain_duplicates, segment_interval)
        self._map: dict[_Entry, bytes] = {}
        self._by_key: SortedIndex[_Entry] = SortedIndex()
        self._by_time: SortedIndex[tuple[int, bytes, int]] = SortedIndex()
        self._indexes = (self._by_key, self._by_time)
        self._open = False

    def _write(self, key: bytes, start: int, seqnum: int, value: bytes) -> None:
        entry = (key, start, seqnum)
        if entry not in self._map:
            self._by_key.add(entry)
            self._by_time.add((start, key, seqnum))
        self._map[entry] = value

    def _delete(self, key: bytes, start: int) -> None:
        self._remove((key, start, 0))

    def _remove(self, entry: _Entry) -> None:
        if self._map.pop(entry, None) is not None:
            key, start, seqnum = entry
            self._by_key.remove(entry)
            self._by_time.remove((start, key, seqnum))

    def _write_batch(self, rows: list[tuple[bytes, int, int, bytes | None]]) -> None:
        for key, start, seqnum, value in rows:
            if value is None:
                self._remove((key, start, seqnum))
            else:
                self._write(key, start, seqnum, value)

    def _fetch_value(self, key: bytes, start: int) -> bytes | None:
        if not self._retain_duplicates:
            return self._map.get((key, start, 0))
        entries = self._by_key.settled()
        index = bisect_left(entries, (key, start + 1)) - 1
        if index >= 0 and entries[index][:2] == (key, start):
            return self._map.get(entries[index])
        return None

    def _fetch_key(self, key: bytes, time_from: int, time_to: int, reverse: bool) -> Iterator[tuple[int, bytes]]:
        entries = self._by_key.settled()
        snapshot = entries[bisect_left(entries, (key, time_from)) : bisect_left(entries, (key, time_to + 1))]
        if reverse:
            snapshot.reverse()
        return ((start, value) for _, start, value in self._values(snapshot))

    def _fetch_key_range(
        self, key_from: bytes | None, key_to: bytes | None, time_from: int, time_to: int, reverse: bool
    ) -> Iterator[tuple[bytes, int, bytes]]:
        entries = self._by_key.settled()
        low = 0 if key_from is None else bisect_left(entries, (key_from,))
        high = len(entries) if key_to is None else bisect_left(entries, (key_to + b"\x00",))
        snapshot = [e for e in entries[low:high] if time_from <= e[1] <= time_to]
        if reverse:
            snapshot.reverse()
        return self._values(snapshot)

    def _fetch_time_range(self, time_from: int, time_to: int, reverse: bool) -> Iterator[tuple[bytes, int, bytes]]:
        entries = self._by_time.settled()
        section = entries[bisect_left(entries, (time_from,)) : bisect_left(entries, (time_to + 1,))]
        snapshot = [(key, start, seqnum) for start, key, seqnum in section]
        if reverse:
            snapshot.reverse()
        return self._values(snapshot)

    def _values(self, snapshot: list[_Entry]) -> Iterator[tuple[bytes, int, bytes]]:
        return ((key, start, value) for (key, start, _), value in self._live(snapshot))

    def _drop_expired(self, cutoff: int) -> None:
        by_time = self._by_time.settled()
        for start, key, seqnum in by_time[: bisect_left(by_time, (cutoff + 1,))]:
            self._remove((key, start, seqnum))

    def approximate_num_entries(self) -> int:
        """Entries held, expired ones not yet dropped included."""
        return len(self._map)

    def __repr__(self) -> str:
        return f"InMemoryWindowStore({self._name!r})"
