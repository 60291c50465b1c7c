"""KStreamKTableJoin: a stream record joined with a table's current value for its key.

Only stream records trigger output: `joiner(key, value, table value)` at the stream record's
timestamp; table updates just change what later records see. An inner join drops records
whose key has no table value; a left join passes None. For a GlobalKTable the lookup key is
`key_selector(key, value)`. Records with a None value are dropped and counted, as are records
with a None lookup key; a left join keeps a record whose own key is None (KIP-962) and joins it
with None (or with what its selected global key finds), as Java's KStreamKTableJoinProcessor.

A versioned table is read as of the stream record's timestamp. With a grace period (KIP-923)
a record waits in a buffer until the largest timestamp buffered so far passes its own by the
grace period, then joins; records leave the buffer in (timestamp, serialized key, arrival)
order, and a record already older than that when it arrives joins at once. The buffer is a
changelogged store named `<join name>-Buffer` (`TimeOrderedKeyValueBuffer`), restored with the
largest timestamp buffered so far when the task starts again, here or on another instance.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic

from streams_core.kstream.internals.ktable_value_getters import ValueGetterSupplier
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import GK, VO, VR, K, V
from streams_core.state.internals.buffer_value import record_context
from streams_core.state.internals.changelogged_buffer import resume_stream_time
from streams_core.state.internals.time_ordered_key_value_buffer import TimeOrderedKeyValueBuffer

__all__ = ["KStreamKTableJoin"]

log = logging.getLogger(__name__)


class KStreamKTableJoin(Generic[K, V, GK, VO, VR]):
    """Looks the record's key (or `key_selector(key, value)`) up through a table value getter."""

    def __init__(
        self,
        getter_supplier: ValueGetterSupplier[GK, VO],
        joiner: Callable[[K, V, VO | None], VR],
        left: bool,
        key_selector: Callable[[K, V], GK] | None = None,
        grace_ms: int | None = None,
        buffer_store: str | None = None,
    ) -> None:
        #: What the join does, named for other engines (the Spark runner compiles a join into a count).
        self.joiner, self.left, self.key_selector, self.grace_ms = joiner, left, key_selector, grace_ms
        self._getter = getter_supplier.get()
        self._grace = grace_ms
        self._buffer_store = buffer_store
        self._buffer_time = -1
        self._joiner = joiner
        self._left = left
        self._key_selector = key_selector
        self.dropped_records = 0

    def init(self, context: ProcessorContext[K, VR]) -> None:
        self._getter.init(context)
        self._forward = context.forward
        self._context = context
        self._as_of = getattr(self._getter, "get_as_of", None) if getattr(self._getter, "versioned", False) else None
        if self._buffer_store is not None:
            buffer: TimeOrderedKeyValueBuffer[K, V] = context.get_state_store(self._buffer_store)
            self._buffer = buffer
            self._metadata: Any = context
            self._buffer_time = buffer.observed_stream_time = resume_stream_time(context, buffer)
            if buffer.num_records:
                log.info("join %s: resuming with %d buffered records at stream time %d",
                         self._buffer_store, buffer.num_records, self._buffer_time)  # fmt: skip

    def close(self) -> None:
        """Stores are closed by their tasks."""

    def carried_state(self) -> int:
        """The grace buffer's observed stream time, for a runner that rebuilds the processor between
        batches (carried_state.py; without a grace period, -1)."""
        return self._buffer_time

    def restore_carried_state(self, state: int) -> None:
        """Resume from `carried_state()` of the same processor in an earlier batch (after `init`)."""
        if self._buffer_store is not None and state > self._buffer_time:
            self._buffer_time = self._buffer.observed_stream_time = state

    def process(self, record: Record[K, V]) -> None:
        key, value, timestamp, _ = record
        lookup: K | GK = key if self._key_selector is None else self._key_selector(key, value)
        if not (self._left and key is None and value is not None) and (lookup is None or value is None):
            self.dropped_records += 1
            log.debug("join: skipping a record with a None join key or value at offset %s", self._context.offset)
            return
        if self._grace is None:
            self._join(record, lookup)
            return
        if self._buffer_time - self._grace > timestamp or key is None:
            # late, or a left join's record without a key (which finds no table value at any time)
            self._join(record, lookup)
            return
        context = self._context
        offset, partition = context.offset, context.partition
        self._buffer.put(record, record_context((
            timestamp, -1 if offset is None else offset, context.topic or "", -1 if partition is None else partition,
            record.headers,
        )))  # fmt: skip
        if timestamp > self._buffer_time:
            self._buffer_time = self._buffer.observed_stream_time = timestamp
            self._metadata.add_processor_metadata_key_value(self._buffer.name, timestamp)
        for waiting in self._buffer.evict_until(self._buffer_time - self._grace):
            selected = waiting.key if self._key_selector is None else self._key_selector(waiting.key, waiting.value)
            self._join(waiting, selected)

    def _join(self, record: Record[K, V], lookup: Any) -> None:
        key, value, timestamp, headers = record
        if lookup is None:
            stored = None
        elif self._as_of is not None:
            stored = self._as_of(lookup, timestamp)
        else:
            stored = self._getter.get(lookup)
        if stored is None:
            if self._left:
                self._forward(Record(key, self._joiner(key, value, None), timestamp, headers))
            return
        self._forward(Record(key, self._joiner(key, value, stored.value), timestamp, headers))
