"""What the caching layers (key-value, window, session) share: the thread cache, flushing, listeners.

A caching layer keeps its writes in a named cache of the stream thread's `ThreadCache`
(`<task id>-<store>`), keyed by the bytes the store's changelog uses. A commit (`flush`) or an
eviction hands the dirty entries to `_flush_entries`, which writes each to the store below (and
so to the changelog) with the record context of its write, and tells the flush listener a DSL
processor set, as that processor. Reads never flush: each layer merges its dirty entries with
the store below (`merged_sorted`).

Time-keyed layers (window, session) also track the largest time they were written, so that
reads hide what the store below would already have expired had it seen those writes, and keep
an index of dirty entries by record key, so the per-record reads of windowed aggregations do
not scan the whole cache.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from streams_core.processor.processor import Record
from streams_core.state.internals.abstract_window_store import NO_TIMESTAMP
from streams_core.state.internals.thread_cache import CacheEntry, NamedCache, ThreadCache
from streams_core.state.internals.wrapped_state_store import WrappedStateStore
from streams_core.state.store import StateStore, StateStoreContext

__all__ = ["DEFAULT_CACHE_BYTES", "BytesFlushListener", "CachingStateStore", "CachingTimeKeyedStore"]

log = logging.getLogger(__name__)

DEFAULT_CACHE_BYTES = 10 * 1024 * 1024

BytesFlushListener = Callable[[Any, bytes | None, bytes | None, int], None]
"""(key, new value, old value, timestamp) of one flushed entry; values are None for deletes. The
key is the store's key: bytes for key-value stores, `Windowed[bytes]` for window and session stores."""


class CachingStateStore(WrappedStateStore[Any]):
    """Caches a bytes store in the thread's record cache; subclasses say how an entry reaches the store below."""

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
        self._named = cache.named_cache(f"{context.task_id}-{self.name}", self._flush_entries)

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
                old = self._read_below(location)
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
    """A caching layer over a window or session store: expiry and a per-key index of dirty entries.

    The store below learns of writes only when they are flushed, so its observed stream time
    lags; reads here use the largest time written through this layer or seen below, and clip
    their ranges to what is live by it, as the store below would answer without the cache.
    """

    _times_by_end = False
    """Whether stream time is the largest end (sessions) rather than the largest start (windows)."""

    def __init__(self, wrapped: Any) -> None:
        super().__init__(wrapped)
        self._observed = NO_TIMESTAMP
        self._dirty_by_key: dict[bytes, _KeyIndex] = {}

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        super().init(context, root)
        bottom = self._wrapped
        while not hasattr(type(bottom), "observed_stream_time") and hasattr(bottom, "wrapped"):
            bottom = bottom.wrapped()
        self._bottom = bottom
        self._retention: int = self._wrapped.retention_period

    @property
    def retention_period(self) -> int:
        return self._wrapped.retention_period  # type: ignore[no-any-return]

    @property
    def observed_stream_time(self) -> int:
        """The largest time written through this layer or observed by the bytes store below."""
        below: int = getattr(self._bottom, "observed_stream_time", NO_TIMESTAMP)
        return max(self._observed, below)

    def _live_from(self) -> int:
        """The earliest time still live (window start / session end), as the store below computes it."""
        return self.observed_stream_time - self._retention + 1

    def _put_time_keyed(self, key: bytes, cache_key: bytes, start: int, end: int, value: bytes | None) -> None:
        """Cache a write of the window or session [start, end] of `key`; `end` moves stream time for sessions."""
        time = end if self._times_by_end else start
        if time > self._observed:
            self._observed = time
        self._put_cached(cache_key, value)
        index = self._dirty_by_key.get(key)
        if index is None:
            self._dirty_by_key[key] = _KeyIndex(cache_key, start, end, time)
        else:
            index.add(cache_key, start, end, time)

    def _dirty_windows(
        self, key_from: bytes | None, key_to: bytes | None, time_from: int
    ) -> Iterator[tuple[bytes, int, int, bytes | None]]:
        """(key, start, end, value or None) of the dirty entries within the key range, unordered.

        For one key, only entries whose time (start, or end for sessions) is at least `time_from`.
        """
        named = self._named
        by_key = self._dirty_by_key
        if named is None or not by_key:
            return
        dirty, entries = named.dirty, named.entries
        if key_from is not None and key_from == key_to:
            index = by_key.get(key_from)
            if index is None:
                return
            windows = index.windows
            for _, cache_key in index.since(time_from):
                if cache_key in dirty:  # else invalidated by a restore
                    start, end = windows[cache_key]
                    yield key_from, start, end, entries[cache_key].value
            return
        for key, index in list(by_key.items()):
            if (key_from is None or key >= key_from) and (key_to is None or key <= key_to):
                for cache_key, (start, end) in index.windows.items():
                    if cache_key in dirty:
                        yield key, start, end, entries[cache_key].value

    def _flush_entries(self, batch: list[tuple[bytes, CacheEntry]]) -> None:
        self._dirty_by_key = {}  # first: writes made by downstream processors during the flush stay indexed
        super()._flush_entries(batch)

    def __getattr__(self, name: str) -> Any:
        """What the store below has beyond the protocol (segment interval, drop counts, entry count)."""
        if name == "_wrapped":
            raise AttributeError(name)
        return getattr(self._wrapped, name)


class _KeyIndex:
    """One record key's dirty windows or sessions: their (start, end) by cache key, and the cache
    keys in time order, so a read of a time range skips the older ones (a hot session key
    collects a tombstone per merge between two commits)."""

    __slots__ = ("order", "windows")

    def __init__(self, cache_key: bytes, start: int, end: int, time: int) -> None:
        self.windows = {cache_key: (start, end)}
        self.order = [(time, cache_key)]

    def add(self, cache_key: bytes, start: int, end: int, time: int) -> None:
        if cache_key in self.windows:
            return
        self.windows[cache_key] = (start, end)
        order = self.order
        if order[-1][0] <= time:
            order.append((time, cache_key))
        else:
            insort(order, (time, cache_key))

    def since(self, time: int) -> list[tuple[int, bytes]]:
        order = self.order
        return order[bisect_left(order, (time,)) :] if order[0][0] < time else order


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
