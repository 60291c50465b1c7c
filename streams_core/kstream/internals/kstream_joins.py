"""The sub-graphs of KStream joins: with a KStream (windowed), a KTable, a GlobalKTable.

A side whose key was changed upstream is repartitioned first; the joined sides' source topics
are declared co-partitioned (a GlobalKTable needs neither). Names follow Kafka Streams:
`KSTREAM-WINDOWED-`, `KSTREAM-JOINTHIS-` / `KSTREAM-OUTERTHIS-`, `KSTREAM-JOINOTHER-` /
`KSTREAM-OUTEROTHER-`, `KSTREAM-MERGE-`, stores `<join this name>-store`; `KSTREAM-JOIN-` /
`KSTREAM-LEFTJOIN-` for table joins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streams_core.errors import TopologyError
from streams_core.kstream.internals import names
from streams_core.kstream.internals.functions import check_callable, with_key
from streams_core.kstream.internals.kstream_kstream_join import KStreamJoinWindow, KStreamKStreamJoin, TimeTrackers
from streams_core.kstream.internals.kstream_kstream_self_join import KStreamKStreamSelfJoin
from streams_core.kstream.internals.kstream_ktable_join import KStreamKTableJoin
from streams_core.kstream.internals.ktable_value_getters import StoreValueGetterSupplier
from streams_core.kstream.internals.outer_join_store import SideValuesSerde, TimestampedKeyAndJoinSideSerde
from streams_core.kstream.internals.self_join_optimizer import SelfJoinCandidate
from streams_core.kstream.internals.versioned_stores import VersionedStoreBuilder
from streams_core.kstream.joined import Joined
from streams_core.kstream.named import Named, name_of
from streams_core.kstream.stream_joined import StreamJoined
from streams_core.kstream.windows import JoinWindows
from streams_core.processor.internals.stateless_processors import KStreamPassThrough
from streams_core.processor.type_vars import GK, VO, VR, K, V
from streams_core.state.internals.time_ordered_key_value_buffer import JoinBufferBuilder
from streams_core.state.stores import Stores

if TYPE_CHECKING:
    from streams_core.kstream.global_ktable import GlobalKTable
    from streams_core.kstream.internals.internal_streams_builder import InternalStreamsBuilder
    from streams_core.kstream.kstream import KStream
    from streams_core.kstream.ktable import KTable

__all__ = ["join"]


def join(
    this: KStream[K, V], other: object, kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> KStream[K, Any]:
    """Dispatch on the kind of `other` (see `KStream.join`)."""
    from streams_core.kstream.global_ktable import GlobalKTable
    from streams_core.kstream.kstream import KStream
    from streams_core.kstream.ktable import KTable

    if isinstance(other, KStream):
        return _stream_stream(this, other, kind, *args, **kwargs)
    if kind == "outer":
        raise TopologyError(f"outer_join takes a KStream; got {other!r}")
    if isinstance(other, KTable):
        return _stream_table(this, other, kind == "left", *args, **kwargs)
    if isinstance(other, GlobalKTable):
        return _stream_global(this, other, kind == "left", *args, **kwargs)
    raise TopologyError(f"a KStream joins a KStream, a KTable or a GlobalKTable; got {other!r}")


def _stream_stream(
    this: KStream[K, V],
    other: KStream[K, VO],
    kind: str,
    joiner: Callable[..., VR],
    windows: JoinWindows | None = None,
    stream_joined: StreamJoined | None = None,
) -> KStream[K, VR]:
    from streams_core.kstream.kstream import KStream

    this._check_same_builder(other)
    if not isinstance(windows, JoinWindows):
        raise TopologyError(
            f"a KStream-KStream join needs JoinWindows (e.g. JoinWindows.of_time_difference_and_grace), got {windows!r}"
        )
    joiner = with_key(joiner, 2, "the joiner")
    sj = stream_joined or StreamJoined()
    b = this._builder
    key_serde = sj.key_serde or this.key_serde or other.key_serde
    this_serde = sj.value_serde or this.value_serde
    other_serde = sj.other_value_serde or other.value_serde
    if this.repartition_required:
        this = this._repartitioned_for_join(f"{sj.name}-left" if sj.name else this.name, key_serde, this_serde)
    if other.repartition_required:
        other = other._repartitioned_for_join(f"{sj.name}-right" if sj.name else other.name, key_serde, other_serde)
    b.copartition(this.source_nodes | other.source_nodes)
    left_outer, right_outer = kind in ("left", "outer"), kind == "outer"
    # names as Java's KStreamImplJoin (indices are used even for given names)
    this_suffix = "-outer-this-join" if right_outer else "-this-join"
    other_suffix = "-outer-other-join" if left_outer else "-other-join"
    this_windowed = b.suffixed_name(sj.name, "-this-windowed", names.KSTREAM_WINDOWED)
    other_windowed = b.suffixed_name(sj.name, "-other-windowed", names.KSTREAM_WINDOWED)
    this_generated = b.new_processor_name(names.KSTREAM_OUTERTHIS if right_outer else names.KSTREAM_JOINTHIS)
    other_generated = b.new_processor_name(names.KSTREAM_OUTEROTHER if left_outer else names.KSTREAM_JOINOTHER)
    this_join = sj.name + this_suffix if sj.name else this_generated
    other_join = sj.name + other_suffix if sj.name else other_generated
    merge = b.suffixed_name(sj.name, "-merge", names.KSTREAM_MERGE)
    this_window_store = _window_store(sj, sj.this_store_supplier, this_generated, this_suffix, windows, key_serde,
                                      this_serde)  # fmt: skip
    other_window_store = _window_store(sj, sj.other_store_supplier, other_generated, other_suffix, windows, key_serde,
                                       other_serde)  # fmt: skip
    this_store, other_store = this_window_store.name, other_window_store.name
    if this_store == other_store:
        raise TopologyError(f"the two sides of a stream-stream join need different store names; both are {this_store!r}")
    outer_store = None
    if left_outer:
        suffix = "-outer-shared-join" if right_outer else "-left-shared-join"
        if sj.this_store_supplier is not None:
            outer_store = sj.this_store_supplier.name + suffix + "-store"
        elif sj.store_name:
            outer_store = sj.store_name + suffix + "-store"
        else:
            digits = this_generated[len(names.KSTREAM_OUTERTHIS if right_outer else names.KSTREAM_JOINTHIS):]
            outer_store = names.KSTREAM_OUTERSHARED + digits + "-store"
    if left_outer:
        b.relaxed_null_key_join(this_windowed)
        b.relaxed_null_key_join(other_windowed)
    trackers = TimeTrackers()
    b.add_processor(this_windowed, lambda: KStreamJoinWindow(this_store), (this.name,), stores=(this_window_store,))
    b.add_processor(other_windowed, lambda: KStreamJoinWindow(other_store), (other.name,),
                    stores=(other_window_store,))  # fmt: skip
    outer_builders: tuple[Any, ...] = ()
    if outer_store is not None:
        factory = Stores.in_memory_key_value_store if sj.in_memory else Stores.persistent_key_value_store
        supplier = factory(outer_store)
        outer_builder = Stores.key_value_store_builder(
            supplier,
            b.bound(TimestampedKeyAndJoinSideSerde(key_serde)),
            b.bound(SideValuesSerde(this_serde, other_serde)),
        )
        outer_builders = (_logging(outer_builder, sj),)
    b.add_processor(
        this_join,
        lambda: KStreamKStreamJoin(True, other_store, windows, joiner, left_outer, trackers, outer_store),
        (this_windowed,), connected=(other_store,),
    )  # fmt: skip
    for outer_builder in outer_builders:  # connected after the other side's store, as Java does
        b.itb.add_state_store(outer_builder, (this_join,))
    b.add_processor(
        other_join,
        lambda: KStreamKStreamJoin(False, this_store, windows, joiner, right_outer, trackers, outer_store),
        (other_windowed,), connected=(this_store,) + ((outer_store,) if outer_store else ()),
    )  # fmt: skip
    b.add_processor(merge, KStreamPassThrough, (this_join, other_join))
    if kind == "inner" and this.name == other.name:
        b.self_join_candidates.append(SelfJoinCandidate(
            this_windowed, other_windowed, this_join, other_join, merge, this_store, other_store,
            lambda: KStreamKStreamSelfJoin(this_store, windows, joiner),
        ))  # fmt: skip
    return KStream(b, merge, key_serde, b.infer(this_serde, "value"), this.source_nodes | other.source_nodes)


def _logging(builder: Any, sj: StreamJoined) -> Any:
    """A join store's changelog is deleted, never compacted: its stores keep duplicates (Java's
    `StreamJoinedStoreFactory` forces `cleanup.policy=delete` over the user's log config)."""
    if not sj.logging_enabled:
        return builder.with_logging_disabled()
    return builder.with_logging_enabled({**sj.log_config, "cleanup.policy": "delete"})


