"""A stream-stream join (inner, left or outer) compiled to one query (`NativeCount.kind` "stream-join").

`stream(a)` → fused stateless operators → `join(stream(b) → fused operators, joiner, JoinWindows...)`
→ fused operators → `to(topic)` becomes:

    Kafka source (both sides' topics)
      → groupBy(partition).transformWithStateInPandas(StreamJoinTask, per Kafka Streams task: the
        micro-batch's records in PartitionGroup's order, holding those that wait for a partition
        with unread data; each side's records after its chain, then the join over columns: every
        new record against the other side's records its window store holds when the record comes
        (within the window, and not expired by that store's observed stream time), the joiner called
        per pair in one pass, the output in Kafka Streams' order; for a left or outer join, the
        unmatched records record by record (stream_join_outer.py); the sinks' bytes.
        State: both sides' window buffers as Arrow IPC blobs in a list state (appended per
        micro-batch, rewritten without the expired records), the observed stream times, read
        offsets, held records and a left or outer join's unmatched records in a value state)
      → Kafka sink (update)

The rule is the runtime's record by record (KStreamJoinWindow, KStreamKStreamJoin over window
stores that keep duplicates): a record first probes the other side's store, then is put in its
own; a store's observed stream time is the largest timestamp put into it, and a record at `ts` is
live while `ts > observed - retention` (retention = before + after + grace), so a late record is
not stored and expired records are not found. Here the observed times are running maxima over
the task's order, so the per-record rule becomes array operations (docs/spark.md).
"""

from __future__ import annotations

import logging
import pickle
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from streams_core.config import StreamsConfig
from streams_core.errors import DeserializationError
from streams_core.kstream.internals.kstream_kstream_join import KStreamJoinWindow, KStreamKStreamJoin
from streams_core.processor.internals.processor_node import ProcessorNode, SinkNode, SourceNode
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.processor.internals.stateless_chain import Emit, compose, fused_nodes
from streams_core.processor.timestamp_extractor import FailOnInvalidTimestamp, LogAndSkipOnInvalidTimestamp
from streams_core.serde import Serdes
from streams_core.spark.native_count import CountKeys, NativeCount, built_shipped, same_serde
from streams_core.spark.spark_rows import InputRow
from streams_core.spark.stream_join_arrays import (
    NO_TIME,
    JoinBatch,
    Side,
    join_batch,
    ready_order,
    record_headers,
    table_from_ipc,
    table_to_ipc,
)
from streams_core.spark.stream_join_outer import MAX_TIME, Unmatched
from streams_core.state.internals.store_names import store_changelog_topic

if TYPE_CHECKING:
    from streams_core.spark.spark_plan import QueryPlan
    from streams_core.spark.spark_runner import SparkRunner

__all__ = ["NativeStreamJoin", "StreamJoinTask", "StreamStreamJoin", "find_stream_join", "stream_join_operators",
           "stream_join_query"]  # fmt: skip

log = logging.getLogger(__name__)

#: `find_stream_join`'s answer for a sub-topology without a stream-stream join.
NO_STREAM_JOIN = "no stream-stream join"
#: Live tasks a Python worker keeps between micro-batches, least recently used first.
_MAX_LIVE = 32
#: The buffers' blobs in Spark state are rewritten with the live records only once they hold more
#: than twice as many records, plus this many.
_COMPACT_SLACK = 10_000
_OWN_TIMESTAMP = (FailOnInvalidTimestamp, LogAndSkipOnInvalidTimestamp)
_OUTPUT_SCHEMA = "topic string, key binary, value binary, headers array<struct<key: string, value: binary>>"
#: Serdes whose bytes are the value's own (serialize(deserialize(b)) == b): the source's bytes
#: stand for the store's and the sink's when the serdes agree.
_IDENTITY_SERDES = (Serdes.String(), Serdes.Bytes())


