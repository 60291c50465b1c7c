"""What the caching layers (key-value, window, session) share: the thread cache, flushing, listeners.

A caching layer keeps its writes in a named cache of the stream thread's `ThreadCache`
(`<task id>-<store>`), keyed by the bytes the store's changelog uses. A commit (`flush`) or an
eviction hands the dirty entries to `_flush_entries`, which writes each to the store below (and
so to the changelog) with the record context of its write, and tells the flush listener a DSL
processor set, as that processor. Reads never flush: each layer merges its dirty entries with
the store below (`merged_sorted`).

Time-keyed layers (window, session) keep an index of their cached entries by record key, so the
per-record reads of windowed aggregations do not scan the whole cache; the thread cache tells
them which entries it evicts.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

from streams_core.common.store import StateStore, StateStoreContext
from streams_core.processor.processor import Record
from streams_core.state.internals.thread_cache import UNKNOWN_BELOW, CacheEntry, NamedCache, ThreadCache
from streams_core.state.internals.wrapped_state_store import WrappedStateStore

__all__ = ["DEFAULT_CACHE_BYTES", "BytesFlushListener", "CachingStateStore", "CachingTimeKeyedStore"]

log = logging.getLogger(__name__)

_MAX_TIME = 2**63 - 1

DEFAULT_CACHE_BYTES = 10 * 1024 * 1024

BytesFlushListener = Callable[[Any, bytes | None, bytes | None, int], None]
"""(key, new value, old value, timestamp) of one flushed entry; values are None for deletes. The
key is the store's key: bytes for key-value stores, `Windowed[bytes]` for window and session stores."""


class CachingStateStore(WrappedStateStore[Any]):
    """Caches a bytes store in the thread's record cache; subclasses say how an entry reaches the store below."""

    _clean_is_below = False
    """True when a clean entry always holds what the store below holds (a key-value store: it
    drops nothing by itself), so a flush takes the old value from the entry (`CacheEntry.below`)."""

    def __init__(self, wrapped: Any) -> None:
        super().__init__(wrapped)
        self._cache: ThreadCache | None = None
        self._named: NamedCache | None = None
        self._context: Any = None
        self._listener: BytesFlushListener | None = None
        self._listener_node: Any = None

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._wrapped.init(_InvalidatingContext(context, self._invalidate), root)
        self._context = context
        cache = getattr(context, "cache", None)
        if cache is None:
            config = getattr(context, "config", None)
            size = config.get("statestore.cache.max.bytes", DEFAULT_CACHE_BYTES) if config is not None else DEFAULT_CACHE_BYTES
            cache = ThreadCache(size)
        self._cache = cache
        self._named = cache.named_cache(f"{context.task_id}-{self.name}", self._flush_entries, self._removal_listener())

    def _removal_listener(self) -> Callable[[bytes], None] | None:
        """What to tell when an entry leaves the cache (evicted or invalidated); None: nothing."""
        return None

    def set_flush_listener(self, listener: BytesFlushListener) -> bool:
        """Call `listener` for each entry written through on flush; the processor setting it forwards.

        Set it from the processor's `init`: the listener then runs as that processor (so it may
        `context.forward`), with the entry's timestamp as the record timestamp.
        """
        self._listener = listener
        context = self._context
        self._listener_node = getattr(context, "init_node", None) or getattr(context, "node", None)
        return True

    # -- the cache ----------------------------------------------------------------------------

    def _cached(self, cache_key: bytes) -> CacheEntry | None:
        assert self._cache is not None and self._named is not None
        return self._cache.get(self._named, cache_key)

    def _put_cached(self, cache_key: bytes, value: bytes | None) -> None:
        """A write: dirty in the cache until a flush, stamped with the current record's time."""
        assert self._cache is not None and self._named is not None
        timestamp = self._context.timestamp
        self._cache.put(self._named, cache_key, value, True, -1 if timestamp is None else timestamp)

    # -- lifecycle ----------------------------------------------------------------------------

    def flush(self) -> None:
        self._flush_cache()
        self._wrapped.flush()

    def close(self) -> None:
        if self._cache is not None and self._named is not None:
            self._cache.close(self._named)
        self._wrapped.close()

    def _invalidate(self, batch: list[tuple[bytes, bytes | None]]) -> None:
        if self._cache is not None and self._named is not None:
            self._cache.invalidate(self._named, [key for key, _ in batch])

    def _flush_cache(self) -> None:
        if self._cache is not None and self._named is not None:
            self._cache.flush(self._named)

    def _flush_entries(self, batch: list[tuple[bytes, CacheEntry]]) -> None:
        """Write flushed entries to the store below; tell the listener, as the processor that set it.

        An entry that is a delete of something the store below never had is neither written nor
        told (Kafka Streams' optimisation: it was created and deleted within one flush interval).
        """
        listener = self._listener
        context = self._context
        clean_is_below = self._clean_is_below
        saved = (getattr(context, "node", None), getattr(context, "record", None))
        has_record = hasattr(context, "record")
        try:
            if listener is not None and self._listener_node is not None:
                context.node = self._listener_node
            for cache_key, entry in batch:
                value, timestamp = entry.value, max(entry.timestamp, 0)
                if has_record:
                    context.record = Record(cache_key, value, timestamp)
                listener_key, location = self._location(cache_key)
                if listener is None:
                    self._write_below(location, value)
                    continue
                below = entry.below if clean_is_below else UNKNOWN_BELOW
                old = self._read_below(location) if below is UNKNOWN_BELOW else cast("bytes | None", below)
                if value is None and old is None:
                    continue
                self._write_below(location, value)
                listener(listener_key, value, old, timestamp)
        finally:
            if has_record:
                context.node, context.record = saved

    @abstractmethod
    def _location(self, cache_key: bytes) -> tuple[Any, Any]:
        """(the key the flush listener is told, where `_read_below`/`_write_below` find the entry)."""

    @abstractmethod
    def _read_below(self, location: Any) -> bytes | None: ...

    @abstractmethod
    def _write_below(self, location: Any, value: bytes | None) -> None: ...


