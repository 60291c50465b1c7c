"""KStream: an unbounded stream of key-value records, and the operators on it.

Every operator adds its processor to the topology at once and returns a new KStream (or a
KTable, a grouped stream, a dict of branches). Operators that may change keys (`map`,
`flat_map`, `select_key`, `process`) mark the stream: a later grouping or join first sends it
through an internal repartition topic, so that records with equal keys meet in one task.

Functions: predicates, mappers and actions take `(key, value)`; value mappers take `value`,
or `(key, value)` when they have two required parameters; `map` and `flat_map` return
`(key, value)` pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, overload

from streams_core.errors import TopologyError
from streams_core.kstream.grouped import Grouped
from streams_core.kstream.internals import names
from streams_core.kstream.internals.functions import check_callable, takes_key
from streams_core.kstream.internals.kstream_print import KStreamPrint
from streams_core.kstream.internals.kstream_process_values import fixed_key_factory
from streams_core.kstream.internals.ktable_processors import KTableSource
from streams_core.kstream.internals.ktable_value_getters import StoreValueGetterSupplier
from streams_core.kstream.internals.materialize import is_versioned, key_value_store, store_name
from streams_core.kstream.internals.send_old_values import SendOldValues
from streams_core.kstream.materialized import Materialized
from streams_core.kstream.named import Named, name_of
from streams_core.kstream.printed import Printed
from streams_core.kstream.produced import Produced
from streams_core.kstream.repartitioned import Repartitioned
from streams_core.processor.connected_store_provider import supplier_stores
from streams_core.processor.fixed_key_processor import FixedKeyProcessor, FixedKeyProcessorSupplier
from streams_core.processor.internals.stateless_processors import (
    KStreamBranch,
    KStreamFilter,
    KStreamFlatMap,
    KStreamFlatMapValues,
    KStreamMap,
    KStreamMapValues,
    KStreamPassThrough,
    KStreamPeek,
    KStreamSelectKey,
)
from streams_core.processor.processor import Processor, ProcessorSupplier
from streams_core.processor.stream_partitioner import StreamPartitioner
from streams_core.processor.topic_name_extractor import TopicNameExtractor
from streams_core.processor.type_vars import GK, GV, KR, VO, VR, K, V
from streams_core.serde import Serde

if TYPE_CHECKING:
    from streams_core.kstream.branched_kstream import BranchedKStream
    from streams_core.kstream.global_ktable import GlobalKTable
    from streams_core.kstream.internals.internal_streams_builder import InternalStreamsBuilder
    from streams_core.kstream.joined import Joined
    from streams_core.kstream.kgrouped_stream import KGroupedStream
    from streams_core.kstream.ktable import KTable
    from streams_core.kstream.stream_joined import StreamJoined
    from streams_core.kstream.windows import JoinWindows

__all__ = ["KStream"]

Named_ = Named | str | None


class KStream(Generic[K, V]):
    """A record stream: `name` is the node producing it; serdes are what is known of its keys and values."""

    __slots__ = (
        "_builder", "_join_repartition", "key_serde", "name", "repartition_required", "source_nodes", "value_serde",
    )  # fmt: skip

    def __init__(
        self,
        builder: InternalStreamsBuilder,
        name: str,
        key_serde: Serde[K] | None,
        value_serde: Serde[V] | None,
        source_nodes: frozenset[str],
        repartition_required: bool = False,
    ) -> None:
        self._builder = builder
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.source_nodes = source_nodes
        self.repartition_required = repartition_required
        self._join_repartition: KStream[K, V] | None = None

    def __repr__(self) -> str:
        return f"KStream({self.name!r})"

    def _child(
        self,
        prefix: str,
        named: Named_,
        factory: Callable[[], object],
        key_serde: Serde[KR] | None,
        value_serde: Serde[VR] | None,
        repartition_required: bool,
    ) -> KStream[KR, VR]:
        name = self._builder.processor_name(named, prefix)
        self._builder.add_processor(name, factory, (self.name,))
        self._builder.note_operation(name, prefix)
        return KStream(self._builder, name, key_serde, value_serde, self.source_nodes, repartition_required)

    # -- stateless ----------------------------------------------------------------------------

    def filter(self, predicate: Callable[[K, V], object], named: Named_ = None) -> KStream[K, V]:
        """The records for which `predicate(key, value)` is true."""
        check_callable(predicate, "filter's predicate")
        return self._child(names.KSTREAM_FILTER, named, lambda: KStreamFilter(predicate, False),
                           self.key_serde, self.value_serde, self.repartition_required)  # fmt: skip

    def filter_not(self, predicate: Callable[[K, V], object], named: Named_ = None) -> KStream[K, V]:
        """The records for which `predicate(key, value)` is false."""
        check_callable(predicate, "filter_not's predicate")
        return self._child(names.KSTREAM_FILTER, named, lambda: KStreamFilter(predicate, True),
                           self.key_serde, self.value_serde, self.repartition_required)  # fmt: skip

    def map(self, mapper: Callable[[K, V], tuple[KR, VR]], named: Named_ = None) -> KStream[KR, VR]:
        """`mapper(key, value) -> (new key, new value)` for each record; marks the stream for repartitioning."""
        check_callable(mapper, "map's mapper")
        b = self._builder
        return self._child(names.KSTREAM_MAP, named, lambda: KStreamMap(mapper),
                           b.infer(self.key_serde, "key"), b.infer(self.value_serde, "value"), True)  # fmt: skip

    @overload
    def map_values(self, mapper: Callable[[V], VR], named: Named_ = None) -> KStream[K, VR]: ...

    @overload
    def map_values(self, mapper: Callable[[K, V], VR], named: Named_ = None) -> KStream[K, VR]: ...

    def map_values(self, mapper: Callable[..., VR], named: Named_ = None) -> KStream[K, VR]:
        """`mapper(value)` (or `mapper(key, value)`) as the new value; the key is unchanged."""
        check_callable(mapper, "map_values's mapper")
        with_key = takes_key(mapper, 1)
        return self._child(names.KSTREAM_MAPVALUES, named, lambda: KStreamMapValues(mapper, with_key),
                           self.key_serde, self._builder.infer(self.value_serde, "value"),
                           self.repartition_required)  # fmt: skip

    def flat_map(self, mapper: Callable[[K, V], Iterable[tuple[KR, VR]]], named: Named_ = None) -> KStream[KR, VR]:
        """Zero or more `(key, value)` pairs per record from `mapper(key, value)`; marks for repartitioning."""
        check_callable(mapper, "flat_map's mapper")
        b = self._builder
        return self._child(names.KSTREAM_FLATMAP, named, lambda: KStreamFlatMap(mapper),
                           b.infer(self.key_serde, "key"), b.infer(self.value_serde, "value"), True)  # fmt: skip

    @overload
    def flat_map_values(self, mapper: Callable[[V], Iterable[VR]], named: Named_ = None) -> KStream[K, VR]: ...

    @overload
    def flat_map_values(self, mapper: Callable[[K, V], Iterable[VR]], named: Named_ = None) -> KStream[K, VR]: ...

    def flat_map_values(self, mapper: Callable[..., Iterable[VR]], named: Named_ = None) -> KStream[K, VR]:
        """One record per value `mapper(value)` (or `mapper(key, value)`) yields, with the same key."""
        check_callable(mapper, "flat_map_values's mapper")
        with_key = takes_key(mapper, 1)
        return self._child(names.KSTREAM_FLATMAPVALUES, named, lambda: KStreamFlatMapValues(mapper, with_key),
                           self.key_serde, self._builder.infer(self.value_serde, "value"),
                           self.repartition_required)  # fmt: skip

    def select_key(self, selector: Callable[[K, V], KR], named: Named_ = None) -> KStream[KR, V]:
        """`selector(key, value)` as the new key; marks the stream for repartitioning."""
        check_callable(selector, "select_key's selector")
        return self._child(names.KSTREAM_KEY_SELECT, named, lambda: KStreamSelectKey(selector),
                           self._builder.infer(self.key_serde, "key"), self.value_serde, True)  # fmt: skip

    def peek(self, action: Callable[[K, V], object], named: Named_ = None) -> KStream[K, V]:
        """Call `action(key, value)` for each record and pass the record on."""
        check_callable(action, "peek's action")
        return self._child(names.KSTREAM_PEEK, named, lambda: KStreamPeek(action, True),
                           self.key_serde, self.value_serde, self.repartition_required)  # fmt: skip

    def foreach(self, action: Callable[[K, V], object], named: Named_ = None) -> None:
        """Call `action(key, value)` for each record (a terminal operator)."""
        check_callable(action, "foreach's action")
        name = self._builder.processor_name(named, names.KSTREAM_FOREACH)
        self._builder.add_processor(name, lambda: KStreamPeek(action, False), (self.name,))

    def print(self, printed: Printed) -> None:
        """Write each record as `[label]: mapper(key, value)` to standard output or a file (for debugging)."""
        if not isinstance(printed, Printed):
            raise TypeError(f"print takes a Printed (Printed.to_sys_out() or Printed.to_file(path)), got {printed!r}")
        b = self._builder
        name = b.processor_name(printed.processor_name, names.KSTREAM_PRINTER)
        label = printed.label if printed.label is not None else name
        b.add_processor(name, lambda: KStreamPrint(printed.file, label, printed.mapper), (self.name,))

    def merge(self, other: KStream[K, V], named: Named_ = None) -> KStream[K, V]:
        """The records of both streams, in the order they are processed."""
        self._check_same_builder(other)
        name = self._builder.processor_name(named, names.KSTREAM_MERGE)
        self._builder.add_processor(name, KStreamPassThrough, (self.name, other.name))
        self._builder.note_operation(name, names.KSTREAM_MERGE)
        b = self._builder
        key_serde = self.key_serde if self.key_serde is other.key_serde else b.infer(self.key_serde, "key")
        value_serde = self.value_serde if self.value_serde is other.value_serde else b.infer(self.value_serde, "value")
        return KStream(b, name, key_serde, value_serde, self.source_nodes | other.source_nodes,
                       self.repartition_required or other.repartition_required)  # fmt: skip

    def split(self, named: Named_ = None) -> BranchedKStream[K, V]:
        """Route each record to the first branch whose predicate accepts it (see BranchedKStream)."""
        from streams_core.kstream.branched_kstream import BranchedKStream

        return BranchedKStream(self, self._builder.processor_name(named, names.KSTREAM_BRANCH))

    def branch(self, *predicates: Callable[[K, V], object], named: Named_ = None) -> list[KStream[K, V]]:
        """One stream per predicate; a record goes to the first that accepts it (Java's old `branch`)."""
        if not predicates:
            raise TopologyError("branch() needs at least one predicate")
        for predicate in predicates:
            check_callable(predicate, "a branch predicate")
        b = self._builder
        name = b.processor_name(named, names.KSTREAM_BRANCH)
        children = [b.new_processor_name(names.KSTREAM_BRANCHCHILD) for _ in predicates]
        preds = list(predicates)
        b.add_processor(name, lambda: KStreamBranch(preds, children, []), (self.name,))
        branches: list[KStream[K, V]] = []
        for child in children:
            b.add_processor(child, KStreamPassThrough, (name,))
            branches.append(KStream(b, child, self.key_serde, self.value_serde, self.source_nodes,
                                    self.repartition_required))  # fmt: skip
        return branches

    # -- topics and processors ----------------------------------------------------------------

    def to(
        self,
        topic: str | TopicNameExtractor,
        produced: Produced | None = None,
        *,
        key_serde: Serde[K] | None = None,
        value_serde: Serde[V] | None = None,
        partitioner: StreamPartitioner | None = None,
    ) -> None:
        """Write the stream to `topic`, or to the topic `topic(key, value, record_context)` names."""
        p = (produced or Produced()).merged(key_serde=key_serde, value_serde=value_serde, partitioner=partitioner)
        b = self._builder
        name = b.processor_name(p.name, names.KSTREAM_SINK)
        b.itb.add_sink(name, topic, (self.name,), p.key_serde or self.key_serde, p.value_serde or self.value_serde,
                       p.partitioner)  # fmt: skip

    def through(
        self,
        topic: str,
        produced: Produced | None = None,
        *,
        key_serde: Serde[K] | None = None,
        value_serde: Serde[V] | None = None,
        partitioner: StreamPartitioner | None = None,
    ) -> KStream[K, V]:
        """Write to the user topic `topic` and read it back (the topic must exist; see `repartition`)."""
        p = (produced or Produced()).merged(key_serde=key_serde, value_serde=value_serde, partitioner=partitioner)
        key = p.key_serde or self.key_serde
        value = p.value_serde or self.value_serde
        b = self._builder
        sink = b.processor_name(p.name, names.KSTREAM_SINK)
        b.itb.add_sink(sink, topic, (self.name,), key, value, p.partitioner)
        source = b.new_processor_name(names.KSTREAM_SOURCE)
        b.add_source(source, (topic,), None, key, value, None)
        return KStream(b, source, key, value, frozenset({source}))

    def repartition(
        self,
        repartitioned: Repartitioned | None = None,
        *,
        key_serde: Serde[K] | None = None,
        value_serde: Serde[V] | None = None,
        name: str | None = None,
        number_of_partitions: int | None = None,
        partitioner: StreamPartitioner | None = None,
    ) -> KStream[K, V]:
        """Send the stream through an internal topic `<application.id>-<name>-repartition`.

        Without a name the topic is `KSTREAM-REPARTITION-<n>-repartition`; without a partition
        count it gets as many partitions as the sub-topology writing it has tasks.
        """
        r = (repartitioned or Repartitioned()).merged(key_serde=key_serde, value_serde=value_serde, name=name,
                                                      number_of_partitions=number_of_partitions,
                                                      partitioner=partitioner)  # fmt: skip
        b = self._builder
        prefix = r.name or b.new_processor_name(names.KSTREAM_REPARTITION)
        key, value = r.key_serde or self.key_serde, r.value_serde or self.value_serde
        source = b.repartition(self.name, prefix, key, value, number_of_partitions=r.number_of_partitions,
                               partitioner=r.partitioner, optimizable=False)  # fmt: skip
        return KStream(b, source, key, value, frozenset({source}))

    @overload
    def process(self, supplier: ProcessorSupplier[K, V, KR, VR], *store_names: str,
                named: Named_ = None) -> KStream[KR, VR]: ...  # fmt: skip

    @overload
    def process(self, supplier: Callable[[], Processor[K, V, KR, VR]], *store_names: str,
                named: Named_ = None) -> KStream[KR, VR]: ...  # fmt: skip

    def process(self, supplier: object, *store_names: str, named: Named_ = None) -> KStream[Any, Any]:
        """Run a Processor API processor on the stream, connected to the stores `store_names`.

        `supplier` is a Processor class, a zero-argument factory or a ProcessorSupplier (whose
        `stores()`, if any, are added and connected); what it forwards is the new stream (marked
        for repartitioning: it may have changed keys).
        """
        b = self._builder
        name = name_of(named) or b.new_processor_name(names.KSTREAM_PROCESSOR)  # Java burns no index for a name
        b.add_processor(name, supplier, (self.name,), supplier_stores(supplier), store_names)
        return KStream(b, name, b.infer(self.key_serde, "key"), b.infer(self.value_serde, "value"),
                       self.source_nodes, True)  # fmt: skip

    @overload
    def process_values(self, supplier: FixedKeyProcessorSupplier[K, V, VR], *store_names: str,
                       named: Named_ = None) -> KStream[K, VR]: ...  # fmt: skip

    @overload
    def process_values(self, supplier: Callable[[], FixedKeyProcessor[K, V, VR]], *store_names: str,
                       named: Named_ = None) -> KStream[K, VR]: ...  # fmt: skip

    def process_values(self, supplier: object, *store_names: str, named: Named_ = None) -> KStream[K, Any]:
        """Run a FixedKeyProcessor (KIP-820) on the stream: it may change values, never keys, so the
        result needs no repartitioning (the replacement of Java's removed `transformValues`).

        `supplier` is a FixedKeyProcessor class, a zero-argument factory or a supplier with
        `get()` (and `stores()`, whose store builders are added and connected); `store_names`
        connects stores added before.
        """
        b = self._builder
        name = name_of(named) or b.new_processor_name(names.KSTREAM_PROCESSVALUES)
        b.add_processor(name, fixed_key_factory(name, supplier), (self.name,), supplier_stores(supplier), store_names)
        return KStream(b, name, self.key_serde, b.infer(self.value_serde, "value"), self.source_nodes,
                       self.repartition_required)  # fmt: skip

    def to_table(self, named: Named_ = None, materialized: Materialized | None = None) -> KTable[K, V]:
        """The stream as a changelog: a table holding each key's latest value (None deletes)."""
        from streams_core.kstream.ktable import KTable

        b = self._builder
        name = b.processor_name(named, names.KSTREAM_TOTABLE)
        m = (materialized or Materialized()).merged_serdes(self.key_serde, self.value_serde)
        store = store_name(b, materialized, names.KSTREAM_TOTABLE)  # before the repartition, as Java numbers them
        stream = self._repartitioned(name, m.key_serde, m.value_serde) if self.repartition_required else self
        builder = key_value_store(b, store, m, m.key_serde, m.value_serde)
        old_values = SendOldValues("source", m.store_name is not None)
        b.add_processor(name, lambda: KTableSource(store if old_values.materialized else None), (stream.name,))
        b.deferred_store(name, builder, old_values)
        return KTable(b, name, m.key_serde, m.value_serde, stream.source_nodes, StoreValueGetterSupplier(store), store,
                      queryable=m.store_name, old_values=old_values, versioned=is_versioned(m))  # fmt: skip

    # -- grouping -----------------------------------------------------------------------------

    def group_by_key(
        self,
        grouped: Grouped | None = None,
        *,
        key_serde: Serde[K] | None = None,
        value_serde: Serde[V] | None = None,
    ) -> KGroupedStream[K, V]:
        """Group by the current key (repartitioned first if a key-changing operator came before)."""
        from streams_core.kstream.kgrouped_stream import KGroupedStream

        g = (grouped or Grouped()).merged(key_serde=key_serde, value_serde=value_serde)
        key_serde, value_serde = g.key_serde or self.key_serde, g.value_serde or self.value_serde
        return KGroupedStream(self._builder, self.name, key_serde, value_serde, self.source_nodes,
                              self.repartition_required, g.name)  # fmt: skip

    def group_by(
        self,
        selector: Callable[[K, V], KR],
        grouped: Grouped | None = None,
        *,
        key_serde: Serde[KR] | None = None,
        value_serde: Serde[V] | None = None,
    ) -> KGroupedStream[KR, V]:
        """Group by `selector(key, value)`; always repartitions through an internal topic."""
        g = (grouped or Grouped()).merged(key_serde=key_serde, value_serde=value_serde)
        selected = self.select_key(selector, g.name)
        return selected.group_by_key(g)

    # -- joins --------------------------------------------------------------------------------

    @overload
    def join(self, other: KStream[K, VO], joiner: Callable[[V, VO], VR], windows: JoinWindows,
             stream_joined: StreamJoined | None = None) -> KStream[K, VR]: ...  # fmt: skip

    @overload
    def join(self, other: KStream[K, VO], joiner: Callable[[K, V, VO], VR], windows: JoinWindows,
             stream_joined: StreamJoined | None = None) -> KStream[K, VR]: ...  # fmt: skip

    @overload
    def join(self, other: KTable[K, VO], joiner: Callable[[V, VO], VR],
             joined: Joined | None = None) -> KStream[K, VR]: ...  # fmt: skip

    @overload
    def join(self, other: KTable[K, VO], joiner: Callable[[K, V, VO], VR],
             joined: Joined | None = None) -> KStream[K, VR]: ...  # fmt: skip

    @overload
    def join(self, other: GlobalKTable[GK, GV], key_selector: Callable[[K, V], GK], joiner: Callable[[V, GV], VR],
             named: Named_ = None) -> KStream[K, VR]: ...  # fmt: skip

    @overload
    def join(self, other: GlobalKTable[GK, GV], key_selector: Callable[[K, V], GK],
             joiner: Callable[[K, V, GV], VR], named: Named_ = None) -> KStream[K, VR]: ...  # fmt: skip

    def join(self, other: object, *args: Any, **kwargs: Any) -> KStream[Any, Any]:
        """Inner join with a KStream (within `JoinWindows`), a KTable or a GlobalKTable.

        `joiner(left, right)` or `joiner(key, left, right)` makes the result's value.
        """
        return self._join(other, "inner", args, kwargs)

    @overload
    def left_join(self, other: KStream[K, VO], joiner: Callable[[V, VO | None], VR], windows: JoinWindows,
                  stream_joined: StreamJoined | None = None) -> KStream[K, VR]: ...  # fmt: skip

    @overload
    def left_join(self, other: KStream[K, VO], joiner: Callable[[K, V, VO | None], VR], windows: JoinWindows,
                  stream_joined: StreamJoined | None = None) -> KStream[K, VR]: ...  # fmt: skip

    @overload
    def left_join(self, other: KTable[K, VO], joiner: Callable[[V, VO | None], VR],
                  joined: Joined | None = None) -> KStream[K, VR]: ...  # fmt: skip

    @overload
    def left_join(self, other: KTable[K, VO], joiner: Callable[[K, V, VO | None], VR],
                  joined: Joined | None = None) -> KStream[K, VR]: ...  # fmt: skip

    @overload
    def left_join(self, other: GlobalKTable[GK, GV], key_selector: Callable[[K, V], GK],
                  joiner: Callable[[V, GV | None], VR], named: Named_ = None) -> KStream[K, VR]: ...  # fmt: skip

    @overload
    def left_join(self, other: GlobalKTable[GK, GV], key_selector: Callable[[K, V], GK],
                  joiner: Callable[[K, V, GV | None], VR], named: Named_ = None) -> KStream[K, VR]: ...  # fmt: skip

    def left_join(self, other: object, *args: Any, **kwargs: Any) -> KStream[Any, Any]:
        """As `join`, but every record of this stream gives a result (None for a missing right side)."""
        return self._join(other, "left", args, kwargs)

    @overload
    def outer_join(self, other: KStream[K, VO], joiner: Callable[[V | None, VO | None], VR], windows: JoinWindows,
                   stream_joined: StreamJoined | None = None) -> KStream[K, VR]: ...  # fmt: skip

    @overload
    def outer_join(self, other: KStream[K, VO], joiner: Callable[[K, V | None, VO | None], VR],
                   windows: JoinWindows, stream_joined: StreamJoined | None = None) -> KStream[K, VR]: ...  # fmt: skip

    def outer_join(self, other: KStream[K, VO], joiner: Callable[..., VR], windows: JoinWindows,
                   stream_joined: StreamJoined | None = None) -> KStream[K, VR]:  # fmt: skip
        """Windowed outer join of two streams: unmatched records of both sides give results."""
        return self._join(other, "outer", (joiner, windows, stream_joined), {})

    def _join(self, other: object, kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> KStream[Any, Any]:
        from streams_core.kstream.internals import kstream_joins

        return kstream_joins.join(self, other, kind, args, kwargs)

    # -- helpers ------------------------------------------------------------------------------

    def _repartitioned(self, prefix: str, key_serde: Serde[K] | None, value_serde: Serde[V] | None) -> KStream[K, V]:
        """This stream sent through `<prefix>-repartition` (records with None keys dropped)."""
        source = self._builder.repartition(self.name, prefix, key_serde, value_serde)
        return KStream(self._builder, source, key_serde, value_serde, frozenset({source}))

    def _repartitioned_for_join(
        self, prefix: str, key_serde: Serde[K] | None, value_serde: Serde[V] | None
    ) -> KStream[K, V]:
        """This stream repartitioned for a join (Java's `repartitionForJoin`): a second join of the
        same key-changed stream under its own name reuses the topic (the names are burnt anyway)."""
        if self._join_repartition is not None and prefix == self.name:
            self._builder.burn_repartition_names()
            return self._join_repartition
        self._join_repartition = self._repartitioned(prefix, key_serde, value_serde)
        return self._join_repartition

    def _check_same_builder(self, other: object) -> None:
        if getattr(other, "_builder", None) is not self._builder:
            raise TopologyError(f"{other!r} belongs to another StreamsBuilder than {self!r}")

