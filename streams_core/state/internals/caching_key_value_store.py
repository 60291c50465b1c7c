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
from typing import Any

from streams_core.processor.processor import Record
from streams_core.state.internals.thread_cache import CacheEntry, NamedCache, ThreadCache
from streams_core.state.internals.wrapped_state_store import WrappedStateStore
from streams_core.state.store import KeyValue, KeyValueStore, StateStore, StateStoreContext

__all__ = ["DEFAULT_CACHE_BYTES", "BytesFlushListener", "CachingKeyValueStore"]

log = logging.getLogger(__name__)

DEFAULT_CACHE_BYTES = 10 * 1024 * 1024

BytesFlushListener = Callable[[bytes, bytes | None, bytes | None, int], None]
"""(key, new value, old value, timestamp) of one flushed entry; values are None for deletes."""


class CachingKeyValueStore(WrappedStateStore[Any]):
    """Caches a key-value bytes store in the thread's record cache."""

    def __init__(self, wrapped: KeyValueStore[bytes, bytes]) -> None:
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
        return _merged(self._dirty(lambda k: _within(k, from_key, to_key)), self._wrapped.range(from_key, to_key), False)

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[KeyValue[bytes, bytes]]:
        dirty = self._dirty(lambda k: _within(k, from_key, to_key), reverse=True)
        return _merged(dirty, self._wrapped.reverse_range(from_key, to_key), True)

    def prefix_scan(self, prefix: bytes, prefix_serde: Any = None) -> Iterator[KeyValue[bytes, bytes]]:
        if not isinstance(prefix, bytes | bytearray):  # a typed prefix: the store below serializes it
            self._flush_cache()
            return self._wrapped.prefix_scan(prefix, prefix_serde)
        return _merged(self._dirty(lambda k: k.startswith(prefix)), self._wrapped.prefix_scan(prefix, prefix_serde), False)

    def all(self) -> Iterator[KeyValue[bytes, bytes]]:
        return _merged(self._dirty(lambda k: True), self._wrapped.all(), False)

    def reverse_all(self) -> Iterator[KeyValue[bytes, bytes]]:
        return _merged(self._dirty(lambda k: True, reverse=True), self._wrapped.reverse_all(), True)

    def approximate_num_entries(self) -> int:
        """The store below's estimate (cached writes not yet flushed are not counted, as in Kafka Streams)."""
        return self._wrapped.approximate_num_entries()  # type: ignore[no-any-return]

    def _dirty(self, wanted: Callable[[bytes], bool], *, reverse: bool = False) -> list[tuple[bytes, bytes | None]]:
        """This store's not-yet-flushed entries that `wanted` selects, in key order."""
        named = self._named
        if named is None or not named.dirty:
            return []
        entries = named.entries
        return sorted(((k, entries[k].value) for k in named.dirty if wanted(k)), reverse=reverse)

    # -- writes -------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes | None) -> None:
        assert self._cache is not None and self._named is not None
        timestamp = self._context.timestamp
        self._cache.put(self._named, key, value, True, -1 if timestamp is None else timestamp)

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
        """Write flushed entries to the store below; tell the listener, as the processor that set it."""
        wrapped = self._wrapped
        listener = self._listener
        context = self._context
        saved = (getattr(context, "node", None), getattr(context, "record", None))
        try:
            if listener is not None and self._listener_node is not None:
                context.node = self._listener_node
            for key, entry in batch:
                if hasattr(context, "record"):
                    context.record = Record(key, entry.value, max(entry.timestamp, 0))
                old = wrapped.get(key) if listener is not None else None
                if entry.value is None:
                    wrapped.delete(key)
                else:
                    wrapped.put(key, entry.value)
                if listener is not None and (entry.value is not None or old is not None):
                    listener(key, entry.value, old, max(entry.timestamp, 0))
        finally:
            if hasattr(context, "record"):
                context.node, context.record = saved


def _within(key: bytes, from_key: bytes | None, to_key: bytes | None) -> bool:
    return (from_key is None or key >= from_key) and (to_key is None or key <= to_key)


def _merged(
    dirty: list[tuple[bytes, bytes | None]], stored: Iterator[KeyValue[bytes, bytes]], reverse: bool
) -> Iterator[KeyValue[bytes, bytes]]:
    """Dirty cache entries and stored entries in one key order; the cache wins, a cached None deletes."""
    if not dirty:
        yield from stored
        return
    def before(a: bytes, b: bytes) -> bool:
        return a > b if reverse else a < b

    pending = iter(dirty)
    cached = next(pending, None)
    for entry in stored:
        while cached is not None and before(cached[0], entry.key):
            if cached[1] is not None:
                yield KeyValue(cached[0], cached[1])
            cached = next(pending, None)
        if cached is not None and cached[0] == entry.key:
            if cached[1] is not None:
                yield KeyValue(cached[0], cached[1])
            cached = next(pending, None)
            continue
        yield entry
    while cached is not None:
        if cached[1] is not None:
            yield KeyValue(cached[0], cached[1])
        cached = next(pending, None)


class _InvalidatingContext:
    """The context the store below sees: its restore callback first evicts the restored keys
    from the cache, so a read cached before a restore (standby updates) never hides it."""

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