@dataclass(frozen=True)
class StreamStreamJoin:
    """The join's nodes (left side first), stores, windows and what follows it."""

    windows: tuple[str, str]
    joins: tuple[str, str]
    merge: str
    stores: tuple[str, str]
    before: int
    after: int
    grace: int
    #: The fused stateless nodes between the merge and the sinks.
    tail: tuple[str, ...]
    sinks: tuple[str, ...]
    #: Per side (left, right): its unmatched records are emitted (left join: the left; outer join: both).
    outer: tuple[bool, bool] = (False, False)

    @property
    def retention(self) -> int:
        """The window stores' retention: a record is live while its timestamp > observed - retention."""
        return self.before + self.after + self.grace


@dataclass(frozen=True)
class NativeStreamJoin(NativeCount):
    """A `NativeCount` of kind "stream-join" (the planner's type for a native query) with its join."""

    stream_join: StreamStreamJoin | None = None


def find_stream_join(sid: int, built: ProcessorTopology, config: StreamsConfig, readback: frozenset[str]) -> NativeStreamJoin | str:
    """`NativeStreamJoin` when sub-topology `sid` is sources → fused chains → a stream-stream join →
    fused operators → sinks to fixed topics; else why not (NO_STREAM_JOIN without a join)."""
    joins = [n for n in built.processors if isinstance(n.processor, KStreamKStreamJoin)]
    if not joins:
        return NO_STREAM_JOIN
    if len(joins) != 2 or len(built.state_stores) > 3:
        return "the sub-topology runs more than one stream-stream join"
    if config["default.deserialization.exception.handler"] == "dead_letter":
        return "the dead_letter deserialization handler writes to its topic, which the native query has no output for"
    left, right = sorted(joins, key=lambda n: not n.processor.is_left)
    outer = (left.processor.outer, right.processor.outer)
    if len(built.state_stores) != (3 if any(outer) else 2):
        return "the sub-topology has state stores besides the join's"
    parents: dict[str, list[ProcessorNode]] = {}
    for node in built.nodes:
        for child in node.children:
            parents.setdefault(child.name, []).append(node)
    windows = []
    for join in (left, right):
        (window, *others) = parents[join.name]
        if others or not isinstance(window.processor, KStreamJoinWindow) or window.children != (join,):
            return f"{join.name} is not fed by its own window"
        windows.append(window)
    if len(left.children) != 1 or right.children != left.children:
        return "the join's sides do not end in one merge"
    (merge,) = left.children
    if {p.name for p in parents[merge.name]} != {left.name, right.name}:
        return "the join's merge has other parents"
    fused: list[str] = []
    reached: dict[str, set[str]] = {w.name: set() for w in windows}
    for source in built.sources:
        if source.pattern is not None or set(source.topics) & readback:
            return f"source {source.name} reads a pattern or a topic the topology writes"
        if not isinstance(getattr(source.extract_timestamp, "__self__", None), _OWN_TIMESTAMP):
            return f"source {source.name} has a custom timestamp extractor"
        chain, ends = fused_nodes(source)
        if len(ends) != 1 or ends[0].name not in reached:
            return f"the chain from {source.name} feeds more than one side of the join (a self-join) or other operators"
        reached[ends[0].name].add(source.name)
        fused.extend(n.name for n in chain if n.name not in fused)
    if not all(reached.values()):
        return "a side of the join is not read from a source in this sub-topology"
    tail, terminals = fused_nodes(merge)
    tail = [n for n in tail if n.name != merge.name]
    sinks = [t for t in terminals if isinstance(t, SinkNode)]
    if len(sinks) != len(terminals) or not sinks:
        return "after the join, the chain feeds more than sinks"
    for sink in sinks:
        if sink.topic is None or sink.partitioner is not None or sink.topic in readback:
            return f"sink {sink.name} chooses its topic per record, has a custom partitioner or is read back"
    everything = {n.name for n in built.processors}
    known = {*fused, *(w.name for w in windows), left.name, right.name, merge.name, *(n.name for n in tail)}
    if everything != known:
        return f"the sub-topology also runs {', '.join(sorted(everything - known))}"
    spec = left.processor.windows
    stores = tuple(next(iter(w.store_names)) for w in windows)
    retentions = {built.state_stores[s].retention_period for s in stores}
    if retentions != {spec.size_ms + spec.grace_period_ms} or spec.size_ms + spec.grace_period_ms <= 0:
        return "its window stores' retention is not the windows' size plus grace"
    found = StreamStreamJoin((windows[0].name, windows[1].name), (left.name, right.name), merge.name, (stores[0], stores[1]),
                            spec.before_ms, spec.after_ms, spec.grace_period_ms, tuple(n.name for n in tail),
                            tuple(s.name for s in sinks), outer)  # fmt: skip
    native = (*found.windows, *found.joins, merge.name)
    return NativeStreamJoin(sid, merge.name, sid, str(sinks[0].topic), None, False, (*fused, *found.tail), native,
                            kind="stream-join", stream_join=found)  # fmt: skip


