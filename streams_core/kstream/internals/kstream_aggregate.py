"""KStreamAggregate and KStreamReduce: a grouped stream folded into a table, per key.

The store keeps each key's aggregate with the largest timestamp of the records folded in,
which is also the timestamp of the update forwarded (`Change(new, old)`, old None for a new
key). Records with a None key or value cannot be aggregated: they are dropped and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic

from streams_core.common.change import Change
from streams_core.common.store import KeyValueStore
from streams_core.kstream.internals.forwarding import ChangeForwarder
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import VR, K, V

__all__ = ["KStreamAggregate", "KStreamReduce"]

log = logging.getLogger(__name__)

_new_tuple = tuple.__new__
"""`ValueAndTimestamp`s made without the named tuple's Python-level `__new__`, once per record."""


class _KStreamFold(Generic[K, V, VR]):
    """Store lookup, timestamp rule and forwarding shared by aggregate and reduce."""

    def __init__(self, store_name: str) -> None:
        self._store_name = store_name
        self.dropped_records = 0

    def init(self, context: ProcessorContext[K, Change[VR]]) -> None:
        view = context.get_state_store(self._store_name)
        self._context = context
        self._store: KeyValueStore[K, ValueAndTimestamp[VR]] = view.timestamped
        self._forwarder: ChangeForwarder[K, VR] = ChangeForwarder(context, view)
        self._forward = self._forwarder.forward

    def _skip(self, record: Record[K, V]) -> None:
        self.dropped_records += 1
        context = self._context
        log.debug(
            "skipping a record with a None key or value in %s: topic=%s partition=%s offset=%s",
            self._store_name, context.topic, context.partition, context.offset,
        )  # fmt: skip

    def close(self) -> None:
        """The store is closed by the task."""


class KStreamAggregate(_KStreamFold[K, V, VR]):
    """`aggregator(key, value, aggregate)` from `initializer()` for each key."""

    def __init__(
        self, store_name: str, initializer: Callable[[], VR], aggregator: Callable[[K, V, VR], VR],
        operation: str = "aggregate",
    ) -> None:  # fmt: skip
        super().__init__(store_name)
        #: The DSL operator that built it ("count" or "aggregate"): what other engines compile.
        self.operation = operation
        #: The user's functions, named for other engines (Spark folds them per key in its own stage).
        self.initializer = self._initializer = initializer
        self.aggregator = self._aggregator = aggregator

    def process(self, record: Record[K, V]) -> None:
        key, value, timestamp, headers = record
        if key is None or value is None:
            self._skip(record)
            return
        store = self._store
        stored = store.get(key)
        if stored is None:
            old = None
            new = self._aggregator(key, value, self._initializer())
        else:
            old = stored.value
            new = self._aggregator(key, value, old)
            if stored.timestamp > timestamp:
                timestamp = stored.timestamp
        store.put(key, _new_tuple(ValueAndTimestamp, (new, timestamp)))
        if self._forward is not None:
            self._forward(Record(key, Change(new, old), timestamp, headers))


class KStreamReduce(_KStreamFold[K, V, V]):
    """`reducer(aggregate, value)` for each key; a key's first value is its aggregate."""

    def __init__(self, store_name: str, reducer: Callable[[V, V], V]) -> None:
        super().__init__(store_name)
        self.operation = "reduce"
        #: The user's reducer, named for other engines (Spark computes some built-ins natively).
        self.reducer = self._reducer = reducer

    def process(self, record: Record[K, V]) -> None:
        key, value, timestamp, headers = record
        if key is None or value is None:
            self._skip(record)
            return
        store = self._store
        stored = store.get(key)
        if stored is None:
            old = None
            new = value
        else:
            old = stored.value
            new = self._reducer(old, value)
            if stored.timestamp > timestamp:
                timestamp = stored.timestamp
        store.put(key, _new_tuple(ValueAndTimestamp, (new, timestamp)))
        if self._forward is not None:
            self._forward(Record(key, Change(new, old), timestamp, headers))
