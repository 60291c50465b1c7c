"""KTableSuppress: hold a table's updates in a buffer and emit them later (`KTable.suppress`).

Each update is buffered under its key (a newer update replaces it, keeping the value the key
had before buffering as the old value, and the key's buffer time: a key's timer is not re-armed,
as in Java's InMemoryTimeOrderedKeyValueChangeBuffer) with a buffer time: the window end for
final results, the first buffered record's timestamp for a time limit. Whenever a record arrives, the processor's observed
stream time (its largest record timestamp) minus the suppression duration is the expiry time,
and every entry with a buffer time at or before it is emitted, oldest first. For final
results the duration is the window's grace period, and buffered deletes of windows never
emitted are dropped. For sessions it is `2 * gap + grace + 1`: the session aggregation (as
Kafka Streams') still accepts a record at `end + gap` while stream time is within
`gap + grace` of it, so only then can no record extend a session; Kafka Streams waits
`gap + grace` and may emit a session that is extended afterwards. A bounded buffer that fills
either fails or emits its oldest entries; its bytes are counted as Java counts them (buffer
time, key, prior/old/new values, and the record context: timestamp, offset, topic, partition,
headers). While a key waits, a join reading the suppressed table sees its prior value
(`SuppressValueGetterSupplier`, Java's `KTableSuppressProcessorSupplier.view()`).
"""

from __future__ import annotations

import heapq
import itertools
import logging
from typing import Generic

from streams_core.errors import StreamsError
from streams_core.kstream.internals.change import Change
from streams_core.kstream.internals.ktable_value_getters import StoreSource, ValueGetter, ValueGetterSupplier
from streams_core.kstream.internals.type_vars import K, V
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.task_id import TaskId
from streams_core.serde import Serde

__all__ = ["KTableSuppress", "SuppressBuffers", "SuppressValueGetterSupplier"]

log = logging.getLogger(__name__)

NO_TIMESTAMP = -1


class _Entry(Generic[K, V]):
    __slots__ = ("prior", "record", "seq", "size", "time")

    def __init__(self, time: int, seq: int, record: Record[K, Change[V]], prior: V | None, size: int) -> None:
        self.time = time
        self.seq = seq
        self.record = record
        self.prior = prior
        self.size = size


class SuppressBuffers(Generic[K, V]):
    """The buffer of each task's KTableSuppress, for the value getters of the suppressed table."""

    def __init__(self) -> None:
        self.by_task: dict[TaskId, KTableSuppress[K, V]] = {}


class _SuppressGetter(Generic[K, V]):
    __slots__ = ("_buffers", "_context", "_parent")

    def __init__(self, parent: ValueGetter[K, V], buffers: SuppressBuffers[K, V]) -> None:
        self._parent = parent
        self._buffers = buffers

    def init(self, context: StoreSource) -> None:
        self._context = context
        self._parent.init(context)

    def get(self, key: K) -> ValueAndTimestamp[V] | None:
        suppress = self._buffers.by_task.get(self._context.task_id)
        entry = None if suppress is None else suppress.buffered(key)
        if entry is None:
            return self._parent.get(key)
        return None if entry.prior is None else ValueAndTimestamp(entry.prior, entry.record.timestamp)


class SuppressValueGetterSupplier(Generic[K, V]):
    """A suppressed table's value: the prior value of a buffered key, else the parent table's."""

    def __init__(self, parent: ValueGetterSupplier[K, V], buffers: SuppressBuffers[K, V]) -> None:
        self._parent = parent
        self._buffers = buffers
        self.store_names: tuple[str, ...] = parent.store_names

    def get(self) -> _SuppressGetter[K, V]:
        return _SuppressGetter(self._parent.get(), self._buffers)