def stream_join_operators(native: NativeCount) -> list[tuple[str, str]]:
    """The plan's text for the join's nodes."""
    join = _join(native)
    window = (f"vectorized: the side's window store per task, its live records as Arrow columns kept as Spark state "
              f"(retention {join.retention} ms by the store's observed stream time)")  # fmt: skip
    probe = ("vectorized: each new record joined with the other side's stored records within the window, over "
             "columns per task and micro-batch in Kafka Streams' order (PartitionGroup's; records wait for a "
             "partition with unread data); the joiner once per pair")
    if any(join.outer):
        probe += ("; unmatched records of an outer side wait in Spark state until the join's stream time closes "
                  "their window (python, per record)")
    return [(join.windows[0], window), (join.windows[1], window), (join.joins[0], probe), (join.joins[1], probe),
            (join.merge, "vectorized: the pairs in Kafka Streams' order (the probing record's, then the stored record's "
                         "timestamp and arrival)")]  # fmt: skip


def stream_join_query(runner: SparkRunner, query: QueryPlan, rows: Any) -> Any:
    """The streaming DataFrame: Kafka rows → the join per task → the Kafka sink's columns."""
    native = query.native
    assert native is not None
    spec = query.spec
    handler = CountKeys(spec.topology, spec.props, native)
    handler.skipped = runner._skipped[query.subtopology_id]
    task = StreamJoinTask(handler, runner._waits.get(query.subtopology_id, {}))
    rows = rows.select("topic", "partition", "offset", "timestamp", "key", "value", "headers")
    return rows.groupBy("partition").transformWithStateInPandas(task, _OUTPUT_SCHEMA, "Update", "None")


def _join(native: NativeCount) -> StreamStreamJoin:
    join = getattr(native, "stream_join", None)
    assert isinstance(join, StreamStreamJoin)
    return join


