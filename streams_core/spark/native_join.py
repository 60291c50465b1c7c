"""A stream-table join into `group_by(...).count()`, compiled to one query (`NativeCount.kind` "join-count").

`stream(s)` → fused stateless operators → `join(table)` / `left_join(table)` (the table straight
from its topic, `builder.table(topic)`) → fused operators (the `group_by` selector) → repartition
→ `count()` (caching on) → `to_stream()` → `to(topic, Long)` becomes:

    Kafka source (the stream and table topics)
      → mapInArrow(PackRows: each Arrow batch as one row per task, its rows an IPC blob; packed_rows.py)
      → groupBy(partition).transformWithStateInPandas(JoinCountTask: per Kafka Streams task, the
        micro-batch's records in PartitionGroup's order over columns, holding those that wait for a
        partition with unread data (`partition_group.take_ready`'s rule, as the task stage); each
        topic's keys and values deserialized at once; a table record upserts the table's latest
        value per key, a stream record is joined with the table as of it and runs the fused
        operators after the join; the new keys counted per task and micro-batch.
        State: the table as its changelog (key bytes, the store's value bytes or None) in a list
        state, appended per micro-batch in one call and compacted when twice the table's size;
        held records (an IPC blob) and read offsets in a value state)
      → groupBy(key).sum(n) → the Long serde's 8 bytes by Spark expressions → Kafka sink (update)

Spark's shuffle replaces the repartition topic and the count is Spark's streaming aggregation
(native_stages.CountStage's), so the output is one record per changed key and micro-batch. A
`reduce(operator.add | max | min)` over Long values after the join runs the same way (kind
"join-spark-reduce": the task's values combined per key, then Spark's sum, max or min).
"""

from __future__ import annotations

import itertools
import logging
import pickle
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from streams_core.errors import DeserializationError
from streams_core.kstream.internals.kstream_ktable_join import KStreamKTableJoin
from streams_core.kstream.internals.ktable_processors import KTableSource
from streams_core.processor.consumer_record import ConsumerRecord
from streams_core.processor.internals.processor_node import ProcessorNode, SinkNode, SourceNode
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.processor.internals.stateless_chain import Emit, compose, fused_nodes
from streams_core.processor.timestamp_extractor import FailOnInvalidTimestamp, LogAndSkipOnInvalidTimestamp
from streams_core.spark.native_combine import SPARK_COMBINES
from streams_core.spark.native_count import CountKeys, NativeCount, _deserialized, built_shipped
from streams_core.spark.spark_rows import InputRow
from streams_core.state.internals.store_names import store_changelog_topic

__all__ = ["JoinCountTask", "StreamTableJoin", "stream_table_join"]

log = logging.getLogger(__name__)

#: Live tables a Python worker keeps between micro-batches, least recently used first.
_MAX_LIVE = 32
#: The table's changelog in Spark state is rewritten with the live entries only once it holds more
#: than twice as many entries, plus this many.
_COMPACT_SLACK = 1_000
_MISSING = object()


@dataclass(frozen=True)
class StreamTableJoin:
    """The join a native join-count runs: its node, the table's source node and store, the table's topics."""

    join: str
    table: str
    store: str
    table_topics: tuple[str, ...]


def stream_table_join(writer: ProcessorTopology, topic: str) -> tuple[tuple[str, ...], StreamTableJoin] | str:
    """(fused node names, the join) when `writer` is sources → fused chain → stream-table join of a
    table read from its own topic → fused chain → the sink of repartition topic `topic`; else why not."""
    joins = [n for n in writer.processors if isinstance(n.processor, KStreamKTableJoin)]
    tables = [n for n in writer.processors if isinstance(n.processor, KTableSource)]
    if len(joins) != 1 or len(tables) != 1 or len(writer.state_stores) != 1:
        return f"the sub-topology writing its repartition topic {topic} has state stores other than one stream-table join's"
    (join,), (table,) = joins, tables
    processor = join.processor
    if processor.key_selector is not None or processor.grace_ms is not None:
        return "its stream-table join has a grace period or joins a global table"
    if join.store_names != table.store_names or table.children:
        return f"the join's table {table.name} is not read straight from its topic, or feeds more than the join"
    fused: list[str] = []
    table_topics: list[str] = []
    for source in writer.sources:
        if source.pattern is not None:
            return f"source {source.name} reads a pattern"
        if not isinstance(getattr(source.extract_timestamp, "__self__", None), (FailOnInvalidTimestamp, LogAndSkipOnInvalidTimestamp)):
            return f"source {source.name} has a custom timestamp extractor"
        if source.children == (table,):
            table_topics.extend(source.topics)
            continue
        nodes, terminals = fused_nodes(source)
        if [t.name for t in terminals] != [join.name]:
            return f"the chain from {source.name} feeds more than the join"
        fused.extend(n.name for n in nodes if n.name not in fused)
    for child in join.children:
        nodes, terminals = fused_nodes(child)
        if not all(isinstance(t, SinkNode) and t.topic == topic for t in terminals):
            return f"after the join, the chain feeds more than repartition topic {topic}"
        fused.extend(n.name for n in nodes if n.name not in fused)
    if {n.name for n in writer.processors} != {*fused, join.name, table.name}:
        return "the sub-topology writing the repartition topic runs more than the join and its chains"
    (store,) = writer.state_stores
    return tuple(fused), StreamTableJoin(join.name, table.name, store, tuple(table_topics))


