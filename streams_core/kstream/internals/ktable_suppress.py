"""KTableSuppress: hold a table's updates in a buffer and emit them later (`KTable.suppress`).

Each update is buffered under its key (a newer update replaces it, keeping the value the key
had before buffering as the old value) with a buffer time: the window end for final results,
the record timestamp for a time limit. Whenever a record arrives, the processor's observed
stream time (its largest record timestamp) minus the suppression duration is the expiry time,
and every entry with a buffer time at or before it is emitted, oldest first. For final
results the duration is the window's grace period, and buffered deletes of windows never
emitted are dropped. For sessions it is `2 * gap + grace + 1`: the session aggregation (as
Kafka Streams') still accepts a record at `end + gap` while stream time is within
`gap + grace` of it, so only then can no record extend a session; Kafka Streams waits
`gap + grace` and may emit a session that is extended afterwards. A bounded buffer that fills
either fails or emits its oldest entries.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from typing import Any

from streams_core.errors import StreamsError
from streams_core.kstream.internals.change import Change
from streams_core.processor.processor import Record

__all__ = ["KTableSuppress"]

log = logging.getLogger(__name__)

NO_TIMESTAMP = -1


class _Entry:
    __slots__ = ("prior", "record", "seq", "size", "time")

    def __init__(self, time: int, seq: int, record: Record[Any, Any], prior: Any, size: int) -> None:
        self.time = time
        self.seq = seq
        self.record = record
        self.prior = prior
        self.size = size


class KTableSuppress:
    """Buffers `Change` updates by key and forwards them once their buffer time expires."""

    def __init__(
        self,
        name: str,
        duration_ms: int,
        window_end_time: bool,
        drop_tombstones: bool,
        record_limit: int | None,
        byte_limit: int | None,
        fail_when_full: bool,
        serdes: Any = None,
    ) -> None:
        self._name = name
        self._duration = duration_ms
        self._window_end_time = window_end_time
        self._drop_tombstones = drop_tombstones
        self._record_limit = record_limit
        self._byte_limit = byte_limit
        self._fail_when_full = fail_when_full
        self._serdes = serdes
        self._entries: dict[Any, _Entry] = {}
        self._heap: list[tuple[int, int, Any]] = []
        self._seq = itertools.count()
        self._bytes = 0
        self._observed = NO_TIMESTAMP

    def init(self, context: Any) -> None:
        self._forward = context.forward
        if self._byte_limit is not None:
            key_serde, value_serde = self._serdes or (None, None)
            self._serdes = (key_serde or context.key_serde, value_serde or context.value_serde)

    def close(self) -> None:
        if self._entries:
            log.info("%s: closing with %d buffered updates not emitted", self._name, len(self._entries))

    def process(self, record: Record[Any, Any]) -> None:
        if record.timestamp > self._observed:
            self._observed = record.timestamp
        self._buffer(record)
        self._enforce()

    def _buffer(self, record: Record[Any, Any]) -> None:
        key = record.key
        time = key.window.end if self._window_end_time else record.timestamp
        existing = self._entries.pop(key, None)
        prior = record.value.old_value if existing is None else existing.prior
        if existing is not None:
            self._bytes -= existing.size
        size = self._size_of(key, record.value) if self._byte_limit is not None else 0
        entry = _Entry(time, next(self._seq), record, prior, size)
        self._entries[key] = entry
        self._bytes += size
        heapq.heappush(self._heap, (time, entry.seq, key))

    def _enforce(self) -> None:
        expiry = self._observed - self._duration
        while self._heap and self._heap[0][0] <= expiry:
            self._emit_oldest()
        while self._over_limit():
            if self._fail_when_full:
                raise StreamsError(
                    f"suppression buffer {self._name!r} is full ({len(self._entries)} records, {self._bytes} bytes; "
                    f"limits: {self._record_limit} records, {self._byte_limit} bytes); give it a larger "
                    "BufferConfig or emit early with emit_early_when_full()"
                )
            self._emit_oldest()

    def _over_limit(self) -> bool:
        return (self._record_limit is not None and len(self._entries) > self._record_limit) or (
            self._byte_limit is not None and self._bytes > self._byte_limit
        )

    def _emit_oldest(self) -> None:
        heap, entries = self._heap, self._entries
        while heap:
            _, seq, key = heapq.heappop(heap)
            entry = entries.get(key)
            if entry is None or entry.seq != seq:
                continue
            del entries[key]
            self._bytes -= entry.size
            record = entry.record
            new = record.value.new_value
            if new is None and self._drop_tombstones:
                return
            self._forward(record.with_value(Change(new, entry.prior)))
            return

    def _size_of(self, key: Any, change: Change[Any]) -> int:
        key_serde, value_serde = self._serdes
        size = 8 + len(key_serde.serialize(None, key) or b"")
        for value in change:
            size += len(value_serde.serialize(None, value) or b"")
        return size