class _Topology:
    """The shipped sub-topology as plain functions: each topic's way to its side of the join, the
    stores' and sinks' serdes, the joiner, the tail after the join."""

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount) -> None:
        join = _join(native)
        self.join = join
        built = built_shipped(topology, props, native.chain_subtopology)
        nodes = {n.name: n for n in built.nodes}
        application_id = str(props["application.id"])
        stores = [built.state_stores[s] for s in join.stores]
        self.changelogs = [store_changelog_topic(application_id, s) for s in join.stores]
        self.key_serde = stores[0].key_serde
        self.value_serdes = [s.value_serde for s in stores]
        processor: KStreamKStreamJoin[Any, Any, Any, Any] = nodes[join.joins[0]].processor
        self.joiner = processor.joiner
        #: Per topic: (its side, its source, its way into the side's window, whether the source feeds it directly).
        self.sources: dict[str, tuple[int, SourceNode, Emit, bool]] = {}
        #: What the chains reach the join with: per side, (position, key, value, timestamp, headers) lists.
        self.reached: list[tuple[list[int], list[Any], list[Any], list[int], list[Any]]] = [([], [], [], [], []),
                                                                                           ([], [], [], [], [])]
        self.position = 0
        for source in built.sources:
            side = 0 if fused_nodes(source)[1][0].name == join.windows[0] else 1
            direct = source.children == (nodes[join.windows[side]],)
            run = self._reach(side)(nodes[join.windows[side]]) if direct else compose(source, self._reach(side))
            for topic in source.topics:
                self.sources[topic] = (side, source, run, direct)
        merge = nodes[join.merge]
        self.sinks = [nodes[name] for name in join.sinks]
        #: One sink right after the merge: the pairs' keys and values go to it over columns.
        self.direct_sink: SinkNode | None = None
        if not join.tail and len(self.sinks) == 1 and merge.children == (self.sinks[0],):
            sink = self.sinks[0]
            assert isinstance(sink, SinkNode)
            self.direct_sink = sink
        self.out: tuple[list[str], list[bytes | None], list[bytes | None], list[Any]] = ([], [], [], [])
        self.tail = compose(merge, self._written)

    def _reach(self, side: int) -> Callable[[ProcessorNode], Emit]:
        """The chain's terminal for the side's window: what reaches the join, each at the next position."""
        positions, keys, values, timestamps, all_headers = self.reached[side]

        def reached(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            positions.append(self.position)  # a None key or value: a left or outer join's stream time
            self.position += 1
            keys.append(key)
            values.append(value)
            timestamps.append(timestamp)
            all_headers.append(headers)

        return lambda node: reached

    def _written(self, node: ProcessorNode) -> Emit:
        assert isinstance(node, SinkNode)
        topic, key_serde, value_serde = str(node.topic), node.key_serde, node.value_serde
        topics, keys, values, all_headers = self.out

        def write(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            topics.append(topic)
            all_headers.append(headers)
            keys.append(None if key is None else key_serde.serialize(topic, key))
            values.append(None if value is None else value_serde.serialize(topic, value))

        return write


class StreamJoinTask(StatefulProcessor):
    """`transformWithStateInPandas` processor grouped by task (source partition): the join's
    buffers in a list state of Arrow IPC blobs, the task's observed times, read offsets and held
    records in a value state; out: the sinks' (topic, key, value) of the micro-batch's pairs."""

    def __init__(self, handler: CountKeys, waits: Mapping[tuple[str, int], int]) -> None:
        self.handler = handler
        self.waits = dict(waits)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._buffers = handle.getListState("buffers", "blob binary")
        self._task = handle.getValueState("task", "task binary")

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        import pandas as pd  # type: ignore[import-untyped]  # no stubs in the venv

        (partition,) = key
        saved = self._task.get()
        state: dict[str, Any] = (pickle.loads(saved[0]) if saved else
                                 {"read": {}, "held": None, "lineage": uuid.uuid4().hex, "version": 0,
                                  "observed": [NO_TIME, NO_TIME], "position": 0, "logged": 0})  # fmt: skip
        slot = (state["lineage"], int(partition))
        live = _live.pop(slot, None)
        if live is not None and live[0] == state["version"]:
            _, topology, sides = live
        else:
            topology = _Topology(self.handler.topology, self.handler.props, self.handler.native)
            blobs = [bytes(b[0]) for b in self._buffers.get()] if saved else []
            sides = Side.restored([table_from_ipc(b) for b in blobs], state["observed"], topology.join.retention)
        frames = [f for f in rows if len(f)]
        held = [table_from_ipc(state["held"]).to_pandas()] if state["held"] else []
        if not frames and not held:
            _live[slot] = (state["version"], topology, sides)
            return
        frame = pd.concat(held + frames, ignore_index=True) if held or len(frames) != 1 else frames[0]
        waits = {tp: offset for tp, offset in self.waits.items() if tp[1] == partition}
        ready, rest = ready_order(frame, state["read"], waits)
        state["held"] = table_to_ipc(rest) if rest is not None and len(rest) else None
        topology.position = state["position"]
        batch = self._reached(topology, ready)
        state["position"] = topology.position
        unmatched = None
        if any(topology.join.outer):  # the shared store of unmatched records, the join's stream time
            stream_time, min_time, blob = state.get("unmatched", (-1, MAX_TIME, None))
            unmatched = Unmatched(stream_time, min_time, table_from_ipc(blob) if blob else None)
        out = join_batch(topology, sides, batch, unmatched)
        if unmatched is not None:
            waiting = unmatched.table()
            state["unmatched"] = (unmatched.stream_time, unmatched.min_time, table_to_ipc(waiting) if len(waiting) else None)
        state["observed"] = [s.observed for s in sides]
        self._log(sides, state)
        state["version"] += 1
        self._task.update((pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL),))
        _live[slot] = (state["version"], topology, sides)
        while len(_live) > _MAX_LIVE:
            _live.popitem(last=False)
        if out is not None and len(out):
            yield out

    def _reached(self, topology: _Topology, ready: Any) -> JoinBatch:
        """What reaches each side of the join from the ready rows, in order."""
        for lists in topology.reached:
            for items in lists:
                items.clear()
        if ready is not None and len(ready):
            if all(direct for *_, direct in topology.sources.values()) and _fast(topology, ready):
                batch = JoinBatch.from_columns(topology, ready)
                if batch is not None:
                    return batch
            self._run(topology, ready)
        return JoinBatch.from_lists(topology)

    def _run(self, topology: _Topology, ready: Any) -> None:
        """The ready records one by one through their topic's chain (the deserialization handler deciding on failures)."""
        sources = topology.sources
        columns = [ready[c].tolist() for c in ("topic", "partition", "offset", "timestamp", "key", "value")]
        all_headers = ready["headers"] if "headers" in ready else [None] * len(ready)
        for topic, partition, offset, timestamp, key, value, raw in zip(*columns, all_headers, strict=True):
            headers = record_headers(raw) or ()
            _, source, run, _ = sources[topic]
            try:
                k = source.key_serde.deserialize(topic, key)
                v = source.value_serde.deserialize(topic, value)
            except DeserializationError as exc:
                self.handler._skip_or_raise(exc, InputRow(topic, partition, offset, timestamp, key, value, headers))
                continue
            if timestamp < 0:
                from streams_core.processor.consumer_record import ConsumerRecord

                timestamp = source.extract_timestamp(ConsumerRecord(topic, partition, offset, timestamp, k, v, headers), -1)
                if timestamp < 0:
                    continue
            run(k, v, timestamp, headers)

    def _log(self, sides: list[Side], state: dict[str, Any]) -> None:
        """The micro-batch's stored records appended to the buffers in Spark state as one blob; the
        blobs rewritten with the live records once they hold more than twice as many."""
        added = [s.added for s in sides]
        count = sum(len(a) for a in added if a is not None)
        live = sum(len(s.table) for s in sides)
        logged = state["logged"] + count
        if logged > 2 * live + _COMPACT_SLACK:
            self._buffers.put([(table_to_ipc(Side.combined(sides)),)]) if live else self._buffers.clear()
            logged = live
        elif count:
            self._buffers.appendList([(table_to_ipc(Side.combined(sides, added=True)),)])
        state["logged"] = logged
        for side in sides:
            side.added = None

    def close(self) -> None:
        """The live tasks stay for the next micro-batch."""


def _fast(topology: _Topology, ready: Any) -> bool:
    """Every record's key and value bytes are what the store and the source serdes agree on, and its timestamp its own."""
    sources = [source for _, source, _, _ in topology.sources.values()]
    identity = all(any(same_serde(serde, s) for s in _IDENTITY_SERDES)
                   for source in sources for serde in (source.key_serde, source.value_serde))  # fmt: skip
    return identity and all(same_serde(s.key_serde, topology.key_serde) for s in sources) and bool(
        (ready["timestamp"] >= 0).all())


#: (lineage, task) -> (version, the task's topology and sides) after its last micro-batch.
_live: OrderedDict[tuple[str, int], tuple[int, _Topology, list[Side]]] = OrderedDict()
