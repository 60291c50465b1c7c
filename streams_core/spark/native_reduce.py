"""A stateless chain into `reduce()`, with a map-side partial reduction (opted in as associative).

`SparkRunner(..., associative_reducers=True)`: `stream(...)` → fused stateless operators →
`group_by`/`group_by_key` → `reduce(reducer)` (caching on) → `to_stream()` → `to(topic)` becomes
one query:

    Kafka source → mapInArrow(ReduceKeys: the chain per record; each key's values reduced per
                   Spark partition in offset order, the partial result as the sink's value bytes)
                 → groupBy(key).transformWithStateInPandas(ReduceStage: the key's stored value,
                   then its partials in Kafka partition order, through the reducer; state: the
                   value's bytes) → Kafka sink, update mode

Reducing a partition's values first and the partials after equals Kafka Streams' record-by-record
reduction, in the order where each writer's records of the micro-batch arrive together, only
when the reducer is associative: hence the opt-in (docs/spark.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from streams_core.errors import StreamsError
from streams_core.kstream.internals.kstream_aggregate import KStreamReduce
from streams_core.processor.internals.processor_node import SinkNode
from streams_core.serde import Serde, Serdes
from streams_core.spark.native_count import CountKeys, NativeCount, built_shipped, key_column, same_serde

__all__ = ["ReduceKeys", "ReduceStage"]

log = logging.getLogger(__name__)

#: Partial results held per Spark partition before they go to Spark.
_MAX_PARTIAL_KEYS = 200_000


def _reducer_and_serde(topology: bytes, props: Mapping[str, Any], native: NativeCount) -> tuple[Any, Serde[Any]]:
    """The user's reducer and the output sink's value serde, from the shipped topology."""
    built = built_shipped(topology, props, native.count_subtopology)
    (reduce,) = [n for n in built.processors if n.name == native.native[0]]
    (sink,) = built.sinks
    if not isinstance(reduce.processor, KStreamReduce):
        raise StreamsError(f"{reduce.name!r} is not a reduce")
    return reduce.processor._reducer, sink.value_serde


def _reduced(reducer: Any, aggregate: Any, value: Any) -> Any:
    new = reducer(aggregate, value)
    if new is None:
        raise StreamsError("the reducer returned None (a delete): partial reductions cannot follow it; "
                           "run without associative_reducers")  # fmt: skip
    return new


class ReduceKeys(CountKeys):
    """`mapInArrow` function: Kafka rows in; per key its values reduced, in offset order, as the
    rows (key, partition, part, value bytes): `part` numbers a key's partials of one partition."""

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount) -> None:
        super().__init__(topology, props, native)
        self.schema = f"key {'string' if native.string_keys else 'binary'}, partition int, part int, value binary"

    def columns(self, source_topics: tuple[str, ...]) -> list[str]:  # type: ignore[override]
        return ["partition", *CountKeys.columns(source_topics)]

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        reducer, value_serde = _reducer_and_serde(self.topology, self.props, self.native)
        round_trip = self._repartition_value_serde()
        topic, output = self.native.bypassed_topic or "", self.native.output_topic
        serialize_key = None if self.native.string_keys else self.native.key_serde.serialize
        reduced: dict[Any, Any] = {}
        get = reduced.get

        def received(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if key is None or value is None:
                return
            if round_trip is not None:  # the value as the reduce reads it back from the repartition topic
                value = round_trip.deserialize(topic, round_trip.serialize(topic, value))
            if serialize_key is not None:  # other keys are grouped by their bytes
                key = serialize_key(output, key)
            old = get(key)
            reduced[key] = value if old is None else _reduced(reducer, old, value)

        chains = self._chains(received)
        part, partition = 0, -1
        for batch in batches:
            if batch.num_rows == 0:
                continue
            partition = batch.column("partition")[0].as_py()
            self._run_batch(chains, batch)
            if len(reduced) >= _MAX_PARTIAL_KEYS:
                yield self._partials(reduced, value_serde, partition, part)
                reduced.clear()
                part += 1
        if reduced:
            yield self._partials(reduced, value_serde, partition, part)

    def _repartition_value_serde(self) -> Serde[Any] | None:
        """The replaced repartition topic's value serde (None without one, or for strings: no change)."""
        if self.native.bypassed_topic is None:
            return None
        built = built_shipped(self.topology, self.props, self.native.chain_subtopology)
        (sink,) = [s for s in built.sinks if s.name == self.native.chain_end]
        assert isinstance(sink, SinkNode)
        return None if same_serde(sink.value_serde, Serdes.String()) else sink.value_serde

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


class ReduceStage(StatefulProcessor):
    """Per key: its stored value, then the micro-batch's partials (Kafka partition by partition, each
    in order) through the reducer; the new value's bytes kept in Spark state and written out."""

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount) -> None:
        self.topology = topology
        self.props = dict(props)
        self.native = native

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._value = handle.getValueState("value", "value binary")
        self._reducer, self._serde = _reducer_and_serde(self.topology, self.props, self.native)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        import pandas as pd  # type: ignore[import-untyped]  # no stubs in the venv

        frame = pd.concat(list(rows), ignore_index=True).sort_values(["partition", "part"], kind="stable")
        topic, serde, reducer = self.native.output_topic, self._serde, self._reducer
        stored = self._value.get() if self._value.exists() else None
        aggregate = None if stored is None else serde.deserialize(topic, bytes(stored[0]))
        for data in frame["value"]:
            value = serde.deserialize(topic, bytes(data))
            aggregate = value if aggregate is None else _reduced(reducer, aggregate, value)
        out = serde.serialize(topic, aggregate)
        self._value.update((out,))
        yield pd.DataFrame({"key": [key[0]], "value": [out]})

    def close(self) -> None:
        """Nothing to release."""
