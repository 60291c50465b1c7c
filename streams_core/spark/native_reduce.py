"""A stateless chain into `reduce()` or `aggregate()`: the user's function per key in a vectorized stage.

`stream(...)` → fused stateless operators → `group_by`/`group_by_key` → `reduce(reducer)` or
`aggregate(initializer, aggregator)` (caching on) → `to_stream()` → `to(topic)` becomes one query:

    Kafka source → mapInArrow(FoldValues: the chain per record; every value reaching the reduce or
                   aggregate as bytes, with its Kafka partition, place in offset order and timestamp)
                 → groupBy(key).applyInPandasWithState(FoldGroups → FoldStage.fold: the key's stored
                   value, then its values in Kafka Streams' order through the user's function;
                   state: the value's serde bytes) → Kafka sink, update mode (one record per
                   changed key)

With `SparkRunner(..., associative_reducers=True)` a reduce reduces partially first: `ReduceKeys`
reduces each key's values per Spark partition in offset order, and `FoldStage` reduces the
partials Kafka partition by partition. That equals Kafka Streams' record-by-record reduction, in
the order where each writer's records of the micro-batch arrive together, only when the reducer
is associative: hence the opt-in (docs/spark.md).
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from streams_core.errors import StreamsError
from streams_core.kstream.internals.kstream_aggregate import KStreamAggregate, KStreamReduce
from streams_core.processor.internals.processor_node import SinkNode
from streams_core.serde import Serde, Serdes
from streams_core.spark.native_count import CountKeys, NativeCount, built_shipped, key_column, same_serde

__all__ = ["NOTHING", "FoldGroups", "FoldStage", "FoldValues", "ReduceKeys", "kafka_order_of"]

log = logging.getLogger(__name__)

#: Partial results held per Spark partition before they go to Spark.
_MAX_PARTIAL_KEYS = 200_000

Step = Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class _Fold:
    """The user's function as one step `(key, aggregate or None, value) -> new aggregate`, and its serdes."""

    step: Step
    #: The store's value serde: what Kafka Streams' store holds, and so Spark state.
    store_serde: Serde[Any]
    sink_serde: Serde[Any]


def _fold(topology: bytes, props: Mapping[str, Any], native: NativeCount) -> _Fold:
    """The reduce or aggregate of the shipped topology as a step, with its store's and sink's value serdes."""
    built = built_shipped(topology, props, native.count_subtopology)
    (node,) = [n for n in built.processors if n.name == native.native[0]]
    (sink,) = built.sinks
    (store,) = node.store_names
    store_serde = built.state_stores[store].timestamped.value_serde.inner
    processor = node.processor
    if isinstance(processor, KStreamReduce):
        reducer = processor.reducer

        def reduce(key: Any, aggregate: Any, value: Any) -> Any:
            return value if aggregate is None else reducer(aggregate, value)

        return _Fold(reduce, store_serde, sink.value_serde)
    if not isinstance(processor, KStreamAggregate):
        raise StreamsError(f"{node.name!r} is neither a reduce nor an aggregate")
    initializer, aggregator = processor.initializer, processor.aggregator

    def aggregate(key: Any, aggregate: Any, value: Any) -> Any:
        return aggregator(key, value, initializer() if aggregate is None else aggregate)

    return _Fold(aggregate, store_serde, sink.value_serde)


def _no_delete(step: Step) -> Step:
    """`step` for partial reductions, which cannot follow a delete."""

    def checked(key: Any, aggregate: Any, value: Any) -> Any:
        new = step(key, aggregate, value)
        if new is None:
            raise StreamsError("the reducer returned None (a delete): partial reductions cannot follow it; "
                               "run without associative_reducers")  # fmt: skip
        return new

    return checked


def kafka_order_of(partition: Any, seq: Any, timestamp: Any) -> Any:
    """The rows' indices (numpy arrays in, out) in `kafka_order`'s order: offset (`seq`) order per
    partition; across partitions the head with the lowest timestamp first, on equal timestamps the
    lower partition (PartitionGroup's choice).

    Vectorized as a stable sort by each row's running largest timestamp within its partition: a
    head is taken when no other head is lower, so no row is taken before one whose running
    maximum is lower, and the running maxima of a partition never decrease.
    """
    import numpy as np

    by_place = np.lexsort((seq, partition))
    part = partition[by_place]
    if len(part) == 0 or part[0] == part[-1]:
        return by_place
    rank = np.cumsum(np.diff(part, prepend=part[0]) != 0).astype(np.int64) << 42  # timestamps < 2**42 ms
    running = np.maximum.accumulate(timestamp[by_place].astype(np.int64) + rank) - rank
    return by_place[np.argsort(running, kind="stable")]


class _Pickled:
    """Values crossing Spark's shuffle where Kafka Streams hands them over in memory (no repartition
    topic): pickled (cloudpickle for classes only shipped by value), never kept in state."""

    @staticmethod
    def serialize(topic: str, value: Any) -> bytes:
        try:
            return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, AttributeError):
            import cloudpickle

            data: bytes = cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            return data

    @staticmethod
    def deserialize(topic: str, data: bytes) -> Any:
        return pickle.loads(data)


