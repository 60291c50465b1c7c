"""A stateless chain into `count()`, compiled to Spark's own operators (the word count's shape).

`stream(...)` → fused stateless operators (`stateless_chain`) → `group_by`/`group_by_key` →
`count()` (caching on) → `to_stream()` → `to(topic)` becomes one query:

    Kafka source → mapInArrow(CountKeys: the chain in Python per record of each Arrow batch, the
                   new keys counted per Spark partition in Python: a map-side partial count)
                 → groupBy(key).sum(n) (Spark's streaming aggregation, its state: key, count)
                 → value = the Long serde's 8 big-endian bytes built by Spark expressions
                 → Kafka sink, update mode

Spark's shuffle replaces the repartition topic, which is then neither written nor read. Update
mode emits one record per key and micro-batch: Kafka Streams' record cache coalescing a key's
updates per commit, the micro-batch being the commit. Anything else (caching off included)
keeps the Python stages of spark_stages.py.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from streams_core.config import StreamsConfig
from streams_core.errors import DeserializationError, StreamsError
from streams_core.kstream.internals.dsl_serde import InferredSerde
from streams_core.kstream.internals.kstream_aggregate import KStreamAggregate, KStreamReduce
from streams_core.kstream.internals.kstream_window_aggregate import KStreamWindowAggregate
from streams_core.kstream.internals.ktable_processors import KTableToStream
from streams_core.processor.consumer_record import ConsumerRecord
from streams_core.processor.internals.processor_node import ProcessorNode, SinkNode, SourceNode
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.processor.internals.record_deserializer import RecordDeserializer, resolve_deserialization_handler
from streams_core.processor.internals.stateless_chain import Emit, compose, fused_nodes
from streams_core.processor.timestamp_extractor import FailOnInvalidTimestamp, LogAndSkipOnInvalidTimestamp
from streams_core.serde import Serdes
from streams_core.spark.subtopology_executor import InputRow
from streams_core.spark.windowed_tail import WindowedTail, windowed_tail

if TYPE_CHECKING:
    from streams_core.spark.native_join import StreamTableJoin

__all__ = ["AGGREGATIONS", "NO_AGGREGATION", "CountKeys", "NativeCount", "WindowCount", "built_shipped", "find_native_count", "key_column", "window_count_tail"]

log = logging.getLogger(__name__)

_OWN_TIMESTAMP = (FailOnInvalidTimestamp, LogAndSkipOnInvalidTimestamp)

#: The stream aggregations the native path compiles (a count, windowed count, reduce or aggregate).
AGGREGATIONS = (KStreamAggregate, KStreamWindowAggregate, KStreamReduce)
#: `find_native_count`'s answer for a sub-topology without one.
NO_AGGREGATION = "no stream aggregation"

#: A partial count goes to Spark once it holds this many keys (else once per Spark partition).
_MAX_PARTIAL_KEYS = 200_000


@dataclass(frozen=True, kw_only=True)
class WindowCount(WindowedTail):
    """A windowed count's windows, and what follows it (`WindowedTail`)."""

    size: int
    advance: int
    grace: int