class KTableSuppress(Generic[K, V]):
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
        serdes: tuple[Serde[K] | None, Serde[V] | None] | None = None,
        buffers: SuppressBuffers[K, V] | None = None,
    ) -> None:
        self._buffers = buffers
        self._name = name
        self._duration = duration_ms
        self._window_end_time = window_end_time
        self._drop_tombstones = drop_tombstones
        self._record_limit = record_limit
        self._byte_limit = byte_limit
        self._fail_when_full = fail_when_full
        self._given_serdes = serdes
        self._entries: dict[K, _Entry[K, V]] = {}
        self._heap: list[tuple[int, bytes, int, K]] = []
        self._seq = itertools.count()
        self._bytes = 0
        self._observed = NO_TIMESTAMP

    def init(self, context: ProcessorContext[K, Change[V]]) -> None:
        self._forward = context.forward
        self._context = context
        if self._buffers is not None:
            self._buffers.by_task[context.task_id] = self
        key_serde, value_serde = self._given_serdes or (None, None)
        self._serdes: tuple[Serde[K], Serde[V]] = (key_serde or context.key_serde, value_serde or context.value_serde)

    def buffered(self, key: K) -> _Entry[K, V] | None:
        return self._entries.get(key)

    def close(self) -> None:
        if self._buffers is not None and self._buffers.by_task.get(self._context.task_id) is self:
            del self._buffers.by_task[self._context.task_id]
        if self._entries:
            log.info("%s: closing with %d buffered updates not emitted", self._name, len(self._entries))

    def carried_state(self) -> tuple[int, list[tuple[int, Record[K, Change[V]], V | None, int]]]:
        """Observed stream time and the buffered updates (time, record, prior, size) in arrival order,
        for a runner that rebuilds the processor between batches (see carried_state.py)."""
        entries = sorted(self._entries.values(), key=lambda entry: entry.seq)
        return self._observed, [(e.time, e.record, e.prior, e.size) for e in entries]

    def restore_carried_state(self, state: tuple[int, list[tuple[int, Record[K, Change[V]], V | None, int]]]) -> None:
        self._observed, buffered = state
        for time, record, prior, size in buffered:
            entry = _Entry(time, next(self._seq), record, prior, size)
            self._entries[record.key] = entry
            heapq.heappush(self._heap, (time, self._serdes[0].serialize(None, record.key) or b"", entry.seq, record.key))
            self._bytes += size

    def process(self, record: Record[K, Change[V]]) -> None:
        if record.timestamp > self._observed:
            self._observed = record.timestamp
        self._buffer(record)
        self._enforce()

    def _buffer(self, record: Record[K, Change[V]]) -> None:
        key = record.key
        existing = self._entries.get(key)
        if existing is None:
            # buffered by window end only for windowed tables, whose keys are Windowed
            time = key.window.end if self._window_end_time else record.timestamp  # type: ignore[attr-defined]
            entry = _Entry(time, next(self._seq), record, record.value.old_value, 0)
            self._entries[key] = entry
            # Java's buffer is sorted by (buffer time, serialized key)
            heapq.heappush(self._heap, (time, self._serdes[0].serialize(None, key) or b"", entry.seq, key))
        else:
            entry = existing
            entry.record = record
            self._bytes -= entry.size
        entry.size = self._size_of(key, entry, existing is None) if self._byte_limit is not None else 0
        self._bytes += entry.size

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
            _, _, seq, key = heapq.heappop(heap)
            entry = entries.get(key)
            if entry is None or entry.seq != seq:  # emitted before; a key has one live heap entry
                continue
            del entries[key]
            self._bytes -= entry.size
            record = entry.record
            new = record.value.new_value
            if new is None and self._drop_tombstones:
                return
            self._forward(record.with_value(Change(new, entry.prior)))
            return

    def _size_of(self, key: K, entry: _Entry[K, V], prior_is_old: bool) -> int:
        """Java's `computeRecordSize`: buffer time, key, prior/old/new values and the record context."""
        key_serde, value_serde = self._serdes
        change = entry.record.value

        def length(value: V | None) -> int:
            return 0 if value is None else len(value_serde.serialize(None, value) or b"")

        size = 8 + len(key_serde.serialize(None, key) or b"")
        size += length(entry.prior) + (0 if prior_is_old else length(change.old_value))
        size += length(change.new_value)
        context = self._context
        size += 8 + 8 + len(context.topic or "") + 4
        for name, value in entry.record.headers:
            size += len(name) + (0 if value is None else len(value))
        return size