def _repartition_value_serde(topology: bytes, props: Mapping[str, Any], native: NativeCount) -> Serde[Any] | None:
    """The replaced repartition topic's value serde (None without one)."""
    if native.bypassed_topic is None:
        return None
    built = built_shipped(topology, props, native.chain_subtopology)
    (sink,) = [s for s in built.sinks if s.name == native.chain_end]
    assert isinstance(sink, SinkNode)
    return sink.value_serde


def _transport(topology: bytes, props: Mapping[str, Any], native: NativeCount) -> Serde[Any] | _Pickled | None:
    """How `FoldValues` hands values to `FoldStage`: as Arrow strings (None), as the replaced
    repartition topic's bytes (Kafka Streams' round trip), else pickled."""
    if native.string_values:
        return None
    return _repartition_value_serde(topology, props, native) or _Pickled()


class _GroupedValues(CountKeys):
    """`mapInArrow` functions whose chain ends in a reduce or aggregate: the partition column read,
    keys grouped as the count's (strings, or the output key serde's bytes)."""

    def columns(self, source_topics: tuple[str, ...]) -> list[str]:
        return ["partition", *(c for c in super().columns(source_topics) if c != "partition")]

    def _key_serializer(self) -> Callable[[str, Any], Any] | None:
        """Serializes the keys other than strings (grouped by their bytes); None for strings."""
        return None if self.native.string_keys else self.native.key_serde.serialize


