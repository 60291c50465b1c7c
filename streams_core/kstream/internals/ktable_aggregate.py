"""KTableAggregate and KTableReduce: a grouped table folded per group, with adder and subtractor.

Each incoming `Change(new, old)` first subtracts `old` from the group's aggregate, then adds
`new`. The aggregate's timestamp is the largest of the updates folded in. A group whose
aggregate becomes None is deleted (a reduce whose last value was subtracted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic

from streams_core.common.change import Change
from streams_core.common.headers import Headers
from streams_core.common.store import KeyValueStore
from streams_core.kstream.internals.forwarding import ChangeForwarder
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import VR, K, V

__all__ = ["KTableAggregate", "KTableReduce"]


class _KTableFold(Generic[K, V, VR]):
    """The store and forwarding shared by the table aggregations: updates of V fold into VR per key."""

    def __init__(self, store_name: str) -> None:
        self._store_name = store_name

    def init(self, context: ProcessorContext[K, Change[VR]]) -> None:
        view = context.get_state_store(self._store_name)
        self._store: KeyValueStore[K, ValueAndTimestamp[VR]] = view.timestamped
        self._forwarder: ChangeForwarder[K, VR] = ChangeForwarder(context, view)
        self._forward = self._forwarder.forward

    def _put_and_forward(self, key: K, new: VR | None, old: VR | None, timestamp: int, headers: Headers) -> None:
        self._store.put(key, None if new is None else ValueAndTimestamp(new, timestamp))
        if self._forward is not None:
            self._forward(Record(key, Change(new, old), timestamp, headers))

    def close(self) -> None:
        """The store is closed by the task."""


class KTableAggregate(_KTableFold[K, V, VR]):
    """`adder(key, value, agg)` and `subtractor(key, value, agg)`, from `initializer()`."""

    def __init__(
        self,
        store_name: str,
        initializer: Callable[[], VR],
        adder: Callable[[K, V, VR], VR],
        subtractor: Callable[[K, V, VR], VR],
    ) -> None:
        super().__init__(store_name)
        self._initializer = initializer
        self._adder = adder
        self._subtractor = subtractor

    def process(self, record: Record[K, Change[V]]) -> None:
        key, (new_value, old_value), timestamp, headers = record
        stored = self._store.get(key)
        old = None if stored is None else stored.value
        if stored is not None and stored.timestamp > timestamp:
            timestamp = stored.timestamp
        aggregate = old
        if old_value is not None and aggregate is not None:
            aggregate = self._subtractor(key, old_value, aggregate)
        if new_value is not None:
            aggregate = self._adder(key, new_value, self._initializer() if aggregate is None else aggregate)
        self._put_and_forward(key, aggregate, old, timestamp, headers)


class KTableReduce(_KTableFold[K, V, V]):
    """`adder(agg, value)` and `subtractor(agg, value)`; a group's first value is its aggregate."""

    def __init__(
        self, store_name: str, adder: Callable[[V, V], V], subtractor: Callable[[V, V], V]
    ) -> None:
        super().__init__(store_name)
        self._adder = adder
        self._subtractor = subtractor

    def process(self, record: Record[K, Change[V]]) -> None:
        key, (new_value, old_value), timestamp, headers = record
        stored = self._store.get(key)
        old = None if stored is None else stored.value
        if stored is not None and stored.timestamp > timestamp:
            timestamp = stored.timestamp
        aggregate = old
        if old_value is not None and aggregate is not None:
            aggregate = self._subtractor(aggregate, old_value)
        if new_value is not None:
            aggregate = new_value if aggregate is None else self._adder(aggregate, new_value)
        self._put_and_forward(key, aggregate, old, timestamp, headers)
