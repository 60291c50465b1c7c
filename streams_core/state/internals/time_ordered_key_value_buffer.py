"""TimeOrderedKeyValueBuffer: the grace-period buffer of a versioned stream-table join (KIP-923).

Java's `RocksDBTimeOrderedKeyValueBuffer`, named `<join name>-Buffer`: stream records wait in it
until the largest timestamp buffered so far passes theirs by the grace period, then leave in the
order of their store key, Java's time-first window key

    0x00 (the time-first prefix), timestamp (8 bytes), serialized key, sequence number (4 bytes)

(big-endian; the sequence number tells apart records of one key and timestamp). The changelog
is keyed by that store key; its value is a `BufferValue` with the record's context and its
serialized value as the new value (no prior or old value, buffer time 0), as Java logs it;
a tombstone when the record left. Unlike Java's, the records are held in memory (a heap) and
restored from the beginning of the changelog when the task starts; the largest timestamp met in
the changelog, tombstones included, is `restored_stream_time` (Java's store resumes the same way).
"""

from __future__ import annotations

import heapq
import struct
from typing import Any, Generic, TypeVar

from streams_core.common.store import StateStoreContext
from streams_core.processor.processor import Record
from streams_core.serde import Serde
from streams_core.state.internals.buffer_value import BufferValue, RecordContext
from streams_core.state.internals.changelogged_buffer import BufferStoreBuilder, ChangeloggedBuffer

__all__ = ["JoinBufferBuilder", "TimeOrderedKeyValueBuffer"]

K = TypeVar("K")
V = TypeVar("V")

_TIME_FIRST = b"\x00"
_TIMESTAMP = struct.Struct(">q")
_SEQNUM = struct.Struct(">i")


class TimeOrderedKeyValueBuffer(ChangeloggedBuffer, Generic[K, V]):
    """Records by (timestamp, serialized key, sequence number); `evict_until` hands them back in that order."""

    def __init__(self, name: str, key_serde: Serde[K] | None, value_serde: Serde[V] | None, logging_enabled: bool) -> None:
        super().__init__(name, logging_enabled)
        self._given_serdes = (key_serde, value_serde)
        self._heap: list[tuple[int, bytes]] = []
        self._live: dict[bytes, tuple[Record[K, V], RecordContext]] = {}
        self._seq = 0

    def _init(self, context: StateStoreContext) -> None:
        key_serde, value_serde = self._given_serdes
        self.key_serde: Serde[K] = key_serde or getattr(context, "key_serde", None)  # type: ignore[assignment]
        self.value_serde: Serde[V] = value_serde or getattr(context, "value_serde", None)  # type: ignore[assignment]

    @property
    def num_records(self) -> int:
        return len(self._live)

    def put(self, record: Record[K, V], context: RecordContext) -> None:
        key_bytes = self.key_serde.serialize(None, record.key) or b""
        self._seq = (self._seq + 1) & 0x7FFFFFFF
        timestamp = record.timestamp
        store_key = _TIME_FIRST + _TIMESTAMP.pack(timestamp) + key_bytes + _SEQNUM.pack(self._seq)
        self._live[store_key] = (record, context)
        heapq.heappush(self._heap, (timestamp, store_key))
        self._mark(store_key)

    def evict_until(self, time: int) -> list[Record[K, V]]:
        """Remove and return, oldest first, the records with a timestamp at or before `time`."""
        heap, live = self._heap, self._live
        out = []
        while heap and heap[0][0] <= time:
            _, store_key = heapq.heappop(heap)
            found = live.pop(store_key, None)
            if found is not None:
                out.append(found[0])
                self._mark(store_key)
        return out

    # -- the changelog --------------------------------------------------------------------------

    def _changelog_value(self, key: bytes) -> tuple[bytes, int] | None:
        found = self._live.get(key)
        if found is None:
            return None
        record, context = found
        value = BufferValue(context, None, None, self.value_serde.serialize(None, record.value), 0)
        return value.serialize(), record.timestamp

    def _restore(self, key: bytes, value: bytes | None) -> None:
        (timestamp,) = _TIMESTAMP.unpack_from(key, 1)
        (seq,) = _SEQNUM.unpack_from(key, len(key) - 4)
        self.restored_stream_time = max(self.restored_stream_time, timestamp)
        self._seq = max(self._seq, seq)
        if value is None:
            self._live.pop(key, None)
            return
        buffered = BufferValue.deserialize(value)
        context = buffered.context
        record_key = self.key_serde.deserialize(None, key[9:-4])
        record = Record(record_key, self.value_serde.deserialize(None, buffered.new), context.timestamp, context.headers)
        if key not in self._live:
            heapq.heappush(self._heap, (timestamp, key))
        self._live[key] = (record, context)  # type: ignore[assignment]

    def _clear(self) -> None:
        self._heap.clear()
        self._live.clear()


class JoinBufferBuilder(BufferStoreBuilder):
    """Builds a task's stream-table join buffer (`<join name>-Buffer`)."""

    def __init__(self, name: str, key_serde: Serde[Any] | None, value_serde: Serde[Any] | None) -> None:
        super().__init__(name, key_serde, value_serde)

    def build(self) -> TimeOrderedKeyValueBuffer[Any, Any]:
        return TimeOrderedKeyValueBuffer(self.name, self.key_serde, self.value_serde, self.logging_enabled)