@dataclass(frozen=True)
class NativeCount:
    """Where the chain runs (sub-topology, node it ends at) and what Spark's count writes."""

    #: The sub-topology whose sources the chain starts from (the writer of the repartition topic).
    chain_subtopology: int
    #: The node the chain ends at: the repartition sink, or the count itself without repartition.
    chain_end: str
    #: The counting sub-topology (the same as `chain_subtopology` without repartition).
    count_subtopology: int
    output_topic: str
    #: The repartition topic Spark's shuffle replaces (None without repartition).
    bypassed_topic: str | None
    #: The output key serde is String: the chain hands Spark `str`s, Spark casts them to UTF-8 bytes.
    string_keys: bool
    fused: tuple[str, ...]
    native: tuple[str, ...]
    #: The repartition sink and source Spark's shuffle replaces.
    shuffled: tuple[str, ...] = ()
    #: The grouping key's serde: the output sink's for a count, the repartition (or source) topic's
    #: for a windowed count (keys other than String are serialized in Python).
    key_serde: Any = field(default=None, compare=False, repr=False)
    #: For a windowed count: its windows, tail and tasks (None for a count).
    window: WindowCount | None = None
    #: The native stage's kind, its key in `native_stages.NATIVE_STAGES`: "count", "window-count",
    #: "spark-reduce" (a built-in reducer on Spark's aggregation, native_combine.py), "partial-reduce"
    #: (a `reduce()` opted in as associative: partial reductions per Spark partition) or
    #: "ordered-fold" (a `reduce()`/`aggregate()` per key in Kafka Streams' order, native_reduce.py);
    #: "join-count", "join-spark-reduce": the same after a stream-table join (native_join.py).
    kind: str = "count"
    #: With kind "(join-)spark-reduce": the Spark aggregate function ("sum", "max", "min").
    combine: str = ""
    #: With kind "ordered-fold": the values reaching it are strings (the replaced repartition topic's
    #: value serde is String), handed to Spark as an Arrow string column.
    string_values: bool = False
    #: With kind "join-count" or "join-spark-reduce": the stream-table join before it (native_join.py).
    join: StreamTableJoin | None = None


def resolved(serde: Any) -> Any:
    """The serde an inferred one stands for (the DSL's guess or the configured default)."""
    while isinstance(serde, InferredSerde):
        serde = serde.target
    return serde


def same_serde(serde: Any, other: Any) -> bool:
    """The same serde, or the same built-in serde (a shipped copy of `Serdes.String()` is not the singleton)."""
    a, b = resolved(serde), resolved(other)
    if a is b:
        return True
    builtin = (type(Serdes.String()), type(Serdes.Long()), type(Serdes.Bytes()), type(Serdes.Json()))
    return type(a) is type(b) and type(a) in builtin and repr(a) == repr(b)


def _is_count(processor: object) -> bool:
    return isinstance(processor, KStreamAggregate) and processor.operation == "count"


def _fold_tail(agg: ProcessorNode) -> SinkNode | str:
    """The sink of `count()`/`aggregate()`/`reduce()` -> `to_stream()` -> `to(topic)` below `agg`, or
    why `agg` is not followed by that."""
    if len(agg.children) != 1:
        return "its table feeds more than to_stream().to(topic)"
    (to_stream,) = agg.children
    if not (isinstance(to_stream.processor, KTableToStream) and to_stream.processor.key_mapper is None
            and len(to_stream.children) == 1):  # fmt: skip
        return "its table feeds more than to_stream().to(topic)"
    (sink,) = to_stream.children
    if not isinstance(sink, SinkNode):
        return f"to_stream() is followed by {sink.name}, not directly by to(topic)"
    if sink.topic is None or sink.partitioner is not None:
        return "its sink chooses the topic per record or has a custom partitioner"
    return sink


def _chains_into(built: ProcessorTopology, end: ProcessorNode) -> tuple[str, ...] | str:
    """The fused node names when every source of `built` reaches only `end` through the chain, or why not."""
    fused: list[str] = []
    for source in built.sources:
        if source.pattern is not None:
            return f"source {source.name} reads a pattern"
        if not isinstance(getattr(source.extract_timestamp, "__self__", None), _OWN_TIMESTAMP):
            return f"source {source.name} has a custom timestamp extractor"
        nodes, terminals = fused_nodes(source)
        others = [t.name for t in terminals if t.name != end.name]
        if others:
            return (f"besides {end.name}, the chain from {source.name} also feeds {', '.join(others)} (another output or a "
                    "stateful operator in the same sub-topology)")
        fused.extend(n.name for n in nodes if n.name not in fused)
    return tuple(fused)