class CachingTimeKeyedStore(CachingStateStore):
    """A caching layer over a window or session store: a per-key index of what the cache holds.

    Reads serve every cached entry in range, written since the last flush or not, and the store
    below for the rest, as Kafka Streams' caching window and session stores: the cache applies no
    retention, so a window or session the store below has expired is still served while it sits
    in the cache (the store below learns of writes only when they are flushed and expires by its
    own observed stream time).
    """

    def __init__(self, wrapped: Any) -> None:
        super().__init__(wrapped)
        self._by_key: dict[bytes, _KeyIndex] = {}
        self._keys_of: dict[bytes, bytes] = {}

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        super().init(context, root)
        bottom = self._wrapped
        while not hasattr(type(bottom), "expired_through") and hasattr(bottom, "wrapped"):
            bottom = bottom.wrapped()
        self._bottom = bottom

    @property
    def retention_period(self) -> int:
        return self._wrapped.retention_period  # type: ignore[no-any-return]

    def _removal_listener(self) -> Callable[[bytes], None] | None:
        return self._forget

    def _put_time_keyed(self, key: bytes, cache_key: bytes, start: int, end: int, time: int, value: bytes | None) -> None:
        """Cache a write of the window or session [start, end] of `key`, indexed by `time` (its start or end)."""
        self._put_cached(cache_key, value)
        index = self._by_key.get(key)
        if index is None:
            self._by_key[key] = _KeyIndex(cache_key, start, end, time)
            self._keys_of[cache_key] = key
        elif index.add(cache_key, start, end, time):
            self._keys_of[cache_key] = key

    def _forget(self, cache_key: bytes) -> None:
        key = self._keys_of.pop(cache_key, None)
        if key is not None and self._by_key[key].remove(cache_key):
            del self._by_key[key]

    def _cached_windows(
        self, key_from: bytes | None, key_to: bytes | None, time_from: int
    ) -> Iterator[tuple[bytes, int, int, bytes | None]]:
        """(key, start, end, value or None) of the cached entries within the key range, unordered.

        For one key, only entries whose indexed time (start, or end for sessions) is at least
        `time_from`. A clean entry the store below still keeps is left out: the store answers the
        same for it (it got that write when it was flushed), so reads merge only what differs.
        """
        named = self._named
        by_key = self._by_key
        if named is None or not by_key:
            return
        entries, dirty = named.entries, named.dirty
        expired = self._expired_below()
        if key_from is not None and key_from == key_to:
            index = by_key.get(key_from)
            if index is None:
                return
            windows = index.windows
            for time, cache_key in index.since(time_from):
                if time <= expired or cache_key in dirty:
                    start, end, _ = windows[cache_key]
                    yield key_from, start, end, entries[cache_key].value
            return
        for key, index in list(by_key.items()):
            if (key_from is None or key >= key_from) and (key_to is None or key <= key_to):
                for cache_key, (start, end, time) in index.windows.items():
                    if time <= expired or cache_key in dirty:
                        yield key, start, end, entries[cache_key].value

    def _expired_below(self) -> int:
        """The latest time the store below has expired (all of time if it does not say)."""
        expired: int | None = getattr(self._bottom, "expired_through", None)
        return _MAX_TIME if expired is None else expired

    def _flush_entries(self, batch: list[tuple[bytes, CacheEntry]]) -> None:
        """Write through, then unindex the deletes now clean: the store below has them, they hide nothing."""
        super()._flush_entries(batch)
        entries = self._named.entries if self._named is not None else {}
        for cache_key, _ in batch:
            entry = entries.get(cache_key)
            if entry is not None and entry.value is None and not entry.dirty:
                self._forget(cache_key)

    def __getattr__(self, name: str) -> Any:
        """What the store below has beyond the protocol (segment interval, drop counts, entry count)."""
        if name == "_wrapped":
            raise AttributeError(name)
        return getattr(self._wrapped, name)


