"""InMemoryTimeOrderedKeyValueChangeBuffer: the store of `KTable.suppress`, Java's class of that name.

It holds a table's `Change` updates by key, each with a buffer time, and gives them back oldest
first (by buffer time, then serialized key). A newer update of a buffered key replaces it in
place: the key keeps its buffer time and position, and the value it had before it was first
buffered (the prior value, which a join reading the suppressed table sees while the key waits).
Each entry keeps its record context and its size as Java counts it (buffer time, key, the value
bytes and the context's estimate).

Its changelog (`<application.id>-<store>-changelog`) holds, per key, the serialized key and a
`BufferValue` (record context, prior, old and new value, buffer time: Java's v3 layout, with the
header `v` = 3), or a tombstone once the key was emitted. Restoring rebuilds the entries, in
changelog order, as Java's `restoreBatch` does.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from streams_core.common.change import Change
from streams_core.common.store import StateStoreContext
from streams_core.processor.processor import Record
from streams_core.serde import Serde
from streams_core.state.internals.buffer_value import CHANGELOG_HEADERS, BufferValue, RecordContext
from streams_core.state.internals.changelogged_buffer import BufferStoreBuilder, ChangeloggedBuffer

__all__ = ["BufferEntry", "InMemoryTimeOrderedKeyValueChangeBuffer", "SuppressionBufferBuilder"]

_LATEST = 2**63 - 1

K = TypeVar("K")
V = TypeVar("V")


class BufferEntry(Generic[K, V]):
    """A buffered key: buffer time, arrival order, its latest update and context, prior value, size."""

    __slots__ = ("context", "key_bytes", "prior", "record", "seq", "size", "time")

    def __init__(
        self, time: int, seq: int, key_bytes: bytes, record: Record[K, Change[V]], context: RecordContext,
        prior: V | None,
    ) -> None:  # fmt: skip
        self.time = time
        self.seq = seq
        self.key_bytes = key_bytes
        self.record = record
        self.context = context
        self.prior = prior
        self.size = 0


class InMemoryTimeOrderedKeyValueChangeBuffer(ChangeloggedBuffer, Generic[K, V]):
    """Buffered `Change` updates by key in buffer-time order; `evict_oldest` hands them back."""

    changelog_headers = CHANGELOG_HEADERS

    def __init__(
        self, name: str, key_serde: Serde[K] | None, value_serde: Serde[V] | None, logging_enabled: bool,
        count_bytes: bool,
    ) -> None:  # fmt: skip
        super().__init__(name, logging_enabled)
        self._given_serdes = (key_serde, value_serde)
        self._count_bytes = count_bytes
        self._entries: dict[K, BufferEntry[K, V]] = {}
        self._keys: dict[bytes, K] = {}
        """The buffered keys by their bytes (what the changelog is keyed by)."""
        self._heap: list[tuple[int, bytes, int, K]] = []
        self._seq = itertools.count()
        self.buffer_size = 0
        """The entries' bytes as Java counts them (only when `count_bytes`: a byte-bounded buffer)."""

    def _init(self, context: StateStoreContext) -> None:
        key_serde, value_serde = self._given_serdes
        self.key_serde: Serde[K] = key_serde or getattr(context, "key_serde", None)  # type: ignore[assignment]
        self.value_serde: Serde[V] = value_serde or getattr(context, "value_serde", None)  # type: ignore[assignment]

    @property
    def num_records(self) -> int:
        return len(self._entries)

    @property
    def min_timestamp(self) -> int | None:
        """The smallest buffer time, None when empty."""
        heap, entries = self._heap, self._entries
        while heap:
            time, _, seq, key = heap[0]
            entry = entries.get(key)
            if entry is not None and entry.seq == seq:
                return time
            heapq.heappop(heap)  # emitted or replaced before
        return None

    def buffered(self, key: K) -> BufferEntry[K, V] | None:
        """The entry of `key`, if buffered (its `prior` is the suppressed table's value)."""
        return self._entries.get(key)

    def put(self, time: int, record: Record[K, Change[V]], context: RecordContext) -> None:
        """Buffer `record` (a key already buffered keeps its time, position and prior value)."""
        key = record.key
        entry = self._entries.get(key)
        if entry is None:
            key_bytes = self.key_serde.serialize(None, key) or b""
            entry = BufferEntry(time, next(self._seq), key_bytes, record, context, record.value.old_value)
            self._entries[key] = entry
            self._keys[key_bytes] = key
            heapq.heappush(self._heap, (time, key_bytes, entry.seq, key))
        else:
            entry.record = record
            entry.context = context
        if self._count_bytes:
            self.buffer_size -= entry.size
            entry.size = self._size_of(entry)
            self.buffer_size += entry.size
        self._mark(entry.key_bytes)

    def evict_until(self, time: int) -> Iterator[BufferEntry[K, V]]:
        """Remove and yield, oldest first, the entries with a buffer time at or before `time` (each
        removed before it is yielded, so what its consumer forwards sees it gone)."""
        heap, entries, keys, mark = self._heap, self._entries, self._keys, self._mark
        while heap and heap[0][0] <= time:
            _, _, seq, key = heapq.heappop(heap)
            entry = entries.get(key)
            if entry is None or entry.seq != seq:
                continue  # emitted or replaced before
            del entries[key]
            del keys[entry.key_bytes]
            self.buffer_size -= entry.size
            mark(entry.key_bytes)
            yield entry

    def evict_oldest(self) -> BufferEntry[K, V] | None:
        """Remove and return the entry with the smallest (buffer time, serialized key); None when empty."""
        return next(self.evict_until(_LATEST), None)

    def _serialized(self, value: V | None) -> bytes | None:
        return None if value is None else self.value_serde.serialize(None, value)

    def _size_of(self, entry: BufferEntry[K, V]) -> int:
        """Java's `computeRecordSize`: buffer time, key, prior/old/new values (an old value equal
        to the prior one counted once) and the record context."""
        prior = self._serialized(entry.prior)
        change = entry.record.value
        old, new = self._serialized(change.old_value), self._serialized(change.new_value)
        size = 8 + len(entry.key_bytes) + entry.context.size + len(new or b"") + len(prior or b"")
        return size + (0 if old is None or old == prior else len(old))

    # -- the changelog --------------------------------------------------------------------------

    def _changelog_value(self, key: bytes) -> tuple[bytes, int] | None:
        found = self._keys.get(key)
        if found is None:
            return None
        entry = self._entries[found]
        change = entry.record.value
        value = BufferValue(entry.context, self._serialized(entry.prior), self._serialized(change.old_value),
                            self._serialized(change.new_value), entry.time)  # fmt: skip
        return value.serialize(), entry.context.timestamp

    def _restore(self, key_bytes: bytes, value: bytes | None) -> None:
        if value is None:
            gone = self._keys.pop(key_bytes, None)
            if gone is not None:
                self.buffer_size -= self._entries.pop(gone).size
            return
        key: K = self.key_serde.deserialize(None, key_bytes)  # type: ignore[assignment]
        entry = self._entries.get(key)
        buffered = BufferValue.deserialize(value)
        context = buffered.context
        deserialize = self.value_serde.deserialize
        change = Change(deserialize(None, buffered.new), deserialize(None, buffered.old))
        record = Record(key, change, context.timestamp, context.headers)
        if entry is None:
            entry = BufferEntry(buffered.buffer_time, next(self._seq), key_bytes, record, context, None)
            self._entries[key] = entry
            self._keys[key_bytes] = key
            heapq.heappush(self._heap, (entry.time, key_bytes, entry.seq, key))
        entry.record, entry.context = record, context
        entry.prior = deserialize(None, buffered.prior)
        if self._count_bytes:
            self.buffer_size -= entry.size
            entry.size = self._size_of(entry)
            self.buffer_size += entry.size
        self.restored_stream_time = max(self.restored_stream_time, context.timestamp)

    def _clear(self) -> None:
        self._entries.clear()
        self._keys.clear()
        self._heap.clear()
        self.buffer_size = 0


class SuppressionBufferBuilder(BufferStoreBuilder):
    """Builds a task's suppression buffer (`KTABLE-SUPPRESS-STATE-STORE-<n>` or `<name>-store`)."""

    def __init__(self, name: str, key_serde: Serde[Any] | None, value_serde: Serde[Any] | None, count_bytes: bool) -> None:
        super().__init__(name, key_serde, value_serde)
        self._count_bytes = count_bytes

    def build(self) -> InMemoryTimeOrderedKeyValueChangeBuffer[Any, Any]:
        return InMemoryTimeOrderedKeyValueChangeBuffer(
            self.name, self.key_serde, self.value_serde, self.logging_enabled, self._count_bytes
        )