class _Join:
    """The shipped sub-topology as plain functions: per topic, a record's way to the table or through
    the join to the count, over the task's table (store key bytes → the value the join reads)."""

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount, counted: Emit) -> None:
        join = native.join
        assert join is not None
        built = built_shipped(topology, props, native.chain_subtopology)
        nodes: dict[str, ProcessorNode] = {n.name: n for n in built.nodes}
        store = built.state_stores[join.store]
        changelog = store_changelog_topic(str(props["application.id"]), join.store)
        key_serialize, value_serde = store.key_serde.serialize, store.value_serde
        processor: KStreamKTableJoin[Any, Any, Any, Any, Any] = nodes[join.join].processor
        joiner, left = processor.joiner, processor.left
        #: The task's table: store key bytes -> the value the join reads (the store serde's round trip).
        self.table: dict[bytes, Any] = {}
        #: The table as its store holds it: key bytes -> value bytes (what a compacted changelog keeps).
        self.stored: dict[bytes, bytes] = {}
        #: This micro-batch's table changes: key bytes -> the store's value bytes (None: deleted).
        self.changes: dict[bytes, bytes | None] = {}
        self.value_serde = value_serde
        self.changelog = changelog
        table, stored_bytes, changes = self.table, self.stored, self.changes
        afters = [compose(child, lambda _node: counted) for child in nodes[join.join].children]

        def upsert(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if key is None:
                return  # KTableSource drops it
            stored = key_serialize(changelog, key)
            if value is None:
                table.pop(stored, None)
                stored_bytes.pop(stored, None)
                changes[stored] = None
                return
            data = value_serde.serialize(changelog, value)
            table[stored] = value_serde.deserialize(changelog, data)
            stored_bytes[stored] = changes[stored] = data

        def joined(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if not (left and key is None and value is not None) and (key is None or value is None):
                return  # KStreamKTableJoin drops it
            found = _MISSING if key is None else table.get(key_serialize(changelog, key), _MISSING)
            if found is _MISSING and not left:
                return
            result = joiner(key, value, None if found is _MISSING else found)
            for after in afters:
                after(key, result, timestamp, headers)

        def terminal(node: ProcessorNode) -> Emit:
            return upsert if node.name == join.table else joined

        self.sources: dict[str, tuple[SourceNode, Emit]] = {
            topic: (source, compose(source, terminal)) for source in built.sources for topic in source.topics
        }

    def load(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """The table from its changelog in Spark state, in order (None deletes)."""
        deserialize, changelog, table, stored = self.value_serde.deserialize, self.changelog, self.table, self.stored
        for key, value in entries:
            if value is None:
                table.pop(key, None)
                stored.pop(key, None)
            else:
                table[key] = deserialize(changelog, value)
                stored[key] = value


class JoinCountTask(StatefulProcessor):
    """`transformWithStateInPandas` processor grouped by task (source partition): the table's
    changelog in a list state, the task's held records and read offsets in a value state; out: the
    partial counts (or a built-in reducer's partials) per key of the task's micro-batch, (key, n)."""

    def __init__(self, count: CountKeys, waits: Mapping[tuple[str, int], int]) -> None:
        self.count = count
        self.waits = dict(waits)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._table = handle.getListState("table", "key binary, value binary")
        self._task = handle.getValueState("task", "task binary")

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        from streams_core.spark.packed_rows import held_blob, ready_rows, unpacked

        (partition,) = key
        saved = self._task.get()
        state: dict[str, Any] = (pickle.loads(saved[0]) if saved
                                 else {"read": {}, "held": None, "lineage": uuid.uuid4().hex, "version": 0})  # fmt: skip
        slot = (state["lineage"], int(partition))
        live = _live.pop(slot, None)
        if live is None or live[0] != state["version"]:
            keys: list[Any] = []
            values: list[Any] = []
            reducing = self.count.native.kind != "join-count"
            join = _Join(self.count.topology, self.count.props, self.count.native, _collect(keys, values if reducing else None))
            if saved:
                join.load((bytes(k), None if v is None else bytes(v)) for k, v in self._table.get())
        else:
            _, join, keys, values = live
        waits = {tp: offset for tp, offset in self.waits.items() if tp[1] == partition}
        ready, rest = ready_rows(unpacked(rows, state["held"]), state["read"], waits)
        state["held"] = held_blob(rest)
        self._run(join, ready)
        self._log_changes(join, state)
        state["version"] += 1
        self._task.update((pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL),))
        partials = self._partials(keys if self.count.native.string_keys else self.count._serialized(keys), values)
        keys.clear()
        values.clear()
        _live[slot] = (state["version"], join, keys, values)
        while len(_live) > _MAX_LIVE:
            _live.popitem(last=False)
        if partials:
            import pandas as pd  # type: ignore[import-untyped]  # no stubs in the venv

            yield pd.DataFrame({"key": list(partials), "n": list(partials.values())})

    def _partials(self, keys: list[Any], values: list[Any]) -> Mapping[Any, int]:
        """The count's partial counts per key, or the built-in reducer's partial per key (its values combined)."""
        if self.count.native.kind == "join-count":
            return Counter(keys)
        combine = SPARK_COMBINES[self.count.native.combine]
        partials: dict[Any, int] = {}
        for key, value in zip(keys, values, strict=True):
            old = partials.get(key)
            partials[key] = value if old is None else combine(old, value)
        return partials

    def _log_changes(self, join: _Join, state: dict[str, Any]) -> None:
        """The micro-batch's table changes appended to the changelog in Spark state, in one call; the
        changelog rewritten with the live entries once it holds more than twice as many."""
        if not join.changes:
            return
        logged = state.get("logged", 0) + len(join.changes)
        if logged <= 2 * len(join.stored) + _COMPACT_SLACK:
            self._table.appendList(list(join.changes.items()))
        elif join.stored:
            self._table.put(list(join.stored.items()))
            logged = len(join.stored)
        else:
            self._table.clear()
            logged = 0
        state["logged"] = logged
        join.changes.clear()

    def _run(self, join: _Join, ready: pa.Table | None) -> None:
        """The ready rows through their topic's way, in order: per topic its keys and values
        deserialized at once (a String serde as one Arrow cast), record by record where the
        deserialization handler or the timestamp extractor must decide."""
        if ready is None:
            return
        encoded = ready.column("topic").combine_chunks().dictionary_encode()
        codes = encoded.indices.to_numpy()
        runs, nexts = [], []
        for i, topic in enumerate(encoded.dictionary.to_pylist()):
            run, args = self._topic_way(join, topic, ready if len(encoded.dictionary) == 1 else ready.filter(pa.array(codes == i)))
            runs.append(run)
            nexts.append(args)
        for code in codes.tolist():
            runs[code](*nexts[code]())

    def _topic_way(self, join: _Join, topic: str, rows: pa.Table) -> tuple[Callable[..., None], Callable[[], tuple[Any, ...]]]:
        """(the way of `topic`'s records, the next record's arguments to it) over the topic's ready rows."""
        source, run = join.sources[topic]
        timestamps = rows.column("timestamp").to_pylist()
        if min(timestamps) >= 0:
            try:
                keys = _deserialized(rows.column("key"), source.key_serde, topic)
                values = _deserialized(rows.column("value"), source.value_serde, topic)
                return run, zip(keys, values, timestamps, itertools.repeat(()), strict=False).__next__
            except DeserializationError:
                pass  # record by record below, the handler deciding
        partition = rows.column("partition")[0].as_py()
        key_serde, value_serde, skip_or_raise = source.key_serde, source.value_serde, self.count._skip_or_raise

        def careful(key_bytes: bytes | None, value_bytes: bytes | None, timestamp: int, offset: int) -> None:
            try:
                key = key_serde.deserialize(topic, key_bytes)
                value = value_serde.deserialize(topic, value_bytes)
            except DeserializationError as exc:
                skip_or_raise(exc, InputRow(topic, partition, offset, timestamp, key_bytes, value_bytes, ()))
                return
            if timestamp < 0:
                timestamp = source.extract_timestamp(ConsumerRecord(topic, partition, offset, timestamp, key, value, ()), -1)
                if timestamp < 0:
                    return
            run(key, value, timestamp, ())

        raw = (rows.column(name).to_pylist() for name in ("key", "value", "timestamp", "offset"))
        return careful, zip(*raw, strict=False).__next__

    def close(self) -> None:
        """The live tables stay for the next micro-batch."""


def _collect(keys: list[Any], values: list[Any] | None) -> Emit:
    """The aggregation's input: the key (and value, with `values`) of every record it would aggregate (neither None)."""
    append_key = keys.append
    if values is None:

        def counted(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if key is not None and value is not None:
                append_key(key)

        return counted
    append_value = values.append

    def received(key: Any, value: Any, timestamp: int, headers: Any) -> None:
        if key is not None and value is not None:
            append_key(key)
            append_value(value)

    return received


#: (lineage, task) -> (version, the task's join with its table, its key and value lists) after its last micro-batch.
_live: OrderedDict[tuple[str, int], tuple[int, _Join, list[Any], list[Any]]] = OrderedDict()