class _KeyIndex:
    """One record key's cached windows or sessions: (start, end, time) by cache key, and the cache
    keys in time order, so a read of a time range skips the older ones (a hot session key
    collects a tombstone per merge between two commits)."""

    __slots__ = ("order", "windows")

    def __init__(self, cache_key: bytes, start: int, end: int, time: int) -> None:
        self.windows = {cache_key: (start, end, time)}
        self.order = [(time, cache_key)]

    def add(self, cache_key: bytes, start: int, end: int, time: int) -> bool:
        """Index a cache key; False if it already was."""
        if cache_key in self.windows:
            return False
        self.windows[cache_key] = (start, end, time)
        order = self.order
        if not order or order[-1][0] <= time:
            order.append((time, cache_key))
        else:
            insort(order, (time, cache_key))
        return True

    def remove(self, cache_key: bytes) -> bool:
        """Unindex a cache key; True if the key has nothing left."""
        window = self.windows.pop(cache_key, None)
        if window is not None:
            order = self.order
            for position in range(bisect_left(order, (window[2],)), len(order)):
                if order[position][1] == cache_key:
                    del order[position]
                    break
        return not self.windows

    def since(self, time: int) -> list[tuple[int, bytes]]:
        order = self.order
        return order[bisect_left(order, (time,)) :] if order and order[0][0] < time else order


class _InvalidatingContext:
    """The context the store below sees: its restore callback first evicts the restored keys
    from the cache, so a read cached before a restore (standby updates) never hides it. The
    changelog keys are the cache keys of every caching layer."""

    def __init__(self, context: Any, invalidate: Callable[[list[tuple[bytes, bytes | None]]], None]) -> None:
        self._context = context
        self._invalidate = invalidate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def register(self, store: StateStore, restore_callback: Any = None) -> None:
        if restore_callback is None:
            self._context.register(store, None)
            return
        invalidate = self._invalidate

        def restore(batch: Iterable[tuple[bytes, bytes | None]]) -> None:
            records = list(batch)
            invalidate(records)
            restore_callback(records)

        self._context.register(store, restore)
