"""CachingKeyValueStore: a read cache and write-back buffer over a key-value bytes store.

Writes stay in the thread's record cache until a commit (flush) or an eviction writes them to
the store below (and so to the changelog), compacting repeated writes of a key into one. A flush
listener, set by a DSL processor, is told of each flushed key with its new and old value: that
is how downstream updates are de-duplicated. Final results are the same with the cache on or
off; only how many intermediate updates are written and forwarded changes.

Reads never write: range scans and `all` merge this store's dirty cache entries (a cached
delete hides the stored key) with the store below in key order, as Kafka Streams' merged sorted
iterator does, so a query or a punctuation that scans the store changes neither when updates are
flushed and forwarded nor what the changelog holds. Only commits and evictions flush.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import Any

from streams_core.common.store import KeyValue, KeyValueStore, key_value
from streams_core.state.internals.caching_state_store import CachingStateStore
from streams_core.state.internals.merged_sorted_cache_iterator import merged_sorted

__all__ = ["CachingKeyValueStore"]

log = logging.getLogger(__name__)

_BY_KEY = itemgetter(0)


class CachingKeyValueStore(CachingStateStore):
    """Caches a key-value bytes store in the thread's record cache."""

    _clean_is_below = True

    def __init__(self, wrapped: KeyValueStore[bytes, bytes]) -> None:
        super().__init__(wrapped)

    # -- reads --------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        assert self._cache is not None and self._named is not None
        entry = self._cache.get(self._named, key)
        if entry is not None:
            return entry.value
        value = self._wrapped.get(key)
        self._cache.put(self._named, key, value, False, -1)
        return value  # type: ignore[no-any-return]

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[KeyValue[bytes, bytes]]:
        return self._merged(lambda k: _within(k, from_key, to_key), self._wrapped.range(from_key, to_key), False)

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[KeyValue[bytes, bytes]]:
        return self._merged(lambda k: _within(k, from_key, to_key), self._wrapped.reverse_range(from_key, to_key), True)

    def prefix_scan(self, prefix: bytes, prefix_serde: Any = None) -> Iterator[KeyValue[bytes, bytes]]:
        if not isinstance(prefix, bytes | bytearray):  # a typed prefix: the store below serializes it
            self._flush_cache()
            return self._wrapped.prefix_scan(prefix, prefix_serde)
        return self._merged(lambda k: k.startswith(prefix), self._wrapped.prefix_scan(prefix, prefix_serde), False)

    def all(self) -> Iterator[KeyValue[bytes, bytes]]:
        return self._merged(lambda k: True, self._wrapped.all(), False)

    def reverse_all(self) -> Iterator[KeyValue[bytes, bytes]]:
        return self._merged(lambda k: True, self._wrapped.reverse_all(), True)

    def approximate_num_entries(self) -> int:
        """The store below's estimate (cached writes not yet flushed are not counted, as in Kafka Streams)."""
        return self._wrapped.approximate_num_entries()  # type: ignore[no-any-return]

    def _merged(
        self, wanted: Callable[[bytes], bool], stored: Iterator[KeyValue[bytes, bytes]], reverse: bool
    ) -> Iterator[KeyValue[bytes, bytes]]:
        """`stored` merged with this store's not-yet-flushed entries that `wanted` selects."""
        dirty = sorted(
            ((k, None if v is None else key_value((k, v))) for k, v in self._dirty_items() if wanted(k)),
            key=_BY_KEY,
            reverse=reverse,
        )
        return merged_sorted(dirty, stored, _BY_KEY, reverse)

    def _dirty_items(self) -> Iterator[tuple[bytes, bytes | None]]:
        """(cache key, value or None) of every entry not yet flushed."""
        named = self._named
        if named is None or not named.dirty:
            return iter(())
        entries = named.entries
        return ((key, entries[key].value) for key in named.dirty)

    # -- writes -------------------------------------------------------------------------------

    put = CachingStateStore._put_cached

    def put_stamped(self, key: bytes, value: bytes | None, timestamp: int) -> None:
        """A write made earlier, with the timestamp of the record that made it (the typed layer's
        write buffer hands its entries over so: `MeteredKeyValueStore`)."""
        assert self._cache is not None and self._named is not None
        self._cache.put(self._named, key, value, True, timestamp)

    def count_hits(self, hits: int) -> None:
        """Reads the typed layer's write buffer answered: hits of this cache in the thread's metrics."""
        assert self._cache is not None
        self._cache.hits += hits

    def write_buffer_target(self) -> CachingKeyValueStore | None:
        """This layer, to take the typed layer's write buffer (`MeteredKeyValueStore`), when its
        record cache has a budget; None when every write goes through (a buffer would hold back
        what a budget of 0 forwards at once)."""
        assert self._cache is not None
        return self if self._cache.max_bytes > 0 else None

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        existing = self.get(key)
        if existing is None:
            self.put(key, value)
        return existing

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        old = self.get(key)
        self.put(key, None)
        return old

    # -- flushing -----------------------------------------------------------------------------

    def _location(self, cache_key: bytes) -> tuple[bytes, bytes]:
        return cache_key, cache_key

    def _read_below(self, location: bytes) -> bytes | None:
        return self._wrapped.get(location)  # type: ignore[no-any-return]

    def _write_below(self, location: bytes, value: bytes | None) -> None:
        if value is None:
            self._wrapped.delete(location)
        else:
            self._wrapped.put(location, value)


def _within(key: bytes, from_key: bytes | None, to_key: bytes | None) -> bool:
    return (from_key is None or key >= from_key) and (to_key is None or key <= to_key)
