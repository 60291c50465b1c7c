"""ThreadCache: the record cache of one stream thread, shared by its tasks' caching stores.

`statestore.cache.max.bytes` is divided among the stream threads. Each caching store has a
named cache (a namespace) in it: an LRU of entries, some dirty (written, not yet in the store
below). A commit flushes every named cache; when the thread's cache grows past its size, the
least recently used entries of the cache being written are evicted, and evicting a dirty entry
first flushes that cache's dirty entries (as Kafka Streams' ThreadCache.maybeEvict).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["UNKNOWN_BELOW", "CacheEntry", "NamedCache", "ThreadCache"]

log = logging.getLogger(__name__)

_ENTRY_OVERHEAD = 64
"""Bytes counted per entry beyond its key and value (object and dict slot overhead, roughly)."""


UNKNOWN_BELOW: object = object()
"""`CacheEntry.below` of a dirty entry written without a clean one before it: the store was not read."""


class CacheEntry:
    """A cached value (None: a cached delete), whether it still has to reach the store, and when it was written.

    A clean entry holds what the store below holds. A dirty one that overwrote a clean one keeps
    that value in `below` (until it is flushed), so a flush need not read the store for the old value.
    """

    __slots__ = ("below", "dirty", "size", "timestamp", "value")

    def __init__(self, value: bytes | None, dirty: bool, timestamp: int, size: int) -> None:
        self.value = value
        self.dirty = dirty
        self.timestamp = timestamp
        self.size = size
        self.below: bytes | object | None = UNKNOWN_BELOW


FlushListener = Callable[[list[tuple[bytes, CacheEntry]]], None]
"""Receives a named cache's dirty entries, in write order, when they are flushed."""

RemoveListener = Callable[[bytes], None]
"""Told each key that leaves a named cache by eviction or invalidation (an index kept beside it follows)."""


class NamedCache:
    """One store's entries in the thread cache."""

    __slots__ = ("dirty", "entries", "listener", "name", "on_remove", "size")

    def __init__(self, name: str, listener: FlushListener, on_remove: RemoveListener | None = None) -> None:
        self.name = name
        self.entries: OrderedDict[bytes, CacheEntry] = OrderedDict()
        self.dirty: dict[bytes, None] = {}
        self.listener = listener
        self.on_remove = on_remove
        self.size = 0


class ThreadCache:
    """LRU caches of one thread's stores under one byte budget."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._caches: dict[str, NamedCache] = {}

    def __repr__(self) -> str:
        return f"ThreadCache(size={self.size}/{self.max_bytes}, caches={len(self._caches)})"

    def named_cache(self, name: str, listener: FlushListener, on_remove: RemoveListener | None = None) -> NamedCache:
        """The named cache of a store (created on first use; the listeners are replaced)."""
        cache = self._caches.get(name)
        if cache is None:
            cache = self._caches[name] = NamedCache(name, listener, on_remove)
        else:
            cache.listener, cache.on_remove = listener, on_remove
        return cache

    def get(self, cache: NamedCache, key: bytes) -> CacheEntry | None:
        entry = cache.entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        cache.entries.move_to_end(key)
        return entry

    def put(self, cache: NamedCache, key: bytes, value: bytes | None, dirty: bool, timestamp: int) -> None:
        """Cache a value; a dirty one will be written to the store on flush or eviction."""
        size = len(key) + (len(value) if value is not None else 0) + _ENTRY_OVERHEAD
        entries = cache.entries
        old = entries.get(key)
        if old is not None:
            delta = size - old.size
            if dirty:
                pending = cache.dirty
                if old.dirty:  # to the end of the write order
                    del pending[key]
                else:
                    old.below = old.value
                    old.dirty = True
                pending[key] = None
            old.value, old.timestamp, old.size = value, timestamp, size
            entries.move_to_end(key)
            if not delta:  # a value of the same size (a count): the budget is unchanged
                return
        else:
            delta = size
            entries[key] = CacheEntry(value, dirty, timestamp, size)
            if dirty:
                cache.dirty[key] = None
        cache.size += delta
        self.size += delta
        if self.size > self.max_bytes:
            self._evict(cache)

    def flush(self, cache: NamedCache) -> None:
        """Hand the dirty entries to the listener (in write order) and mark them clean."""
        if not cache.dirty:
            return
        keys, cache.dirty = list(cache.dirty), {}
        entries = cache.entries
        batch = []
        for key in keys:
            entry = entries[key]
            entry.dirty = False
            batch.append((key, entry))
        cache.listener(batch)

    def resize(self, max_bytes: int) -> None:
        """Take a new byte budget (KIP-663: the instance's cache is re-divided when threads come or go);
        shrinking evicts from the named caches in turn, one entry each, as Kafka's `ThreadCache.resize`."""
        self.max_bytes = max_bytes
        while self.size > max_bytes:
            caches = [cache for cache in self._caches.values() if cache.entries]
            if not caches:
                break
            for cache in caches:
                if self.size <= max_bytes:
                    break
                self._evict_one(cache)

    def _evict(self, cache: NamedCache) -> None:
        while self.size > self.max_bytes and cache.entries:
            self._evict_one(cache)

    def _evict_one(self, cache: NamedCache) -> None:
        """Drop the least recently used entry of `cache`, first flushing the cache when it is dirty."""
        entries = cache.entries
        key, entry = next(iter(entries.items()))
        if entry.dirty:
            self.flush(cache)
        entries.popitem(last=False)
        cache.size -= entry.size
        self.size -= entry.size
        self.evictions += 1
        if cache.on_remove is not None:
            cache.on_remove(key)

    def invalidate(self, cache: NamedCache, keys: list[bytes]) -> None:
        """Forget cached (clean) entries of keys the store below changed, e.g. by a changelog restore."""
        entries = cache.entries
        for key in keys:
            entry = entries.pop(key, None)
            if entry is not None:
                cache.dirty.pop(key, None)
                cache.size -= entry.size
                self.size -= entry.size
                if cache.on_remove is not None:
                    cache.on_remove(key)

    def close(self, cache: NamedCache) -> None:
        """Drop a store's entries without writing them (its task is closing)."""
        self.size -= cache.size
        self._caches.pop(cache.name, None)
        cache.entries.clear()
        cache.dirty.clear()
        cache.size = 0