def _window_store(
    sj: StreamJoined,
    supplier: Any,
    generated: str,
    suffix: str,
    windows: JoinWindows,
    key_serde: Any,
    value_serde: Any,
) -> Any:
    """A side's window store: from its supplier (checked as Java's `assertWindowSettings`), else
    `<store name><suffix>-store` or `<generated name>-store`."""
    size = windows.size_ms
    if supplier is None:
        name = (sj.store_name + suffix if sj.store_name else generated) + "-store"
        factory = Stores.in_memory_window_store if sj.in_memory else Stores.persistent_window_store
        supplier = factory(name, size + windows.grace_period_ms, size, True)
    else:
        if not supplier.retain_duplicates:
            raise TopologyError("The StoreSupplier must set retainDuplicates=true, found retainDuplicates=false")
        if supplier.window_size != size or supplier.retention_period != size + windows.grace_period_ms:
            raise TopologyError(
                f"Window settings mismatch. WindowBytesStoreSupplier settings (store {supplier.name!r}: window "
                f"size {supplier.window_size} ms, retention {supplier.retention_period} ms) must match JoinWindows "
                f"settings (size {size} ms, grace {windows.grace_period_ms} ms) for the window size and retention "
                f"period (retention = size + grace)"
            )
    return _logging(Stores.window_store_builder(supplier, key_serde, value_serde), sj)


