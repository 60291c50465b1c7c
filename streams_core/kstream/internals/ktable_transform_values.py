"""KTable.transform_values: Kafka Streams' `KTableTransformValues` processor, value getter and operator.

The processor calls the user's `ValueTransformerWithKey.transform(key, value)` on each update's
new value; the old value it forwards is, as in Java, the stored one when the result is
materialised, else the old value transformed again, and only when old values are asked for (a
`group_by` or a join downstream): a stateful transformer sees each old value exactly when Java's
would. A result that is not materialised is read by joins through a getter that transforms the
parent's value with a transformer of its own (Java's `KTableTransformValuesGetter`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic

from streams_core.common.change import Change
from streams_core.errors import StreamsError, TopologyError
from streams_core.kstream.internals import names
from streams_core.kstream.internals.ktable_processors import _Materializing
from streams_core.kstream.internals.ktable_value_getters import (
    StoreSource,
    StoreValueGetterSupplier,
    ValueGetter,
    ValueGetterSupplier,
)
from streams_core.kstream.internals.materialize import is_versioned, key_value_store
from streams_core.kstream.internals.send_old_values import SendOldValues
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.kstream.materialized import Materialized
from streams_core.kstream.named import Named
from streams_core.processor.connected_store_provider import supplier_stores
from streams_core.processor.internals.node_factories import processor_factory
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import VR, K, V

if TYPE_CHECKING:
    from streams_core.kstream.ktable import KTable

__all__ = ["ForwardingDisabledContext", "KTableTransformValues", "transform_values"]


class ForwardingDisabledContext:
    """The context a ValueTransformerWithKey gets: the task's, with `forward` refused (Java's
    `ForwardingDisabledProcessorContext`): the framework forwards the value under the fixed key."""

    __slots__ = ("_context",)

    def __init__(self, context: Any) -> None:
        self._context = context

    def forward(self, *args: object, **kwargs: object) -> None:
        raise StreamsError(
            "forward() is not supported from a ValueTransformerWithKey: the framework forwards what "
            "transform(key, value) returns, under the unchanged key"
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _new_transformer(name: str, make: Callable[[], Any]) -> Any:
    transformer = make()
    if not callable(getattr(transformer, "transform", None)):
        raise TopologyError(
            f"{name}: the ValueTransformerWithKeySupplier returned {transformer!r}, not a transformer "
            "with transform(key, value)"
        )
    return transformer


class KTableTransformValues(_Materializing[K, VR], Generic[K, V, VR]):
    """Transforms each update's new value (and old value, see the module doc) with the user's transformer."""

    def __init__(self, transformer: Any, store_name: str | None, send_old_values: bool) -> None:
        super().__init__(store_name)
        self._transformer = transformer
        self._send_old_values = send_old_values

    def init(self, context: ProcessorContext[K, Change[VR]]) -> None:
        super().init(context)
        init = getattr(self._transformer, "init", None)
        if init is not None:
            init(ForwardingDisabledContext(context))

    def process(self, record: Record[K, Change[V]]) -> None:
        key, change, timestamp, headers = record
        transform = self._transformer.transform
        new: VR | None = transform(key, change.new_value)
        store = self._store
        old: VR | None = None
        if store is None:
            if self._send_old_values:
                old = transform(key, change.old_value)
        else:
            stored = store.get(key)
            old = None if stored is None else stored.value
            store.put(key, None if new is None else ValueAndTimestamp(new, timestamp))
        if self._forward is not None:
            self._forward(Record(key, Change(new, old), timestamp, headers))

    def close(self) -> None:
        close = getattr(self._transformer, "close", None)
        if close is not None:
            close()


class _TransformValuesGetter(Generic[K, V, VR]):
    __slots__ = ("_parent", "_transformer")

    def __init__(self, parent: ValueGetter[K, V], transformer: Any) -> None:
        self._parent = parent
        self._transformer = transformer

    def init(self, context: StoreSource) -> None:
        self._parent.init(context)
        init = getattr(self._transformer, "init", None)
        if init is not None:
            init(ForwardingDisabledContext(context))

    def get(self, key: K) -> ValueAndTimestamp[VR] | None:
        stored = self._parent.get(key)
        value = self._transformer.transform(key, None if stored is None else stored.value)
        return None if value is None else ValueAndTimestamp(value, -1 if stored is None else stored.timestamp)


class _TransformValuesGetterSupplier(Generic[K, V, VR]):
    """The parent's value, transformed by a transformer of the getter's own; the stores the
    transformer uses are connected to the reader too (Java connects only the parent's)."""

    def __init__(self, parent: ValueGetterSupplier[K, V], name: str, make: Callable[[], Any],
                 store_names: tuple[str, ...]) -> None:  # fmt: skip
        self.store_names = tuple(dict.fromkeys((*parent.store_names, *store_names)))
        self._parent = parent
        self._name = name
        self._make = make

    def get(self) -> ValueGetter[K, VR]:
        return _TransformValuesGetter(self._parent.get(), _new_transformer(self._name, self._make))


def transform_values(
    table: KTable[K, V],
    supplier: object,
    options: tuple[Materialized | Named | str | None, ...],
    materialized: Materialized | None,
    named: Named | str | None,
) -> KTable[K, Any]:
    """`table.transform_values(supplier, [Materialized], [Named], *store_names)`, as Java's `doTransformValues`.

    Only a Materialized with a store name materialises the result (Java's `queryableStoreName`).
    """
    from streams_core.kstream.ktable import KTable

    store_names: list[str] = []
    for option in options:
        if isinstance(option, Materialized):
            if materialized is not None:
                raise TopologyError("transform_values: pass the Materialized once")
            materialized = option
        elif isinstance(option, Named):
            if named is not None:
                raise TopologyError("transform_values: pass the Named once")
            named = option
        elif isinstance(option, str):
            store_names.append(option)
        elif option is not None:
            raise TypeError(f"transform_values takes a Materialized, a Named and store names, got {option!r}")
    b = table._builder
    make = processor_factory("transform_values", supplier, "ValueTransformerWithKey")
    key_serde, value_serde = table.key_serde, b.infer(table.value_serde, "value")
    store = None
    stores: list[Any] = []
    if materialized is not None:
        m = materialized.merged_serdes(key_serde, value_serde)
        key_serde, value_serde = m.key_serde, m.value_serde
        if materialized.store_name is not None:
            store = materialized.store_name
            stores.append(key_value_store(b, store, m, key_serde, value_serde))
    name = b.processor_name(named, names.KTABLE_TRANSFORMVALUES)
    old_values = SendOldValues("processor", store is not None, (table.old_values,))
    own = supplier_stores(supplier)
    connected = (*(s.name for s in own), *store_names)
    b.add_processor(name, lambda: KTableTransformValues(_new_transformer(name, make), store, old_values.enabled),
                    (table.name,), (*stores, *own), store_names)  # fmt: skip
    getter: ValueGetterSupplier[K, Any]
    if store is not None:
        getter = StoreValueGetterSupplier(store)
    else:
        getter = _TransformValuesGetterSupplier(table._value_getter("transform_values"), name, make, connected)
    return KTable(b, name, key_serde, value_serde, table.source_nodes, getter, store, table.windows,
                  queryable=store, old_values=old_values,
                  versioned=is_versioned(materialized) if store is not None else table.versioned)  # fmt: skip