class FoldValues(_GroupedValues):
    """`mapInArrow` function: Kafka rows in; every record reaching the reduce or aggregate out, as
    (key, partition, seq, timestamp, value): `seq` its place in the partition's offset order, `value`
    the replaced repartition topic's serde bytes (a string for the String serde), else pickled."""

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount) -> None:
        super().__init__(topology, props, native)
        key, value = ("string" if s else "binary" for s in (native.string_keys, native.string_values))
        self.schema = f"key {key}, partition int, seq bigint, timestamp bigint, value {value}"

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        serde = _transport(self.topology, self.props, self.native)
        encode = None if serde is None else serde.serialize
        topic, output = self.native.bypassed_topic or "", self.native.output_topic
        serialize_key = self._key_serializer()
        keys: list[Any] = []
        values: list[Any] = []
        timestamps: list[int] = []

        def received(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if key is None or value is None:
                return
            if encode is not None:
                value = encode(topic, value)
                if value is None:  # read back as None from the repartition topic: the aggregate skips it
                    return
            keys.append(key if serialize_key is None else serialize_key(output, key))
            values.append(value)
            timestamps.append(timestamp)

        chains = self._chains(received)
        seq = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            partition = batch.column("partition")[0].as_py()
            self._run_batch(chains, batch)
            if not keys:
                continue
            n = len(keys)
            yield pa.RecordBatch.from_arrays(
                [key_column(keys, self.native.string_keys, output), pa.array([partition] * n, pa.int32()),
                 pa.array(range(seq, seq + n), pa.int64()), pa.array(timestamps, pa.int64()),
                 key_column(values, encode is None, topic)],
                names=["key", "partition", "seq", "timestamp", "value"],
            )  # fmt: skip
            seq += n
            keys.clear()
            values.clear()
            timestamps.clear()


class ReduceKeys(_GroupedValues):
    """`mapInArrow` function: Kafka rows in; per key its values reduced, in offset order, as the
    rows (key, partition, part, value bytes): `part` numbers a key's partials of one partition."""

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount) -> None:
        super().__init__(topology, props, native)
        self.schema = f"key {'string' if native.string_keys else 'binary'}, partition int, part int, value binary"

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        fold = _fold(self.topology, self.props, self.native)
        reduce = _no_delete(fold.step)
        round_trip = _repartition_value_serde(self.topology, self.props, self.native)
        if round_trip is not None and same_serde(round_trip, Serdes.String()):
            round_trip = None  # strings come back as they went
        topic, output = self.native.bypassed_topic or "", self.native.output_topic
        serialize_key = self._key_serializer()
        reduced: dict[Any, Any] = {}
        get = reduced.get

        def received(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if key is None or value is None:
                return
            if round_trip is not None:  # the value as the reduce reads it back from the repartition topic
                value = round_trip.deserialize(topic, round_trip.serialize(topic, value))
            if serialize_key is not None:
                key = serialize_key(output, key)
            reduced[key] = reduce(key, get(key), value)

        chains = self._chains(received)
        part, partition = 0, -1
        for batch in batches:
            if batch.num_rows == 0:
                continue
            partition = batch.column("partition")[0].as_py()
            self._run_batch(chains, batch)
            if len(reduced) >= _MAX_PARTIAL_KEYS:
                yield self._partials(reduced, fold.store_serde, partition, part)
                reduced.clear()
                part += 1
        if reduced:
            yield self._partials(reduced, fold.store_serde, partition, part)

    def _partials(self, reduced: dict[Any, Any], value_serde: Serde[Any], partition: int, part: int) -> Any:
        import pyarrow as pa

        topic = self.native.output_topic
        keys = list(reduced)
        values = [value_serde.serialize(topic, v) for v in reduced.values()]
        n = len(keys)
        return pa.RecordBatch.from_arrays(
            [key_column(keys, self.native.string_keys, topic), pa.array([partition] * n, pa.int32()),
             pa.array([part] * n, pa.int32()), pa.array(values, pa.binary())],
            names=["key", "partition", "part", "value"],
        )  # fmt: skip


#: `FoldStage.fold`'s output when nothing is written (a key created and deleted within a micro-batch).
NOTHING = object()


class FoldStage(StatefulProcessor):
    """Per key: its stored value, then the micro-batch's values (`FoldValues`: in Kafka Streams'
    order) or partial reductions (`ReduceKeys`: Kafka partition by partition) through the user's
    function, each new aggregate through the store's serde as Kafka Streams' store does; the last
    one's bytes kept in Spark state and written out (a tombstone when it was deleted)."""

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount) -> None:
        self.topology = topology
        self.props = dict(props)
        self.native = native

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._value = handle.getValueState("value", "value binary")
        self.prepare()

    def prepare(self) -> None:
        """The user's function and serdes, from the shipped topology (once per Python worker)."""
        fold = _fold(self.topology, self.props, self.native)
        native = self.native
        if native.kind == "partial-reduce":
            self._step, self._values = _no_delete(fold.step), self._partials
            self._incoming: Serde[Any] | _Pickled | None = fold.store_serde
        else:
            self._step, self._values = fold.step, self._in_kafka_order
            self._incoming = _transport(self.topology, self.props, native)
        self._store, self._sink = fold.store_serde, fold.sink_serde
        self._same_serde = same_serde(fold.store_serde, fold.sink_serde)
        self._deserialize_key = None if native.string_keys else native.key_serde.deserialize

    @staticmethod
    def _partials(frame: Any) -> list[Any]:
        return frame.sort_values(["partition", "part"], kind="stable")["value"].tolist()  # type: ignore[no-any-return]

    @staticmethod
    def _in_kafka_order(frame: Any) -> list[Any]:
        order = kafka_order_of(frame["partition"].to_numpy(), frame["seq"].to_numpy(), frame["timestamp"].to_numpy())
        return frame["value"].to_numpy()[order].tolist()  # type: ignore[no-any-return]

    def fold(self, grouped: Any, frame: Any, stored: bytes | None) -> tuple[bytes | None, Any]:
        """One key's micro-batch: (the state's new bytes, None to delete it; the output value: bytes,
        None for a tombstone, or `NOTHING`)."""
        topic, store, step = self.native.output_topic, self._store, self._step
        incoming = None if self._incoming is None else self._incoming.deserialize
        user_key = grouped if self._deserialize_key is None else self._deserialize_key(topic, bytes(grouped))
        data = stored
        aggregate = None if data is None else store.deserialize(topic, data)
        for value in self._values(frame):
            if incoming is not None:
                value = incoming(topic, bytes(value))
            data = store.serialize(topic, step(user_key, aggregate, value))
            aggregate = None if data is None else store.deserialize(topic, data)
        if data is None:  # deleted: a tombstone unless it was created and deleted within the micro-batch
            return None, NOTHING if stored is None else None
        return data, data if self._same_serde else self._sink.serialize(topic, aggregate)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        import pandas as pd  # type: ignore[import-untyped]  # no stubs in the venv

        frames = list(rows)
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        stored = self._value.get()
        data, out = self.fold(key[0], frame, None if stored is None else bytes(stored[0]))
        if data is not None:
            self._value.update((data,))
        elif stored is not None:
            self._value.clear()
        if out is not NOTHING:
            yield pd.DataFrame({"key": [key[0]], "value": [out]})

    def close(self) -> None:
        """Nothing to release."""


class FoldGroups:
    """`applyInPandasWithState` function running `FoldStage.fold` per key: the key's state (the
    value's bytes) travels with its rows, no call to the state server per access, which made it the
    fastest of the stateful APIs measured for this stage (bench/LOG.md)."""

    def __init__(self, stage: FoldStage) -> None:
        self.stage = stage
        self._prepared = False

    def __call__(self, key: Any, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd

        if not self._prepared:
            self.stage.prepare()
            self._prepared = True
        parts = list(frames)
        frame = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
        stored = bytes(state.get[0]) if state.exists else None
        data, out = self.stage.fold(key[0], frame, stored)
        if data is not None:
            state.update((data,))
        elif stored is not None:
            state.remove()
        if out is not NOTHING:
            yield pd.DataFrame({"key": [key[0]], "value": [out]})
