"""MeteredKeyValueStore: the typed layer of a key-value store (serdes, counts, opt-in latency).

Over a record cache it keeps a write buffer: the typed values of the keys written since it was
last handed to the cache, so that an aggregation's get and put of a hot key skip the cache's
layers and a value's deserialization (docs/state.md, "The write buffer").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol, TypeVar

from streams_core.common.store import KeyValue, KeyValueStore, StateStore, StateStoreContext, key_value
from streams_core.errors import DeserializationError, InvalidStateStoreError, SerializationError
from streams_core.serde import Serde
from streams_core.state.internals.metered_state_store import MeteredStateStore

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["WRITE_BUFFER_ENTRIES", "MeteredKeyValueStore", "WriteBufferTarget"]

WRITE_BUFFER_ENTRIES = 10_000
"""The most keys a store's write buffer holds before it hands them to the record cache."""


class WriteBufferTarget(Protocol):
    """What takes a typed layer's buffered writes: the caching layer below it offers itself
    (`write_buffer_target()`) when its record cache has a budget, so the typed layer needs no
    knowledge of the layers below (as `set_flush_listener` finds the layer that caches)."""

    def put_stamped(self, key: bytes, value: bytes | None, timestamp: int) -> None:
        """A buffered write, with the timestamp of the record that made it."""

    def count_hits(self, hits: int) -> None:
        """Reads the buffer answered: the cache's hits."""


_KEY_TYPES = frozenset((str, int, bytes))
"""Key types whose equal keys (in a dict) are the same key in bytes under a serde that gives them
back unchanged (not float: 0.0 == -0.0)."""


