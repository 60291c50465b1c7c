"""KTable: a changelog stream read as a table, the latest value per key.

A KTable's processors forward `Change(new, old)` updates. Tables from topics, aggregations
and `to_table` are materialised in a store (its name is the `Materialized` name, else a
generated one shown by `describe()`); `filter`, `map_values` and joins are materialised only
when given a `Materialized`. Joins look other tables up through value getters, so any table
can be joined, materialised or not (a suppressed one excepted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, overload

from streams_core.errors import TopologyError
from streams_core.kstream.grouped import Grouped
from streams_core.kstream.internals import names
from streams_core.kstream.internals.functions import check_callable, takes_key, with_key
from streams_core.kstream.internals.ktable_ktable_join import KTableKTableJoin, KTableKTableJoinMerger
from streams_core.kstream.internals.ktable_processors import (
    KTableFilter,
    KTableMapValues,
    KTableRepartitionMap,
    KTableToStream,
)
from streams_core.kstream.internals.ktable_suppress import KTableSuppress, SuppressValueGetterSupplier
from streams_core.kstream.internals.ktable_value_getters import (
    FilterValueGetterSupplier,
    JoinValueGetterSupplier,
    MapValuesValueGetterSupplier,
    StoreValueGetterSupplier,
    ValueGetterSupplier,
)
from streams_core.kstream.internals.materialize import is_versioned, key_value_store, store_name
from streams_core.kstream.internals.send_old_values import SendOldValues
from streams_core.kstream.materialized import Materialized, named_and_materialized
from streams_core.kstream.named import Named, name_of
from streams_core.kstream.suppressed import Suppressed
from streams_core.kstream.table_joined import TableJoined
from streams_core.kstream.value_transformer_with_key import ValueTransformerWithKey, ValueTransformerWithKeySupplier
from streams_core.processor.type_vars import KO, KR, VO, VR, K, V
from streams_core.serde import Serde
from streams_core.state.internals.in_memory_time_ordered_key_value_change_buffer import SuppressionBufferBuilder

if TYPE_CHECKING:
    from streams_core.kstream.internals.internal_streams_builder import InternalStreamsBuilder
    from streams_core.kstream.kgrouped_table import KGroupedTable
    from streams_core.kstream.kstream import KStream

__all__ = ["KTable"]

Named_ = Named | str | None


class KTable(Generic[K, V]):
    """A table: the node forwarding its updates, its serdes, sources and how to look values up.

    `windows` is set for windowed aggregation results (`("time", grace)` or `("session",
    2 * gap + grace + 1)`: how long after a window ends its result is final), for `suppress`.
    """

    __slots__ = (
        "_builder", "_getter", "_queryable", "key_serde", "name", "old_values", "source_nodes", "store_name",
        "value_serde", "versioned", "windows",
    )  # fmt: skip

    def __init__(
        self,
        builder: InternalStreamsBuilder,
        name: str,
        key_serde: Serde[K] | None,
        value_serde: Serde[V] | None,
        source_nodes: frozenset[str],
        getter: ValueGetterSupplier[K, V] | None,
        store_name: str | None = None,
        windows: tuple[str, int] | None = None,
        *,
        queryable: str | None = None,
        old_values: SendOldValues | None = None,
        versioned: bool = False,
    ) -> None:
        self._builder = builder
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.source_nodes = source_nodes
        self._getter = getter
        self.store_name = store_name
        self.windows = windows
        self._queryable = queryable
        self.old_values = old_values or SendOldValues("stored", True)
        self.versioned = versioned
        """Whether the table's values are versioned: its own store is, or (no store of its own) its
        upstream's are (Java's `isVersionedOrVersionedUpstream`)."""

    def __repr__(self) -> str:
        return f"KTable({self.name!r}, store={self.store_name!r})"

    @property
    def queryable_store_name(self) -> str | None:
        """The name of the store to query this table by; None unless the store was named (as Java)."""
        return self._queryable

    def _value_getter(self, purpose: str) -> ValueGetterSupplier[K, V]:
        if self._getter is None:
            raise TopologyError(
                f"{self!r} is suppressed and cannot be used for {purpose}; materialise it first, e.g. "
                "table.to_stream().to_table(Materialized.as_('name'))"
            )
        return self._getter

    def _stateful_child(
        self,
        prefix: str,
        named: Named_,
        materialized: Materialized | None,
        factory: Callable[[str | None], object],
        value_serde: Serde[VR] | None,
        getter: Callable[[], ValueGetterSupplier[K, VR]],
        old_values: SendOldValues | None = None,
    ) -> KTable[K, VR]:
        b = self._builder
        store = None
        stores: tuple[Any, ...] = ()
        m = None
        if materialized is not None:
            m = materialized.merged_serdes(self.key_serde, value_serde)
            # Java materialises only a named store; an anonymous Materialized burns a store index first
            store = store_name(b, materialized, prefix)
            if materialized.store_name is None:
                store = None
            else:
                stores = (key_value_store(b, store, m, m.key_serde, m.value_serde),)
        name = b.processor_name(named, prefix)
        old_values = old_values or SendOldValues("processor", store is not None, (self.old_values,))
        b.add_processor(name, lambda: factory(store), (self.name,), stores=stores)
        value_getter = StoreValueGetterSupplier(store) if store is not None else getter()
        return KTable(b, name, m.key_serde if m else self.key_serde, m.value_serde if m else value_serde,
                      self.source_nodes, value_getter, store, self.windows,
                      queryable=materialized.store_name if materialized else None, old_values=old_values,
                      versioned=is_versioned(materialized) if store is not None else self.versioned)  # fmt: skip

    # -- operators ----------------------------------------------------------------------------

    def filter(
        self, predicate: Callable[[K, V], object], named: Named_ = None, materialized: Materialized | None = None
    ) -> KTable[K, V]:
        """Keep the entries for which `predicate(key, value)` holds; others read as deleted."""
        return self._filter(predicate, False, named, materialized)

    def filter_not(
        self, predicate: Callable[[K, V], object], named: Named_ = None, materialized: Materialized | None = None
    ) -> KTable[K, V]:
        """Keep the entries for which `predicate(key, value)` is false."""
        return self._filter(predicate, True, named, materialized)

    def _filter(
        self, predicate: Callable[[K, V], object], negate: bool, named: Named_, materialized: Materialized | None
    ) -> KTable[K, V]:
        check_callable(predicate, "filter's predicate")
        # as Java's KTableFilter: old values are sent at once if the upstream table is materialised
        old_values = SendOldValues("processor", materialized is not None and materialized.store_name is not None,
                                    (self.old_values,))
        if self.old_values.enable(False):
            old_values.enabled = True
        return self._stateful_child(
            names.KTABLE_FILTER, named, materialized,
            lambda store: KTableFilter(predicate, negate, store, old_values.enabled),
            self.value_serde, lambda: FilterValueGetterSupplier(self._value_getter("a filter"), predicate, negate),
            old_values,
        )  # fmt: skip

    @overload
    def map_values(
        self, mapper: Callable[[V], VR], named: Named_ = None, materialized: Materialized | None = None
    ) -> KTable[K, VR]: ...

    @overload
    def map_values(
        self, mapper: Callable[[K, V], VR], named: Named_ = None, materialized: Materialized | None = None
    ) -> KTable[K, VR]: ...

    def map_values(
        self, mapper: Callable[..., VR], named: Named_ = None, materialized: Materialized | None = None
    ) -> KTable[K, VR]:
        """Map each value with `mapper(value)` (or `mapper(key, value)`); keys are unchanged."""
        check_callable(mapper, "map_values's mapper")
        with_key_ = takes_key(mapper, 1)
        keyed = with_key(mapper, 1, "map_values's mapper")
        return self._stateful_child(
            names.KTABLE_MAPVALUES, named, materialized, lambda store: KTableMapValues(mapper, with_key_, store),
            self._builder.infer(self.value_serde, "value"),
            lambda: MapValuesValueGetterSupplier(self._value_getter("map_values"), keyed),
        )  # fmt: skip

    @overload
    def transform_values(self, supplier: ValueTransformerWithKeySupplier[K, V, VR],
                         *options: Materialized | Named | str | None, materialized: Materialized | None = None,
                         named: Named_ = None) -> KTable[K, VR]: ...  # fmt: skip

    @overload
    def transform_values(self, supplier: Callable[[], ValueTransformerWithKey[K, V, VR]],
                         *options: Materialized | Named | str | None, materialized: Materialized | None = None,
                         named: Named_ = None) -> KTable[K, VR]: ...  # fmt: skip

    def transform_values(self, supplier: object, *options: Materialized | Named | str | None,
                         materialized: Materialized | None = None, named: Named_ = None) -> KTable[K, Any]:  # fmt: skip
        """Each value through a `ValueTransformerWithKey` (`transform(key, value)`, deletes included),
        which may use the stores named in `options` (or its supplier's `stores()`); materialised
        when given a `Materialized` with a store name (Java's `transformValues`)."""
        from streams_core.kstream.internals.ktable_transform_values import transform_values

        return transform_values(self, supplier, options, materialized, named)

    @overload
    def to_stream(self, key_mapper: None = None, named: Named_ = None) -> KStream[K, V]: ...

    @overload
    def to_stream(self, key_mapper: Callable[[K, V | None], KR], named: Named_ = None) -> KStream[KR, V]: ...

    def to_stream(self, key_mapper: Callable[[K, V | None], Any] | None = None, named: Named_ = None) -> KStream[Any, V]:
        """The table's updates as a stream (deletes as None values); `key_mapper(key, value or None)` may re-key it."""
        from streams_core.kstream.kstream import KStream

        b = self._builder
        name = b.processor_name(named, names.KTABLE_TOSTREAM)
        b.add_processor(name, lambda: KTableToStream(None), (self.name,))
        stream: KStream[Any, V] = KStream(b, name, self.key_serde, self.value_serde, self.source_nodes)
        if key_mapper is None:
            return stream
        check_callable(key_mapper, "to_stream's key mapper")
        return stream.select_key(key_mapper)  # Java's `toStream(named).selectKey(mapper)`

    def suppress(self, suppressed: Suppressed) -> KTable[K, V]:
        """Hold updates back: final results per window, or at most one per key per time limit."""
        if not isinstance(suppressed, Suppressed):
            raise TypeError(f"suppress takes a Suppressed, got {suppressed!r}")
        b = self._builder
        if self.store_name is not None and self.versioned:  # Java's eager check; inherited versions at build
            raise TopologyError("suppress() is only supported for non-versioned KTables")
        if self.versioned:
            b.at_build(_refuse_versioned_suppress)
        name = suppressed.name or b.new_processor_name(names.KTABLE_SUPPRESS)
        store_name = f"{suppressed.name}-store" if suppressed.name else b.new_store_name(names.KTABLE_SUPPRESS)
        if suppressed.final_results:
            if self.windows is None:
                raise TopologyError(
                    "Suppressed.until_window_closes applies to windowed tables (the result of windowed_by(...) "
                    f"aggregations); {self!r} is not windowed"
                )
            duration = self.windows[1]
        else:
            duration = suppressed.time_limit_ms  # type: ignore[assignment]
        buffer = suppressed.buffer_config
        store = SuppressionBufferBuilder(store_name, self.key_serde, self.value_serde, buffer.byte_limit is not None)
        b.add_processor(name, lambda: KTableSuppress(
            name, store_name, duration, suppressed.final_results, suppressed.final_results, buffer.record_limit,
            buffer.byte_limit, buffer.fail_when_full,
        ), (self.name,), stores=(store,))  # fmt: skip
        getter = None if self._getter is None else SuppressValueGetterSupplier(self._getter, store_name)
        return KTable(b, name, self.key_serde, self.value_serde, self.source_nodes, getter, None, self.windows,
                      old_values=SendOldValues("processor", False, (self.old_values,)))  # fmt: skip

    def group_by(
        self,
        selector: Callable[[K, V], tuple[KR, VR]],
        grouped: Grouped | None = None,
        *,
        key_serde: Serde[KR] | None = None,
        value_serde: Serde[VR] | None = None,
    ) -> KGroupedTable[KR, VR]:
        """Re-group the table by `selector(key, value) -> (group key, value)`; always repartitions."""
        from streams_core.kstream.kgrouped_table import KGroupedTable

        check_callable(selector, "group_by's selector")
        g = (grouped or Grouped()).merged(key_serde=key_serde, value_serde=value_serde)
        b = self._builder
        self.old_values.enable(True)
        name = b.processor_name(g.name, names.KTABLE_SELECT)
        b.add_processor(name, lambda: KTableRepartitionMap(selector), (self.name,))
        return KGroupedTable(b, name, g.key_serde or b.infer(self.key_serde, "key"),
                             g.value_serde or b.infer(self.value_serde, "value"), g.name)  # fmt: skip

    # -- joins --------------------------------------------------------------------------------

    @overload
    def join(self, other: KTable[K, VO], joiner: Callable[[V, VO], VR], /,
             *options: Named | str | Materialized | None, named: Named_ = None,
             materialized: Materialized | None = None) -> KTable[K, VR]: ...  # fmt: skip

    @overload
    def join(self, other: KTable[KO, VO], foreign_key_extractor: Callable[[V], KO], joiner: Callable[[V, VO], VR], /,
             *options: TableJoined | Materialized | None, materialized: Materialized | None = None,
             table_joined: TableJoined | None = None) -> KTable[K, VR]: ...  # fmt: skip

    @overload
    def join(self, other: KTable[KO, VO], foreign_key_extractor: Callable[[K, V], KO],
             joiner: Callable[[V, VO], VR], /, *options: TableJoined | Materialized | None,
             materialized: Materialized | None = None,
             table_joined: TableJoined | None = None) -> KTable[K, VR]: ...  # fmt: skip

    def join(self, other: KTable[Any, Any], joiner: Callable[..., Any], *args: Any, named: Named_ = None,
             materialized: Materialized | None = None, table_joined: TableJoined | None = None) -> KTable[K, Any]:  # fmt: skip
        """Inner join on the key with a co-partitioned table: `joiner(left, right)` while both have a value.

        `join(other, foreign_key_extractor, joiner, table_joined=None, materialized=None)` is the
        foreign-key join (KIP-213): each left value joins the `other` row whose key is
        `foreign_key_extractor(value)` (or `(key, value)`); the tables need not be co-partitioned.
        """
        return self._dispatch(other, joiner, "inner", args, named, materialized, table_joined)

    @overload
    def left_join(self, other: KTable[K, VO], joiner: Callable[[V, VO | None], VR], /,
                  *options: Named | str | Materialized | None, named: Named_ = None,
                  materialized: Materialized | None = None) -> KTable[K, VR]: ...  # fmt: skip

    @overload
    def left_join(self, other: KTable[KO, VO], foreign_key_extractor: Callable[[V], KO],
                  joiner: Callable[[V, VO | None], VR], /, *options: TableJoined | Materialized | None,
                  materialized: Materialized | None = None,
                  table_joined: TableJoined | None = None) -> KTable[K, VR]: ...  # fmt: skip

    @overload
    def left_join(self, other: KTable[KO, VO], foreign_key_extractor: Callable[[K, V], KO],
                  joiner: Callable[[V, VO | None], VR], /, *options: TableJoined | Materialized | None,
                  materialized: Materialized | None = None,
                  table_joined: TableJoined | None = None) -> KTable[K, VR]: ...  # fmt: skip

    def left_join(self, other: KTable[Any, Any], joiner: Callable[..., Any], *args: Any, named: Named_ = None,
                  materialized: Materialized | None = None, table_joined: TableJoined | None = None) -> KTable[K, Any]:  # fmt: skip
        """Left join: `joiner(left, right or None)` while the left table has a value (also by foreign key)."""
        return self._dispatch(other, joiner, "left", args, named, materialized, table_joined)

    def _dispatch(self, other: KTable[Any, Any], function: Callable[..., Any], kind: str, args: tuple[Any, ...],
                  named: Named_, materialized: Materialized | None,
                  table_joined: TableJoined | None) -> KTable[K, Any]:  # fmt: skip
        if args and callable(args[0]) and not isinstance(args[0], (Named, str)):
            from streams_core.kstream.internals.ktable_fk_join import foreign_key_join

            for option in args[1:]:
                if isinstance(option, TableJoined):
                    table_joined = option
                elif isinstance(option, Materialized):
                    materialized = option
                elif option is not None:
                    raise TypeError(f"a foreign-key join takes a TableJoined and a Materialized, got {option!r}")
            if not isinstance(other, KTable) or other._builder is not self._builder:
                raise TopologyError(f"a KTable joins a KTable of the same StreamsBuilder, got {other!r}")
            return foreign_key_join(self, other, function, args[0], kind == "left", table_joined, materialized)
        named, materialized = named_and_materialized(args, named, materialized, "a table join")
        return self._join(other, function, kind, named, materialized)

    def outer_join(self, other: KTable[K, VO], joiner: Callable[[V | None, VO | None], VR], named: Named_ = None,
                   materialized: Materialized | None = None) -> KTable[K, VR]:  # fmt: skip
        """Outer join: `joiner(left or None, right or None)` while either table has a value."""
        return self._join(other, joiner, "outer", named, materialized)

    def _join(
        self, other: KTable[K, Any], joiner: Callable[[Any, Any], VR], kind: str, named: Named_,
        materialized: Materialized | None,
    ) -> KTable[K, VR]:
        if not isinstance(other, KTable) or other._builder is not self._builder:
            raise TopologyError(f"a KTable joins a KTable of the same StreamsBuilder, got {other!r}")
        check_callable(joiner, "the joiner")
        b = self._builder
        given = name_of(named)
        this_prefix, other_prefix = {
            "inner": (names.KTABLE_JOINTHIS, names.KTABLE_JOINOTHER),
            "left": (names.KTABLE_LEFTTHIS, names.KTABLE_LEFTOTHER),
            "outer": (names.KTABLE_OUTERTHIS, names.KTABLE_OUTEROTHER),
        }[kind]
        merge = given or b.new_processor_name(names.KTABLE_MERGE)
        this_name = f"{given}-join-this" if given else b.new_processor_name(this_prefix)
        other_name = f"{given}-join-other" if given else b.new_processor_name(other_prefix)
        this_getter = self._value_getter("a join")
        other_getter = other._value_getter("a join")
        self.old_values.materialize()
        other.old_values.materialize()
        sources = self.source_nodes | other.source_nodes
        b.copartition(sources)
        b.add_processor(this_name, lambda: KTableKTableJoin(other_getter, joiner, kind, True), (self.name,),
                        connected=other_getter.store_names)  # fmt: skip
        b.add_processor(other_name, lambda: KTableKTableJoin(this_getter, joiner, kind, False), (other.name,),
                        connected=this_getter.store_names)  # fmt: skip
        key_serde = self.key_serde or other.key_serde
        store = None
        stores: tuple[Any, ...] = ()
        value_serde = b.infer(self.value_serde, "value")
        if materialized is not None:
            m = materialized.merged_serdes(key_serde, value_serde)
            key_serde, value_serde = m.key_serde, m.value_serde
            store = store_name(b, materialized, names.KTABLE_MERGE)
            stores = (key_value_store(b, store, m, key_serde, value_serde),)
        b.add_processor(merge, lambda: KTableKTableJoinMerger(store), (this_name, other_name), stores=stores)
        getter: ValueGetterSupplier[K, VR] = JoinValueGetterSupplier(this_getter, other_getter, joiner, kind)
        if store is not None:
            getter = StoreValueGetterSupplier(store)
        if kind != "inner":
            self.old_values.enable(True)
        if kind == "outer":
            other.old_values.enable(True)
        return KTable(b, merge, key_serde, value_serde, sources, getter, store,
                      queryable=materialized.store_name if materialized else None,
                      old_values=SendOldValues("join", False, (self.old_values, other.old_values)),
                      versioned=is_versioned(materialized) if store is not None
                      else self.versioned and other.versioned)  # fmt: skip


def _refuse_versioned_suppress() -> None:
    raise TopologyError(
        "suppress() is only supported for non-versioned KTables (note that version semantics might be inherited "
        "from upstream)"
    )
