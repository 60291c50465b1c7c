"""KStreamKStreamSelfJoin: an inner join of a stream with itself over one window store (KIP-862).

The `single.store.self.join` optimization (self_join_optimizer.py) puts this processor below the
join's this-side `KStreamJoinWindow`, which forwards each record here before it keeps it in the
one store. A record at t joins, in Java's order: as the left side, the stored records in
`[t - before, t + after]`; then as the right side, the stored records in `[t - after, t + before]`,
with the join of the record with itself emitted before the first match later than t (so the
results come out as the two-store inner join's), or last. The self-match is skipped once the
record is older than stream time minus the store's retention (its own copy would be gone).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic

from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import VR, K, V
from streams_core.state.window_store import WindowStore

if TYPE_CHECKING:
    from streams_core.kstream.windows import JoinWindows

__all__ = ["KStreamKStreamSelfJoin"]

log = logging.getLogger(__name__)


class KStreamKStreamSelfJoin(Generic[K, V, VR]):
    """Both sides of an inner self-join in one processor, reading the one window store `store_name`."""

    def __init__(self, store_name: str, windows: JoinWindows, joiner: Callable[[K, V, V], VR]) -> None:
        self._store_name = store_name
        self._this_before, self._this_after = windows.before_ms, windows.after_ms
        self._retention = windows.size_ms + windows.grace_period_ms
        self._joiner = joiner
        self._stream_time = -1
        self.dropped_records = 0

    def init(self, context: ProcessorContext[K, VR]) -> None:
        self._context = context
        self._forward = context.forward
        self._store: WindowStore[K, V] = context.get_state_store(self._store_name)

    def close(self) -> None:
        """The store is closed by the task."""

    def carried_state(self) -> int:
        """Stream time, for a runner that rebuilds the processor between batches (see carried_state.py)."""
        return self._stream_time

    def restore_carried_state(self, state: int) -> None:
        self._stream_time = state

    def process(self, record: Record[K, V]) -> None:
        key, value, timestamp, headers = record
        if key is None or value is None:
            self.dropped_records += 1
            log.debug("self-join: skipping a record with a None key or value at offset %s", self._context.offset)
            return
        joiner, forward, store = self._joiner, self._forward, self._store
        if timestamp > self._stream_time:
            self._stream_time = timestamp
        emit_self = timestamp > self._stream_time - self._retention + 1
        self_record = Record(key, joiner(key, value, value), timestamp, headers)
        for other_timestamp, other in list(store.fetch(key, max(0, timestamp - self._this_before),
                                                       max(0, timestamp + self._this_after))):  # fmt: skip
            forward(Record(key, joiner(key, value, other), max(timestamp, other_timestamp), headers))
        emitted_self = False
        for other_timestamp, other in list(store.fetch(key, max(0, timestamp - self._this_after),
                                                       max(0, timestamp + self._this_before))):  # fmt: skip
            if timestamp < other_timestamp and not emitted_self and emit_self:
                emitted_self = True
                forward(self_record)
            forward(Record(key, joiner(key, other, value), max(timestamp, other_timestamp), headers))
        if not emitted_self and emit_self:
            forward(self_record)
