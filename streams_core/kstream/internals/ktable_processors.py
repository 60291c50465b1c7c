"""The KTable processors: source, filter, map-values, to-stream, repartition-map (for group_by).

A KTable processor receives and forwards `Change(new, old)` values. A materialised one (a
source, or a filter / map_values given a `Materialized`) also writes its results, with their
timestamps, to its store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic

from streams_core.common.change import Change
from streams_core.common.store import KeyValueStore
from streams_core.kstream.internals.forwarding import ChangeForwarder
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import KR, VR, K, V

__all__ = ["KTableFilter", "KTableMapValues", "KTableRepartitionMap", "KTableSource", "KTableToStream"]

log = logging.getLogger(__name__)


class _Materializing(Generic[K, V]):
    """A table processor with an optional store of its results (values V)."""

    def __init__(self, store_name: str | None) -> None:
        self._store_name = store_name
        self._store: KeyValueStore[K, ValueAndTimestamp[V]] | None = None
        self.dropped_records = 0

    def init(self, context: ProcessorContext[K, Change[V]]) -> None:
        self._context = context
        self._forward: Callable[[Record[K, Change[V]]], None] | None
        if self._store_name is None:
            self._forward = context.forward
            return
        view = context.get_state_store(self._store_name)
        self._store = view.timestamped
        self._forwarder: ChangeForwarder[K, V] = ChangeForwarder(context, view)
        self._forward = self._forwarder.forward

    def close(self) -> None:
        """The store is closed by the task."""


class KTableSource(_Materializing[K, V]):
    """A table from a topic (or from `KStream.to_table`): each record upserts its key, None deletes.

    Forwards `Change(value, previous value)`, also `Change(None, None)` for the delete of an absent
    key, as Java's (with a caching store the cache drops it on flush). Records with a None key
    are dropped and counted. Without a store (a table nobody materialised) it forwards
    `Change(value, None)` for every record, as Java's.
    """

    def process(self, record: Record[K, V]) -> None:
        key, value, timestamp, headers = record
        if key is None:
            self.dropped_records += 1
            context = self._context
            log.debug(
                "skipping a table record with a None key: topic=%s partition=%s offset=%s",
                context.topic, context.partition, context.offset,
            )  # fmt: skip
            return
        store = self._store
        if store is None:  # not materialised: no old values, as Java's KTableSource without a store
            # without a store there is no cache, so `forward` is the context's
            self._forward(Record(key, Change(value, None), timestamp, headers))  # type: ignore[misc]
            return
        if getattr(store, "versioned", False):
            self._put_versioned(store, record)
            return
        stored = store.get(key)
        store.put(key, None if value is None else ValueAndTimestamp(value, timestamp))
        if self._forward is not None:
            self._forward(Record(key, Change(value, None if stored is None else stored.value), timestamp, headers))


    def _put_versioned(self, store: Any, record: Record[K, V]) -> None:
        """A versioned table (KIP-914): an out-of-order update goes into the history only."""
        key, value, timestamp, headers = record
        previous = store.get(key)
        if not store.put_versioned(key, value, timestamp):
            return
        if value is None and previous is None:
            return
        if self._forward is not None:
            self._forward(Record(key, Change(value, None if previous is None else previous.value), timestamp, headers))


class KTableFilter(_Materializing[K, V]):
    """Keeps the values `predicate(key, value)` accepts (rejects, for `filter_not`); others become None.

    A rejected update is forwarded as a tombstone, as Java's; when old values are sent (the
    upstream table is materialised, or a group_by or join downstream asked: SendOldValues), an
    update rejected both before and after is not forwarded: downstream never saw the key.
    """

    def __init__(
        self, predicate: Callable[[K, V], object], negate: bool, store_name: str | None, send_old_values: bool = True
    ) -> None:
        super().__init__(store_name)
        self._predicate = predicate
        self._keep = not negate
        self._send_old_values = send_old_values

    def process(self, record: Record[K, Change[V]]) -> None:
        key, change, timestamp, headers = record
        predicate, keep = self._predicate, self._keep
        new, old = change
        if new is not None and bool(predicate(key, new)) is not keep:
            new = None
        if old is not None and bool(predicate(key, old)) is not keep:
            old = None
        if new is None and old is None and self._send_old_values:
            return
        if self._store is not None:
            self._store.put(key, None if new is None else ValueAndTimestamp(new, timestamp))
        if self._forward is not None:
            self._forward(Record(key, Change(new, old), timestamp, headers))


class KTableMapValues(_Materializing[K, VR], Generic[K, V, VR]):
    """Maps new and old values with `mapper(value)` or `mapper(key, value)`; None stays None (and is
    forwarded, as Java's: a delete of a key an unmaterialised table never saw is a tombstone)."""

    def __init__(self, mapper: Callable[..., VR], with_key: bool, store_name: str | None) -> None:
        super().__init__(store_name)
        self._mapper = mapper
        self._with_key = with_key

    def process(self, record: Record[K, Change[V]]) -> None:
        key, change, timestamp, headers = record
        mapper = self._mapper
        new_value, old_value = change
        new: VR | None
        old: VR | None
        if self._with_key:
            new = None if new_value is None else mapper(key, new_value)
            old = None if old_value is None else mapper(key, old_value)
        else:
            new = None if new_value is None else mapper(new_value)
            old = None if old_value is None else mapper(old_value)
        if self._store is not None:
            self._store.put(key, None if new is None else ValueAndTimestamp(new, timestamp))
        if self._forward is not None:
            self._forward(Record(key, Change(new, old), timestamp, headers))


class KTableToStream(Generic[K, V, KR]):
    """The table's changelog as a stream: each update's new value (None for a delete)."""

    __slots__ = ("_forward", "_key_mapper")

    def __init__(self, key_mapper: Callable[[K, V | None], KR] | None) -> None:
        self._key_mapper = key_mapper

    @property
    def key_mapper(self) -> Callable[[K, V | None], KR] | None:
        """`to_stream(mapper)`'s mapper (None: the keys stay), for other engines."""
        return self._key_mapper

    def init(self, context: ProcessorContext[K | KR, V | None]) -> None:
        self._forward = context.forward

    def process(self, record: Record[K, Change[V]]) -> None:
        key: K | KR
        key, change, timestamp, headers = record
        value = change.new_value
        if self._key_mapper is not None:
            key = self._key_mapper(key, value)
        self._forward(Record(key, value, timestamp, headers))

    def close(self) -> None:
        """Nothing to release."""


class KTableRepartitionMap(Generic[K, V, KR, VR]):
    """`selector(key, value) -> (group key, value)` on both sides of a change, for `KTable.group_by`.

    When old and new land in the same group one `Change(new, old)` goes out; otherwise the old
    value is retracted from its group (`Change(None, old)`) before the new one is added
    (`Change(new, None)`), so the aggregation downstream subtracts and adds. Pairs with a None
    key or value are skipped.
    """

    __slots__ = ("_forward", "_selector")

    def __init__(self, selector: Callable[[K, V], tuple[KR, VR]]) -> None:
        self._selector = selector

    def init(self, context: ProcessorContext[KR, Change[VR]]) -> None:
        self._forward = context.forward

    def process(self, record: Record[K, Change[V]]) -> None:
        key, change, timestamp, headers = record
        selector = self._selector
        new_pair = None if change.new_value is None else selector(key, change.new_value)
        old_pair = None if change.old_value is None else selector(key, change.old_value)
        has_new = new_pair is not None and new_pair[0] is not None and new_pair[1] is not None
        has_old = old_pair is not None and old_pair[0] is not None and old_pair[1] is not None
        forward = self._forward
        if has_new and has_old and old_pair[0] == new_pair[0]:  # type: ignore[index]
            forward(Record(new_pair[0], Change(new_pair[1], old_pair[1]), timestamp, headers))  # type: ignore[index]
            return
        if has_old:
            forward(Record(old_pair[0], Change(None, old_pair[1]), timestamp, headers))  # type: ignore[index]
        if has_new:
            forward(Record(new_pair[0], Change(new_pair[1], None), timestamp, headers))  # type: ignore[index]

    def close(self) -> None:
        """Nothing to release."""
