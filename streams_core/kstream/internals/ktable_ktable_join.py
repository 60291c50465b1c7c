"""KTable-KTable joins (inner, left, outer) and the merger after them (Java's algorithms).

Each side has a processor that, on an update `Change(new, old)` of its table, looks up the
other table's value for the key and forwards the joined `Change(joined new, joined old)` at
the later of the two timestamps. `kind` and `is_left` select Java's rules:

- inner: nothing while the other side has no value;
- left, left side: joins with the right value or None; right side: nothing while the left
  side has no value, else `joiner(left, right)` with the right's new and old values (None too);
- outer: either side may be None; nothing when all of the other value, new and old are None.

The merger (`KTABLE-MERGE-`) joins both sides' outputs into one table, storing it when the
join is materialised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic

from streams_core.common.change import Change
from streams_core.common.store import KeyValueStore
from streams_core.kstream.internals.forwarding import ChangeForwarder
from streams_core.kstream.internals.ktable_value_getters import ValueGetterSupplier
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import VO, VR, K, V

__all__ = ["KTableKTableJoin", "KTableKTableJoinMerger"]


class KTableKTableJoin(Generic[K, V, VO, VR]):
    """One side of a table-table join; the joiner always gets (left value, right value).

    V is this side's values, VO the other's: the joiner takes (V, VO) on the left side and
    (VO, V) on the right, hence its loose parameter types.
    """

    def __init__(
        self, other_getter_supplier: ValueGetterSupplier[K, VO], joiner: Callable[[V | VO | None, V | VO | None], VR],
        kind: str, is_left: bool,
    ) -> None:  # fmt: skip
        self._getter = other_getter_supplier.get()
        self._joiner = joiner
        self._kind = kind
        self._is_left = is_left
        self.dropped_records = 0

    def init(self, context: ProcessorContext[K, Change[VR]]) -> None:
        self._getter.init(context)
        self._forward = context.forward

    def close(self) -> None:
        """Stores are closed by their tasks."""

    def _join(self, this: V | None, other: VO | None) -> VR:
        return self._joiner(this, other) if self._is_left else self._joiner(other, this)

    def process(self, record: Record[K, Change[V]]) -> None:
        key, (new, old), timestamp, headers = record
        if key is None:
            self.dropped_records += 1
            return
        stored = self._getter.get(key)
        other = None if stored is None else stored.value
        kind = self._kind
        if stored is not None and stored.timestamp > timestamp:
            timestamp = stored.timestamp
        if kind == "inner" or (kind == "left" and not self._is_left):
            if other is None:
                return
            if kind == "inner":
                joined_new = None if new is None else self._join(new, other)
                joined_old = None if old is None else self._join(old, other)
            else:
                joined_new = self._join(new, other)
                joined_old = self._join(old, other)
        elif kind == "left":
            if other is None and new is None and old is None:
                return
            joined_new = None if new is None else self._join(new, other)
            joined_old = None if old is None else self._join(old, other)
        else:
            if other is None and new is None and old is None:
                return
            joined_new = None if other is None and new is None else self._join(new, other)
            joined_old = None if other is None and old is None else self._join(old, other)
        self._forward(Record(key, Change(joined_new, joined_old), timestamp, headers))


class KTableKTableJoinMerger(Generic[K, VR]):
    """Forwards both join sides' updates as one table; stores them when materialised."""

    def __init__(self, store_name: str | None) -> None:
        self._store_name = store_name
        self._store: KeyValueStore[K, ValueAndTimestamp[VR]] | None = None

    def init(self, context: ProcessorContext[K, Change[VR]]) -> None:
        self._forward: Callable[[Record[K, Change[VR]]], None] | None
        if self._store_name is None:
            self._forward = context.forward
            return
        view = context.get_state_store(self._store_name)
        self._store = view.timestamped
        self._forwarder: ChangeForwarder[K, VR] = ChangeForwarder(context, view)
        self._forward = self._forwarder.forward

    def close(self) -> None:
        """The store is closed by the task."""

    def process(self, record: Record[K, Change[VR]]) -> None:
        if self._store is not None:
            new = record.value.new_value
            self._store.put(record.key, None if new is None else ValueAndTimestamp(new, record.timestamp))
        if self._forward is not None:
            self._forward(record)