class MeteredKeyValueStore(MeteredStateStore[KeyValueStore[bytes, bytes], K, V]):
    """A `KeyValueStore[K, V]` over a bytes store; what processors and queries use.

    Ranges and scans follow the byte order of serialized keys, which is not always the natural
    order of K: with `Serdes.Long()` (signed big-endian) negative numbers sort after positive
    ones; with `Serdes.String()` it is UTF-8 code point order.
    """

    OPERATIONS = (
        "get", "put", "put_if_absent", "put_all", "delete", "range", "reverse_range",
        "prefix_scan", "all", "reverse_all", "approximate_num_entries", "flush",
    )  # fmt: skip

    def __init__(
        self,
        wrapped: KeyValueStore[bytes, bytes],
        key_serde: Serde[K] | None,
        value_serde: Serde[V] | None,
        metrics_scope: str = "",
        *,
        record_latency: bool = False,
    ) -> None:
        super().__init__(wrapped, key_serde, value_serde, metrics_scope, record_latency=record_latency)
        self._buffer: dict[Any, tuple[Any, bytes, int]] = {}
        """key -> (value, the key's bytes, record timestamp), in the order last written."""
        self._buffered_key: type | None = None
        """The key type the buffer holds; None: no buffer (no record cache below, or serdes that do
        not give the values back unchanged)."""
        self._value_type: type | None = None
        self._pair_types: tuple[type, type, type] | None = None
        """The values the buffer holds, besides None: those of `_value_type`, and pairs of these types."""
        self._buffered_hits = 0
        """Reads the buffer answered since it was last handed over (the cache counts them as its hits then)."""
        self._context: Any = None
        self._cache: WriteBufferTarget | None = None
        """The caching layer below, while the buffer is on: it takes the buffered writes."""

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        super().init(context, root)
        self._context = context
        self._buffer = {}
        below = self._wrapped  # the layer right below offers, not one a forwarding `__getattr__` reaches
        offer = getattr(type(below), "write_buffer_target", None)
        cache: WriteBufferTarget | None = offer(below) if offer is not None else None
        key_type = self._serdes.key_serde.exact_type
        value_serde = self._serdes.value_serde
        self._value_type, self._pair_types = value_serde.exact_type, value_serde.exact_pair
        exact = self._value_type is not None or self._pair_types is not None
        self._cache = cache if key_type in _KEY_TYPES and exact else None
        self._buffered_key = key_type if self._cache is not None else None

    def get(self, key: K) -> V | None:
        self._counts["get"] += 1
        if type(key) is self._buffered_key:
            entry = self._buffer.get(key)
            if entry is not None:
                self._buffered_hits += 1
                return entry[0]  # type: ignore[no-any-return]
        serdes = self._serdes
        raw = self._wrapped.get(serdes.last_raw_key if key is serdes.last_key else serdes.raw_key(key))
        if raw is None:
            return None
        try:  # StateSerdes.value_from, inlined: this runs once per record of every aggregation
            return serdes.value_serde.deserialize(serdes.topic, raw)
        except DeserializationError:
            raise
        except Exception as exc:
            raise serdes.value_deserialization_error(exc) from exc

    def put(self, key: K, value: V | None) -> None:
        """Store `value` for `key`; None deletes it (a tombstone)."""
        self._counts["put"] += 1
        serdes = self._serdes
        buffer = self._buffer
        pair = self._pair_types
        buffered = type(key) is self._buffered_key and (
            value is None
            or type(value) is self._value_type
            or (pair is not None and type(value) is pair[0] and type(value[0]) is pair[1] and type(value[1]) is pair[2])  # type: ignore[index]
        )  # fmt: skip
        if not buffered:
            if buffer:
                self._drain()
            raw_key = serdes.last_raw_key if key is serdes.last_key else serdes.raw_key(key)
            try:  # StateSerdes.raw_value, inlined as in `get`
                raw = serdes.value_serde.serialize(serdes.topic, value)
            except SerializationError:
                raise
            except Exception as exc:
                raise serdes.value_serialization_error(value, exc) from exc
            self._wrapped.put(raw_key, raw)
            return
        entry = buffer.pop(key, None)  # written again: to the end of the write order
        if entry is not None:
            raw_key = entry[1]
        else:
            raw_key = serdes.last_raw_key if key is serdes.last_key else serdes.raw_key(key)
        timestamp = self._context.timestamp
        buffer[key] = (value, raw_key, -1 if timestamp is None else timestamp)
        if len(buffer) >= WRITE_BUFFER_ENTRIES:
            self._drain()

    def _drain(self) -> None:
        """Hand the buffered writes to the record cache, in the order they were last written, their
        values serialized now. A value the serde refuses stays buffered, with the writes after it,
        and its error is raised (the task fails at this put or commit, as at the put in Java).

        Each entry leaves the buffer once the cache holds it: a read while the cache takes them
        (an eviction forwards downstream) finds every write in one or the other."""
        buffer = self._buffer
        below = self._cache
        if not buffer or below is None:
            return
        raw_value = self._serdes.raw_value
        for key, entry in list(buffer.items()):
            value, raw_key, timestamp = entry
            try:
                raw = raw_value(value)
            except SerializationError as error:
                error.add_note(f"written for key {key!r} of store {self.name!r} since the last commit")
                raise
            below.put_stamped(raw_key, raw, timestamp)
            if buffer.get(key) is entry:  # else written again meanwhile, and still buffered
                del buffer[key]
        if self._buffered_hits:
            below.count_hits(self._buffered_hits)
            self._buffered_hits = 0

    def _drain_for_read(self) -> None:
        """`_drain` before a scan, which may be a query: a value the serde refuses makes the store
        unreadable until its task fails (503 over REST), never a scan without that write."""
        try:
            self._drain()
        except SerializationError as exc:
            raise InvalidStateStoreError(f"store {self.name!r} cannot be read now: {exc}") from exc

    def put_if_absent(self, key: K, value: V) -> V | None:
        """Put unless the key has a value; returns the existing value (None if it put)."""
        self._counts["put_if_absent"] += 1
        self._drain()
        serdes = self._serdes
        old = self._wrapped.put_if_absent(serdes.raw_key(key), serdes.raw_value(value))  # type: ignore[arg-type]
        return None if old is None else serdes.value_from(old)

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        self._counts["put_all"] += 1
        self._drain()
        serdes = self._serdes
        self._wrapped.put_all([(serdes.raw_key(k), serdes.raw_value(v)) for k, v in entries])

    def delete(self, key: K) -> V | None:
        """Remove the key and return its old value."""
        self._counts["delete"] += 1
        self._drain()
        serdes = self._serdes
        old = self._wrapped.delete(serdes.raw_key(key))
        return None if old is None else serdes.value_from(old)

    def range(self, from_key: K | None, to_key: K | None) -> Iterator[KeyValue[K, V]]:
        """Entries with from_key <= key <= to_key by serialized bytes (None: unbounded)."""
        self._counts["range"] += 1
        self._drain_for_read()
        return self._typed(self._wrapped.range(self._bound(from_key), self._bound(to_key)))

    def reverse_range(self, from_key: K | None, to_key: K | None) -> Iterator[KeyValue[K, V]]:
        self._counts["reverse_range"] += 1
        self._drain_for_read()
        return self._typed(self._wrapped.reverse_range(self._bound(from_key), self._bound(to_key)))

    def prefix_scan(self, prefix: Any, prefix_serde: Serde[Any] | None = None) -> Iterator[KeyValue[K, V]]:
        """Entries whose serialized key starts with the serialized prefix (key serde by default)."""
        self._counts["prefix_scan"] += 1
        self._drain_for_read()
        return self._typed(self._wrapped.prefix_scan(self._serdes.raw_prefix(prefix, prefix_serde)))

    def all(self) -> Iterator[KeyValue[K, V]]:
        self._counts["all"] += 1
        self._drain_for_read()
        return self._typed(self._wrapped.all())

    def reverse_all(self) -> Iterator[KeyValue[K, V]]:
        self._counts["reverse_all"] += 1
        self._drain_for_read()
        return self._typed(self._wrapped.reverse_all())

    def approximate_num_entries(self) -> int:
        self._drain_for_read()
        return self._wrapped.approximate_num_entries()

    def flush(self) -> None:
        self._drain()
        super().flush()

    def close(self) -> None:
        """Buffered writes are dropped with the cache's (a clean close flushes first)."""
        self._buffer = {}
        super().close()

    def _bound(self, key: K | None) -> bytes | None:
        return None if key is None else self._serdes.raw_key(key)

    def _typed(self, entries: Iterator[KeyValue[bytes, bytes]]) -> Iterator[KeyValue[K, V]]:
        key_from, value_from = self._serdes.key_from, self._serdes.value_from
        for raw_key, raw_value in entries:
            yield key_value((key_from(raw_key), value_from(raw_value)))
