"""CachingWindowStore: the record cache in front of a window bytes store (Kafka Streams' CachingWindowStore).

Writes go to the thread cache under the changelog key `key | window start | seqnum 0`, so a
windowed aggregation updating one window many times between commits writes it (and forwards
it, through the flush listener) once. Reads merge the dirty entries with the store below in the
read's order without flushing: `fetch(key, from, to)` by start, key-range fetches by key then
start, `fetch_all`/`all` by start then key, backwards for the `backward_` forms. Stores keeping
duplicates (stream-stream joins) are never cached (the builder refuses).

Reads serve what the cache holds, flushed or not, even a window the store below has expired
(it expires by its own observed stream time, which moves when writes are flushed), as Kafka
Streams' caching window stores do until the entry is evicted; see docs/state.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import Any

from streams_core.common.store import KeyValue, StateStore, StateStoreContext
from streams_core.state.internals import window_key_schema
from streams_core.state.internals.abstract_window_store import WindowReads
from streams_core.state.internals.byte_order import is_inverted_range
from streams_core.state.internals.caching_state_store import CachingTimeKeyedStore
from streams_core.state.internals.merged_sorted_cache_iterator import merged_sorted
from streams_core.state.windowed import TimeWindow, Windowed

__all__ = ["CachingWindowStore"]

_POSITION = itemgetter(0)
"""The sort position of a (position, entry) pair of dirty entries."""


def _by_key_then_start(entry: KeyValue[Windowed[bytes], bytes]) -> tuple[bytes, int]:
    return entry.key.key, entry.key.window.start


def _by_start_then_key(entry: KeyValue[Windowed[bytes], bytes]) -> tuple[int, bytes]:
    return entry.key.window.start, entry.key.key


class CachingWindowStore(WindowReads, CachingTimeKeyedStore):
    """Caches a window bytes store (without duplicates) in the thread's record cache."""

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        super().init(context, root)
        self._size: int = self._wrapped.window_size

    @property
    def window_size(self) -> int:
        return self._wrapped.window_size  # type: ignore[no-any-return]

    @property
    def retain_duplicates(self) -> bool:
        return False

    def put(self, key: bytes, value: bytes | None, window_start_timestamp: int) -> None:
        """Cache `value` for (key, window start); None deletes. The store below gets it on flush."""
        cache_key = window_key_schema.to_store_key_binary(key, window_start_timestamp, 0)
        start = window_start_timestamp
        self._put_time_keyed(key, cache_key, start, start + self._size, start, value)

    def fetch(self, *args: Any) -> Any:
        """fetch(key, start) -> value; fetch(key, from, to); fetch(key_from, key_to, from, to)."""
        if len(args) == 2:
            key, start = args
            entry = self._cached(window_key_schema.to_store_key_binary(key, start, 0))
            return entry.value if entry is not None else self._wrapped.fetch(key, start)
        return self._fetch_iterator(args, reverse=False)

    def _fetch_iterator(self, args: tuple[Any, ...], reverse: bool) -> Iterator[Any]:
        read = self._wrapped.backward_fetch if reverse else self._wrapped.fetch
        if len(args) == 3:
            key, time_from, time_to = args
            if time_from > time_to:
                return iter(())
            by_start = sorted(
                (
                    (start, None if value is None else KeyValue(start, value))
                    for _, start, _, value in self._cached_windows(key, key, time_from)
                    if time_from <= start <= time_to
                ),
                key=_POSITION,
                reverse=reverse,
            )
            return merged_sorted(by_start, read(key, time_from, time_to), _POSITION, reverse)
        if len(args) == 4:
            key_from, key_to, time_from, time_to = args
            if time_from > time_to or is_inverted_range(self.name, key_from, key_to):
                return iter(())
            dirty = self._sorted_dirty(key_from, key_to, time_from, time_to, _by_key_then_start, reverse)
            return merged_sorted(dirty, read(key_from, key_to, time_from, time_to), _by_key_then_start, reverse)
        raise TypeError(f"fetch takes 2, 3 or 4 arguments ({len(args)} given)")

    def _all(self, time_from: int, time_to: int, reverse: bool) -> Iterator[KeyValue[Windowed[bytes], bytes]]:
        if time_from > time_to:
            return iter(())
        dirty = self._sorted_dirty(None, None, time_from, time_to, _by_start_then_key, reverse)
        stored = self._wrapped.backward_fetch_all if reverse else self._wrapped.fetch_all
        return merged_sorted(dirty, stored(time_from, time_to), _by_start_then_key, reverse)

    def _sorted_dirty(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        time_from: int,
        time_to: int,
        order: Callable[[KeyValue[Windowed[bytes], bytes]], Any],
        reverse: bool,
    ) -> list[tuple[Any, KeyValue[Windowed[bytes], bytes] | None]]:
        """The cached windows of the ranges as (position in `order`, entry or None for a delete), sorted."""
        entries: list[tuple[Any, KeyValue[Windowed[bytes], bytes] | None]] = []
        for key, start, end, value in self._cached_windows(key_from, key_to, time_from):
            if time_from <= start <= time_to:
                entry: KeyValue[Windowed[bytes], Any] = KeyValue(Windowed(key, TimeWindow(start, end)), value)
                entries.append((order(entry), None if value is None else entry))
        entries.sort(key=_POSITION, reverse=reverse)
        return entries

    # -- flushing -----------------------------------------------------------------------------

    def _location(self, cache_key: bytes) -> tuple[Windowed[bytes], tuple[bytes, int]]:
        key, start, _ = window_key_schema.from_store_key_binary(cache_key)
        return Windowed(key, TimeWindow(start, start + self._size)), (key, start)

    def _read_below(self, location: tuple[bytes, int]) -> bytes | None:
        return self._wrapped.fetch(*location)  # type: ignore[no-any-return]

    def _write_below(self, location: tuple[bytes, int], value: bytes | None) -> None:
        self._wrapped.put(location[0], value, location[1])

    def __repr__(self) -> str:
        return f"CachingWindowStore({self._wrapped!r})"