def find_native_count(
    sid: int, built: ProcessorTopology, builder: Any, config: StreamsConfig, readback: frozenset[str],
    associative_reducers: bool = False,
) -> NativeCount | str:  # fmt: skip
    """`NativeCount` when sub-topology `sid` counts, reduces or aggregates a stateless chain as Spark
    can natively (a reduce partially with `associative_reducers`), else why not (for `plan()`).

    `readback` are the topics the topology both writes and reads; the outputs must not be one.
    """
    aggregates = [n for n in built.processors if isinstance(n.processor, AGGREGATIONS)]
    if len(aggregates) != 1:
        return NO_AGGREGATION if not aggregates else "several aggregations in one sub-topology"
    (agg,) = aggregates
    (store,) = agg.store_names
    if config["default.deserialization.exception.handler"] == "dead_letter":
        return "the dead_letter deserialization handler writes to its topic, which the native query has no output for"
    if not builder.store_builder(store).caching_enabled:
        return "caching is off (every update is emitted, which Spark's update mode cannot)"
    window = window_count_tail(agg, readback) if isinstance(agg.processor, KStreamWindowAggregate) else None
    kind, combine = "count", ""
    if isinstance(window, str):
        return window
    if window is not None:
        kind = "window-count"
        sinks, native, output_key_serde = window.sinks, (agg.name, window.to_stream, *window.tail), None
    else:
        sink = _fold_tail(agg)
        if isinstance(sink, str):
            return sink
        if sink.topic in readback:
            return f"its output topic {sink.topic} is read back by the topology"
        if isinstance(agg.processor, KStreamReduce):
            store_serde = built.state_stores[store].timestamped.value_serde.inner
            from streams_core.spark.native_combine import reduce_kind  # it builds on this module

            kind, combine = reduce_kind(agg.processor, store_serde, sink, associative_reducers)
        elif not (_is_count(agg.processor) and same_serde(sink.value_serde, Serdes.Long())):
            kind = "ordered-fold"  # an aggregate, or a count written with another serde than Spark's count's
        sinks, native, output_key_serde = (sink.name,), (agg.name, *(c.name for c in agg.children)), sink.key_serde
    others = sorted({str(s.topic or f"topics chosen by {s.name}") for s in built.sinks if s.name not in sinks})
    if others:
        return f"the sub-topology also writes {', '.join(others)}: an output beside the aggregation's"
    chain = _chain_into(sid, built, builder, config, readback, agg, set(native), output_key_serde,
                        kind in ("count", "spark-reduce"))  # fmt: skip
    if isinstance(chain, str):
        return chain
    chain_sid, chain_built, end, bypassed, fused, shuffled, key_serde, join = chain
    if kind != "count" and join is None and len([t for s in chain_built.sources for t in s.topics]) != 1:
        return "it reads several topics (the order across them is the task's)"  # offset order of one topic (docs/spark.md)
    kind = f"join-{kind}" if join is not None else kind
    string_values = False
    if window is not None:
        window = replace(window, partitions_of=bypassed)
        output = window.topics[0]
    else:
        output = str(built.sinks[0].topic)
        key_serde = built.sinks[0].key_serde
        if kind == "ordered-fold" and bypassed is not None:
            (repartition,) = [s for s in chain_built.sinks if s.name == end]
            string_values = same_serde(repartition.value_serde, Serdes.String())
    return NativeCount(chain_sid, end, sid, output, bypassed, same_serde(key_serde, Serdes.String()), fused, native,
                       shuffled, key_serde, window, kind, combine, string_values, join)  # fmt: skip


def window_count_tail(agg: ProcessorNode, readback: frozenset[str]) -> WindowCount | str:
    """What follows a windowed `count()` (emitting per update) when it is `to_stream()`, fused stateless
    operators and sinks to fixed topics without a custom partitioner (`windowed_tail`); else why not."""
    processor = agg.processor
    if not (isinstance(processor, KStreamWindowAggregate) and processor.operation == "count"):
        return "a windowed aggregate or reduce (only the windowed count() is native)"
    if processor._emit_strategy.emits_on_close:
        return "it emits on window close"
    tail = windowed_tail(agg, readback)
    if isinstance(tail, str):
        return tail
    return WindowCount(size=processor._size, advance=processor._advance, grace=processor._grace, **tail.fields())


