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

The buffer is a changelogged store (`InMemoryTimeOrderedKeyValueChangeBuffer`, named
`KTABLE-SUPPRESS-STATE-STORE-<n>` or `<name>-store`), restored when the task starts again here
or elsewhere. The observed stream time is kept too (Java restarts it at -1, which delays
emission until a newer record comes): in the task's processor metadata under the store's name,
committed with the offsets, and seen in the restored records' timestamps.
"""

from __future__ import annotations

import logging
from typing import Any, Generic

from streams_core.common.change import Change
from streams_core.errors import StreamsError
from streams_core.kstream.internals.ktable_value_getters import StoreSource, ValueGetter, ValueGetterSupplier
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import K, V
from streams_core.state.internals.buffer_value import record_context
from streams_core.state.internals.changelogged_buffer import resume_stream_time
from streams_core.state.internals.in_memory_time_ordered_key_value_change_buffer import (
    BufferEntry,
    InMemoryTimeOrderedKeyValueChangeBuffer,
)

__all__ = ["KTableSuppress", "SuppressValueGetterSupplier"]

log = logging.getLogger(__name__)


class _SuppressGetter(Generic[K, V]):
    __slots__ = ("_buffer", "_parent", "_store_name")

    def __init__(self, parent: ValueGetter[K, V], store_name: str) -> None:
        self._parent = parent
        self._store_name = store_name

    def init(self, context: StoreSource) -> None:
        self._buffer: InMemoryTimeOrderedKeyValueChangeBuffer[K, V] = context.get_state_store(self._store_name)
        self._parent.init(context)

    def get(self, key: K) -> ValueAndTimestamp[V] | None:
        entry = self._buffer.buffered(key)
        if entry is None:
            return self._parent.get(key)
        return None if entry.prior is None else ValueAndTimestamp(entry.prior, entry.record.timestamp)


class SuppressValueGetterSupplier(Generic[K, V]):
    """A suppressed table's value: the prior value of a buffered key, else the parent table's.
    It reads the buffer store, so a join of the suppressed table is connected to it (as Java's)."""

    def __init__(self, parent: ValueGetterSupplier[K, V], store_name: str) -> None:
        self._parent = parent
        self._store_name = store_name
        self.store_names: tuple[str, ...] = (store_name, *parent.store_names)

    def get(self) -> _SuppressGetter[K, V]:
        return _SuppressGetter(self._parent.get(), self._store_name)


class KTableSuppress(Generic[K, V]):
    """Buffers `Change` updates by key in its store and forwards them once their buffer time expires."""

    def __init__(
        self,
        name: str,
        store_name: str,
        duration_ms: int,
        window_end_time: bool,
        drop_tombstones: bool,
        record_limit: int | None,
        byte_limit: int | None,
        fail_when_full: bool,
    ) -> None:
        self._name = name
        self._store_name = store_name
        self._duration = duration_ms
        self._window_end_time = window_end_time
        self._drop_tombstones = drop_tombstones
        self._record_limit = record_limit
        self._byte_limit = byte_limit
        self._fail_when_full = fail_when_full

    def init(self, context: ProcessorContext[K, Change[V]]) -> None:
        self._forward = context.forward
        self._context = context
        self._metadata: Any = context
        buffer: InMemoryTimeOrderedKeyValueChangeBuffer[K, V] = context.get_state_store(self._store_name)
        self._buffer = buffer
        self._observed = buffer.observed_stream_time = resume_stream_time(context, buffer)
        if buffer.num_records:
            log.info("%s: resuming with %d buffered updates at observed stream time %d",
                     self._name, buffer.num_records, self._observed)  # fmt: skip

    def close(self) -> None:
        """The buffer is closed by the task (its content lives on in the changelog)."""

    def carried_state(self) -> int:
        """The observed stream time, for a runner that rebuilds the processor between batches (see
        carried_state.py); the buffered updates are in the store, carried as its changelog."""
        return self._observed

    def restore_carried_state(self, state: int) -> None:
        self._observed = self._buffer.observed_stream_time = max(self._observed, state)

    def process(self, record: Record[K, Change[V]]) -> None:
        timestamp = record.timestamp
        if timestamp > self._observed:
            self._observed = self._buffer.observed_stream_time = timestamp
            self._metadata.add_processor_metadata_key_value(self._store_name, timestamp)
        context = self._context
        # buffered by window end only for windowed tables, whose keys are Windowed
        time = record.key.window.end if self._window_end_time else timestamp  # type: ignore[attr-defined]
        offset, partition = context.offset, context.partition
        buffer = self._buffer
        buffer.put(time, record, record_context((
            timestamp, -1 if offset is None else offset, context.topic or "", -1 if partition is None else partition,
            record.headers,
        )))  # fmt: skip
        for entry in buffer.evict_until(self._observed - self._duration):
            self._emit(entry)
        if self._record_limit is not None or self._byte_limit is not None:
            self._enforce_limits()

    def _enforce_limits(self) -> None:
        buffer = self._buffer
        while self._over_limit():
            if self._fail_when_full:
                raise StreamsError(
                    f"suppression buffer {self._name!r} is full ({buffer.num_records} records, {buffer.buffer_size} "
                    f"bytes; limits: {self._record_limit} records, {self._byte_limit} bytes); give it a larger "
                    "BufferConfig or emit early with emit_early_when_full()"
                )
            self._emit_oldest()

    def _over_limit(self) -> bool:
        buffer = self._buffer
        return (self._record_limit is not None and buffer.num_records > self._record_limit) or (
            self._byte_limit is not None and buffer.buffer_size > self._byte_limit
        )

    def _emit_oldest(self) -> None:
        entry = self._buffer.evict_oldest()
        if entry is not None:
            self._emit(entry)

    def _emit(self, entry: BufferEntry[K, V]) -> None:
        record = entry.record
        new = record.value.new_value
        if new is None and self._drop_tombstones:
            return
        self._forward(record.with_value(Change(new, entry.prior)))