def _stream_table(
    this: KStream[K, V], table: KTable[K, VO], left: bool, joiner: Callable[..., VR], joined: Joined | None = None
) -> KStream[K, VR]:
    from streams_core.kstream.kstream import KStream

    this._check_same_builder(table)
    joiner = with_key(joiner, 2, "the joiner")
    j = joined or Joined()
    b = this._builder
    if this.repartition_required:
        # Java names the topic after the Joined name, else after the key-changing node, and
        # repartitions before it names the join
        prefix = j.name or this.name
        this = this._repartitioned_for_join(prefix, j.key_serde or this.key_serde, j.value_serde or this.value_serde)
    name = b.processor_name(j.name, names.KSTREAM_LEFTJOIN if left else names.KSTREAM_JOIN)
    getter = table._value_getter("a KStream-KTable join")
    table.old_values.materialize()
    sources = this.source_nodes | table.source_nodes
    b.copartition(sources)
    grace = j.grace_period_ms
    buffer_name: str | None = None
    buffers: tuple[JoinBufferBuilder, ...] = ()
    if grace is not None:
        _check_grace_period(b, table, getter.store_names, grace)
        buffer_name = f"{name}-Buffer"  # Java's name; a changelogged store (KIP-923)
        buffers = (JoinBufferBuilder(buffer_name, j.key_serde or this.key_serde, j.value_serde or this.value_serde),)
    b.add_processor(name, lambda: KStreamKTableJoin(getter, joiner, left, None, grace, buffer_name), (this.name,),
                    stores=buffers, connected=getter.store_names)  # fmt: skip
    if left:
        b.relaxed_null_key_join(name)
    return KStream(b, name, this.key_serde, b.infer(this.value_serde, "value"), sources)


_NOT_VERSIONED = "KTable must be versioned to use a grace period in a stream table join."


def _check_grace_period(
    b: InternalStreamsBuilder, table: KTable[Any, Any], store_names: tuple[str, ...], grace: int
) -> None:
    """Java's checks of a grace period (ValueError for its IllegalArgumentException): a table with
    a store of its own is checked at the join; the stores a table reads through its parents (a
    filter's, say) and every history retention when the topology is built."""
    if table.store_name is not None and not isinstance(b.itb.store_builder(table.store_name), VersionedStoreBuilder):
        raise ValueError(_NOT_VERSIONED)

    def check() -> None:
        for store_name in store_names:
            store = b.itb.store_builder(store_name)
            if not isinstance(store, VersionedStoreBuilder):
                raise ValueError(_NOT_VERSIONED)
            if store.history_retention_ms < grace:
                raise ValueError("History retention must be at least grace period.")

    b.at_build(check)


def _stream_global(
    this: KStream[K, V], table: GlobalKTable[GK, Any], left: bool, key_selector: Callable[[K, V], GK],
    joiner: Callable[..., VR], named: Named | str | None = None,
) -> KStream[K, VR]:
    from streams_core.kstream.kstream import KStream

    this._check_same_builder(table)
    check_callable(key_selector, "the global join's key selector")
    joiner = with_key(joiner, 2, "the joiner")
    b = this._builder
    name = b.processor_name(name_of(named), names.KSTREAM_LEFTJOIN if left else names.KSTREAM_JOIN)
    getter = StoreValueGetterSupplier(table.store_name)
    b.add_processor(name, lambda: KStreamKTableJoin(getter, joiner, left, key_selector), (this.name,),
                    connected=getter.store_names)  # fmt: skip
    if left:
        b.relaxed_null_key_join(name)
    return KStream(b, name, this.key_serde, b.infer(this.value_serde, "value"), this.source_nodes,
                   this.repartition_required)
