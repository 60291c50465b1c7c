"""A stateless chain into `reduce(operator.add | max | min)` over Long values, on Spark's own aggregation.

`stream(...)` → fused stateless operators → `group_by`/`group_by_key` → `reduce(r)` with `r` one of
the built-ins `operator.add`, `max`, `min` (the DSL names it: `KStreamReduce.reducer`) or a function
recognised as one (`lambda a, b: a + b`: `built_in_equivalent`), the store's and the sink's value
serde Long, caching on → `to_stream()` → `to(topic)` becomes one query:

    Kafka source → mapInArrow(CombineKeys: the chain per record; each key's values combined per
                   Spark partition in Python, one (key, partial) row per key)
                 → groupBy(key).agg(sum | max | min) (Spark's streaming aggregation: key, long)
                 → value = unhex(lpad(hex(total), 16, "0")) (the Long serde's 8 bytes, by Spark)
                 → Kafka sink, update mode (one record per changed key and micro-batch)

Sum, max and min of 64-bit integers are associative and commutative, so combining partials in any
grouping gives Kafka Streams' record-by-record table; the reducer never returns None (no
deletes). A total beyond 64 bits fails the query (Spark's ANSI arithmetic, or Arrow's int64 for a
partial), as Kafka Streams' Long serde fails to store it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from streams_core.kstream.internals.functions import built_in_equivalent
from streams_core.kstream.internals.kstream_aggregate import KStreamReduce
from streams_core.processor.internals.processor_node import SinkNode
from streams_core.serde import Serdes
from streams_core.spark.native_count import CountKeys, NativeCount, key_column, same_serde

__all__ = ["SPARK_COMBINES", "CombineKeys", "reduce_kind", "spark_combine_of"]

#: The reducers Spark's own aggregation computes, by the Spark aggregate function that does.
SPARK_COMBINES: dict[str, Callable[[Any, Any], Any]] = {"sum": operator.add, "max": max, "min": min}

#: Partial results held per Spark partition before they go to Spark.
_MAX_PARTIAL_KEYS = 200_000


def spark_combine_of(reducer: object) -> str | None:
    """The Spark aggregate function computing `reducer` over integers ("sum", "max", "min"): the
    built-in itself, or a function recognised as equal to it (`built_in_equivalent`); else None."""
    return next((name for name, fn in SPARK_COMBINES.items() if reducer is fn), None) or built_in_equivalent(reducer)


def reduce_kind(reduce: KStreamReduce[Any, Any], store_serde: Any, sink: SinkNode,
                associative_reducers: bool) -> tuple[str, str]:  # fmt: skip
    """(`NativeCount.kind`, Spark aggregate function) of a `reduce()`: Spark's own aggregation for a
    built-in reducer over Long values, else partial reductions (opted in) or the ordered fold."""
    combine = spark_combine_of(reduce.reducer)
    long = Serdes.Long()
    if combine is not None and same_serde(store_serde, long) and same_serde(sink.value_serde, long):
        return "spark-reduce", combine
    return ("partial-reduce" if associative_reducers else "ordered-fold"), ""


class CombineKeys(CountKeys):
    """`mapInArrow` function: Kafka rows in; per key the combination of its values in this Spark
    partition out, as rows (key, v bigint)."""

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount) -> None:
        super().__init__(topology, props, native)
        self.schema = f"key {'string' if native.string_keys else 'binary'}, v bigint"

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        combine = SPARK_COMBINES[self.native.combine]
        output = self.native.output_topic
        serialize_key = None if self.native.string_keys else self.native.key_serde.serialize
        partials: dict[Any, Any] = {}
        get = partials.get
        missing = object()

        def received(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if key is None or value is None:
                return
            if serialize_key is not None:
                key = serialize_key(output, key)
            old = get(key, missing)
            partials[key] = value if old is missing else combine(old, value)

        chains = self._chains(received)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            self._run_batch(chains, batch)
            if len(partials) >= _MAX_PARTIAL_KEYS:
                yield self._partials(partials)
                partials.clear()
        if partials:
            yield self._partials(partials)

    def _partials(self, partials: dict[Any, Any]) -> Any:
        import pyarrow as pa

        column = key_column(list(partials), self.native.string_keys, self.native.output_topic)
        return pa.RecordBatch.from_arrays([column, pa.array(list(partials.values()), pa.int64())], names=["key", "v"])