_Chain = tuple[int, ProcessorTopology, str, "str | None", tuple[str, ...], tuple[str, ...], Any, "StreamTableJoin | None"]


def _chain_into(
    sid: int, built: ProcessorTopology, builder: Any, config: StreamsConfig, readback: frozenset[str],
    agg: ProcessorNode, native: set[str], output_key_serde: Any, join_ok: bool = False,
) -> _Chain | str:  # fmt: skip
    """The stateless chain feeding `agg`, in its own sub-topology or through a repartition topic.

    (chain sub-topology id, its built topology, node the chain ends at, repartition topic Spark's
    shuffle replaces or None, fused node names, replaced sink and source, the grouping key's
    serde, the stream-table join before it if `join_ok`); or why not: anything else hangs off the chain.
    With `output_key_serde`, the repartition topic's key serde must be it (the output keys are the grouping bytes).
    """
    internal_source = any(set(s.topics) & builder.internal_topics for s in built.sources)
    fused = "" if internal_source else _chains_into(built, agg)
    everything = {n.name for n in built.processors}
    if isinstance(fused, tuple):
        if any(set(s.topics) & readback for s in built.sources):
            return "it reads a topic the topology writes (through)"
        if everything != {*fused, *native}:
            return f"the sub-topology also runs {', '.join(sorted(everything - {*fused, *native}))}"
        return sid, built, agg.name, None, fused, (), built.sources[0].key_serde, None
    if fused:
        return fused
    (source,) = built.sources if len(built.sources) == 1 else (None,)
    if source is None or source.children != (agg,) or len(source.topics) != 1 or everything != native:
        return "the sub-topology reading the repartition topic runs more than the aggregation"
    (topic,) = source.topics
    if topic not in builder.internal_topics:
        return f"it reads {topic}, a through() topic (the user's: written as the topology says)"
    writers = [w for w, info in builder.topic_groups().items() if topic in info.sink_topics]
    readers = [r for r, info in builder.topic_groups().items() if topic in info.source_topics]
    if len(writers) != 1 or readers != [sid] or writers[0] == sid:
        return f"repartition topic {topic} has several writers or readers"
    writer = builder.build_subtopology(writers[0], config)
    joined: Any = None
    if writer.state_stores:
        from streams_core.spark.native_join import stream_table_join  # it builds on this module
        joined = stream_table_join(writer, topic) if join_ok else None
        if not isinstance(joined, tuple):
            return joined or (f"the sub-topology writing its repartition topic {topic} has state stores "
                              f"({', '.join(sorted(writer.state_stores))}): a join or aggregation before it")
    repartition_sinks = [s for s in writer.sinks if s.topic == topic]
    if len(repartition_sinks) != 1 or len(writer.sinks) != 1:
        others = sorted(str(s.topic) for s in writer.sinks if s.topic != topic)
        return f"the sub-topology writing its repartition topic also writes {', '.join(others)} (another output)"
    (repartition_sink,) = repartition_sinks
    if repartition_sink.partitioner is not None:
        return f"repartition topic {topic} has a custom partitioner"
    if output_key_serde is not None and not same_serde(repartition_sink.key_serde, output_key_serde):
        return "the repartition topic's key serde differs from the output's"
    if any(set(s.topics) & readback for s in writer.sources):
        return "the chain reads a topic the topology writes (through)"
    chain = joined[0] if joined else _chains_into(writer, repartition_sink)
    if isinstance(chain, str):
        return chain
    return (writers[0], writer, repartition_sink.name, topic, chain, (repartition_sink.name, source.name),
            repartition_sink.key_serde, joined[1] if joined else None)  # fmt: skip


class CountKeys:
    """`mapInArrow` function: Kafka rows (timestamp, key, value; topic when several) in, partial
    counts (key, n) out.

    Built on the executor from the shipped topology: each source's chain composed once, its end
    appending the key of every record the count would count (key and value not None).
    """

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount) -> None:
        self.schema = f"key {'string' if native.string_keys else 'binary'}, n bigint"
        self.topology = topology
        self.props = dict(props)
        self.native = native
        #: A Spark accumulator: records the deserialization handler skipped (set by the runner).
        self.skipped: Any = None
        # `default.deserialization.exception.handler` (dead_letter never: find_native_count refuses it).
        self._skips = StreamsConfig(self.props)["default.deserialization.exception.handler"] not in (None, "log_and_fail")
        self._deserializer: RecordDeserializer | None = None

    def columns(self, source_topics: tuple[str, ...]) -> list[str]:
        """The source columns it reads (the topic only to pick the chain of a query reading several;
        partition and offset to locate a record that fails to deserialize, when the handler skips)."""
        located = ["partition", "offset"] if self._skips else []
        return ["timestamp", "key", "value", *(["topic"] if len(source_topics) > 1 else []), *located]

    def _skip_or_raise(self, error: DeserializationError, row: InputRow) -> None:
        """The deserialization handler's decision on `row` (raises the located error to fail)."""
        if self._deserializer is None:
            handler = resolve_deserialization_handler(StreamsConfig(self.props)["default.deserialization.exception.handler"])
            self._deserializer = RecordDeserializer(handler)
        self._deserializer.skip_or_raise(error, row)
        if self.skipped is not None:
            self.skipped.add(1)

    def _chains(self, counted: Emit) -> dict[str, tuple[SourceNode, Emit]]:
        """Each source topic's chain, ending in `counted` (the records the count receives)."""
        built = built_shipped(self.topology, self.props, self.native.chain_subtopology)
        end = self.native.chain_end

        def terminal(node: ProcessorNode) -> Emit:
            if node.name != end:
                raise StreamsError(f"the native count's chain reached {node.name!r}, not {end!r}")
            return counted

        return {topic: (source, compose(source, terminal)) for source in built.sources for topic in source.topics}

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        """Count each batch's keys in Python (a map-side partial count, C-speed `Counter`); Spark sums them."""
        keys: list[Any] = []
        append = keys.append

        def counted(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if key is not None and value is not None:
                append(key)

        chains = self._chains(counted)
        counts: Counter[Any] = Counter()
        for batch in batches:
            if batch.num_rows == 0:
                continue
            self._run_batch(chains, batch)
            counts.update(keys if self.native.string_keys else self._serialized(keys))
            keys.clear()
            if len(counts) >= _MAX_PARTIAL_KEYS:
                yield self._partial(counts)
                counts.clear()
        if counts:
            yield self._partial(counts)

    def _run_batch(self, chains: Mapping[str, tuple[SourceNode, Emit]], batch: Any) -> None:
        """Every record of `batch` through its topic's chain."""
        if "topic" not in batch.schema.names:  # the query reads one topic
            topic, (source, run) = next(iter(chains.items()))
            self._run(source, topic, run, batch)
        else:
            self._run_topics(chains, batch)

    def _run(self, source: SourceNode, topic: str, run: Emit, batch: Any) -> None:
        try:
            ks = _deserialized(batch.column("key"), source.key_serde, topic)
            vs = _deserialized(batch.column("value"), source.value_serde, topic)
        except DeserializationError:
            if not self._skips:
                raise
            self._run_topics({topic: (source, run)}, batch)  # record by record, the handler deciding
            return
        timestamps = batch.column("timestamp").to_pylist()
        if min(timestamps) < 0:
            self._with_extractor(source, topic, ks, vs, timestamps, batch, run)
            return
        for key, value, timestamp in zip(ks, vs, timestamps, strict=True):
            run(key, value, timestamp, ())

    def _run_topics(self, chains: Mapping[str, tuple[SourceNode, Emit]], batch: Any) -> None:
        columns = batch.to_pydict()
        n = batch.num_rows
        topics = columns["topic"] if "topic" in columns else [next(iter(chains))] * n
        partitions, offsets = columns.get("partition", [-1] * n), columns.get("offset", [-1] * n)
        for topic, key, value, timestamp, partition, offset in zip(topics, columns["key"], columns["value"],
                                                                   columns["timestamp"], partitions, offsets, strict=True):  # fmt: skip
            source, run = chains[topic]
            try:
                k, v = source.key_serde.deserialize(topic, key), source.value_serde.deserialize(topic, value)
            except DeserializationError as exc:
                self._skip_or_raise(exc, InputRow(topic, partition, offset, timestamp, key, value, ()))
                continue
            if timestamp < 0:
                timestamp = _extract(source, topic, k, v, timestamp, -1)
                if timestamp < 0:
                    continue
            run(k, v, timestamp, ())

    def _serialized(self, keys: list[Any]) -> list[bytes | None]:
        serialize, topic = self.native.key_serde.serialize, self.native.output_topic
        return [serialize(topic, k) for k in keys]

    def _partial(self, counts: Counter[Any]) -> Any:
        import pyarrow as pa

        column = key_column(list(counts), self.native.string_keys, self.native.output_topic)
        return pa.RecordBatch.from_arrays([column, pa.array(list(counts.values()), pa.int64())], names=["key", "n"])

    def _with_extractor(self, source: SourceNode, topic: str, ks: list[Any], vs: list[Any], timestamps: list[int],
                        batch: Any, run: Emit) -> None:  # fmt: skip
        """A batch with negative timestamps: the source's extractor decides (fail, or drop the record)."""
        offsets = batch.column("offset").to_pylist() if "offset" in batch.schema.names else [-1] * len(ks)
        for key, value, timestamp, offset in zip(ks, vs, timestamps, offsets, strict=True):
            if timestamp < 0:
                timestamp = _extract(source, topic, key, value, timestamp, offset)
                if timestamp < 0:
                    log.warning("dropping a record of %s at offset %s: negative timestamp %d", topic, offset, timestamp)
                    continue
            run(key, value, timestamp, ())


def built_shipped(topology: bytes, props: Mapping[str, Any], subtopology: int) -> ProcessorTopology:
    """Sub-topology `subtopology` of a shipped topology, built on this executor."""
    from streams_core.spark.subtopology_executor import load_topology

    builder = load_topology(topology).internal_topology_builder
    config = StreamsConfig(props)
    builder.set_application_id(config["application.id"])
    return builder.build_subtopology(subtopology, config)


def key_column(keys: list[Any], string_keys: bool, topic: str) -> Any:
    """The grouping keys as an Arrow column: strings (what the String serde would refuse fails as
    it would fail), else the serde's bytes."""
    import pyarrow as pa

    if not string_keys:
        return pa.array(keys, pa.binary())
    try:
        return pa.array(keys, pa.string())
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        Serdes.String().serialize(topic, next(k for k in keys if not isinstance(k, str)))
        raise


def _extract(source: SourceNode, topic: str, key: Any, value: Any, timestamp: int, offset: int) -> int:
    record = ConsumerRecord(topic, -1, offset, timestamp, key, value, ())
    extracted: int = source.extract_timestamp(record, -1)
    return extracted


def _deserialized(column: Any, serde: Any, topic: str) -> list[Any]:
    """A column's Python values through `serde`; the String serde as one Arrow cast (UTF-8 checked)."""
    import pyarrow as pa

    if same_serde(serde, Serdes.String()):
        try:
            values: list[Any] = column.cast(pa.string()).to_pylist()
            return values
        except pa.ArrowInvalid:
            pass  # invalid UTF-8: the serde raises its located error below
    deserialize = serde.deserialize
    return [deserialize(topic, data) for data in column.to_pylist()]
