"""A stateless chain into a session aggregation, compiled to one vectorized query (kinds
"session-count" and "session-aggregate").

`stream(...)` → fused stateless operators → `group_by`/`group_by_key` →
`windowed_by(SessionWindows)` → `count()`, `aggregate(initializer, aggregator, merger)` or
`reduce(reducer)` (caching on, emit per update) → `to_stream()` → fused stateless operators →
`to(topic)` becomes:

    Kafka source → mapInArrow(SessionKeys: the chain per record; each aggregated record's task,
                   key, timestamp and place in its Kafka partition, and for an aggregate or
                   reduce its value as bytes)
                 → groupBy(task).transformWithStateInPandas(SessionTask: the task's records in
                   Kafka Streams' order through `TaskSessions` (task_sessions.py),
                   KStreamSessionWindowAggregate's algorithm over the task's stream time, the
                   user's functions per record; the record cache's flush, one row per changed
                   session, through `SessionOutput`: Windowed(key, SessionWindow(start, end)) and
                   the value through the tail and the sinks' serdes; state: the sessions as the
                   session store's compacted changelog, key bytes, start, end, count or the
                   store's value bytes, in a list state; the stream time in a value state)
                 → Kafka sink

The task is the replaced repartition topic's partition of the key (murmur2), or the source
partition, as for the native windowed count (native_window_count.py); Spark's shuffle replaces
the repartition topic. The same query runs a tumbling or hopping aggregate or reduce with
`TaskWindows` as the per-task step (native_window_aggregate.py, `TaskAggregation.task_store`). docs/spark.md ("The session aggregations natively") gives the rules and
where they differ from Kafka Streams.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError
from streams_core.kstream.internals.functions import count_add
from streams_core.kstream.internals.kstream_session_window_aggregate import KStreamSessionWindowAggregate
from streams_core.kstream.internals.kstream_window_aggregate import KStreamWindowAggregate
from streams_core.processor.internals.processor_node import ProcessorNode
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.serde import Serdes
from streams_core.spark.native_count import (
    AGGREGATIONS,
    NO_AGGREGATION,
    NativeCount,
    _chain_into,
    built_shipped,
    key_column,
    same_serde,
)
from streams_core.spark.native_reduce import _transport, kafka_order_of
from streams_core.spark.native_window_count import WindowKeys, WindowOutput
from streams_core.spark.task_sessions import COUNT, NO_TIME, AggregateFunctions, TaskSessions
from streams_core.spark.windowed_tail import WindowedTail, windowed_tail
from streams_core.state.internals.store_names import store_changelog_topic
from streams_core.state.windowed import SessionWindow, Window, Windowed

__all__ = ["NativeSessionAggregation", "SessionAggregation", "SessionInputs", "SessionKeys", "SessionOutput", "SessionTask",
           "TaskAggregation", "find_native_session_aggregation", "session_functions",
           "task_aggregation"]  # fmt: skip

log = logging.getLogger(__name__)

#: Live task sessions a Python worker keeps between micro-batches, least recently used first.
_MAX_LIVE = 32
#: The changelog in Spark state is rewritten with the live sessions only once it holds more than
#: twice as many rows, plus this many.
_COMPACT_SLACK = 1_000


@dataclass(frozen=True, kw_only=True)
class TaskAggregation(WindowedTail):
    """A windowed aggregation the per-task stage runs (`SessionTask`): its windows, and what follows
    it (`WindowedTail`)."""

    grace: int

    def task_store(self, functions: AggregateFunctions) -> Any:
        """A task's store and algorithm (`TaskSessions`, `TaskWindows`), empty."""
        raise NotImplementedError

    def window(self, start: int, column: int) -> tuple[Window, int]:
        """A flushed row's window and timestamp, from its start and its third changelog column."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class SessionAggregation(TaskAggregation):
    """A session aggregation's windows and store, and what follows it."""

    gap: int
    #: The session store's retention (at least gap + grace): sessions ending at or before the
    #: store's stream time minus it are gone from the store.
    retention: int

    def task_store(self, functions: AggregateFunctions) -> TaskSessions:
        return TaskSessions(self.gap, self.grace, self.retention, functions)

    def window(self, start: int, column: int) -> tuple[Window, int]:
        """The session [start, end], stamped with its end (as Kafka Streams' cache flush)."""
        return SessionWindow(start, column), column


@dataclass(frozen=True)
class NativeSessionAggregation(NativeCount):
    """A `NativeCount` of kind "session-count", "session-aggregate" (an aggregate or reduce with the
    user's functions) or "window-aggregate" (native_window_aggregate.py), with its windows' rules
    and tail."""

    session: TaskAggregation | None = None


def find_native_session_aggregation(sid: int, built: ProcessorTopology, builder: Any, config: StreamsConfig,
                                    readback: frozenset[str]) -> NativeSessionAggregation | str:  # fmt: skip
    """`NativeSessionAggregation` when sub-topology `sid` aggregates sessions of a stateless chain as
    the native query can, else why not (`NO_AGGREGATION` without a session aggregation)."""
    sessions = [n for n in built.processors if isinstance(n.processor, KStreamSessionWindowAggregate)]
    if not sessions:
        return NO_AGGREGATION
    if len(sessions) > 1 or any(isinstance(n.processor, AGGREGATIONS) for n in built.processors):
        return "several aggregations in one sub-topology"
    (agg,) = sessions
    processor: KStreamSessionWindowAggregate[Any, Any, Any] = agg.processor
    counts = processor._aggregator is count_add

    def aggregation(fields: dict[str, Any], store: Any) -> TaskAggregation:
        return SessionAggregation(gap=processor._gap, grace=processor._grace, retention=store.retention_period, **fields)

    return task_aggregation(sid, built, builder, config, readback, agg,
                            "session-count" if counts else "session-aggregate", aggregation)  # fmt: skip


def task_aggregation(sid: int, built: ProcessorTopology, builder: Any, config: StreamsConfig, readback: frozenset[str],
                     agg: ProcessorNode, kind: str, aggregation: Callable[[dict[str, Any], Any], TaskAggregation],
                     ) -> NativeSessionAggregation | str:  # fmt: skip
    """The windowed aggregation `agg` of sub-topology `sid` as a native query of `kind` run by the
    per-task stage, when a stateless chain feeds it and a stateless tail writes it, else why not.
    `aggregation(tail fields, store builder)` makes its `TaskAggregation`."""
    (store,) = agg.store_names
    if agg.processor._emit_strategy.emits_on_close:
        return "it emits on window close"
    if config["default.deserialization.exception.handler"] == "dead_letter":
        return "the dead_letter deserialization handler writes to its topic, which the native query has no output for"
    if not builder.store_builder(store).caching_enabled:
        return "caching is off (every update is emitted, which the native query does not)"
    tail = windowed_tail(agg, readback)
    if isinstance(tail, str):
        return tail
    others = sorted({str(s.topic or f"topics chosen by {s.name}") for s in built.sinks if s.name not in tail.sinks})
    if others:
        return f"the sub-topology also writes {', '.join(others)}: an output beside the aggregation's"
    native = (agg.name, tail.to_stream, *tail.tail)
    chain = _chain_into(sid, built, builder, config, readback, agg, set(native), None)
    if isinstance(chain, str):
        return chain
    chain_sid, chain_built, end, bypassed, fused, shuffled, key_serde, _ = chain
    if len([t for s in chain_built.sources for t in s.topics]) != 1:
        return "it reads several topics (the order across them is the task's)"
    string_values = False
    if kind != "session-count" and bypassed is not None:  # the values cross Spark as the repartition topic's bytes
        (repartition,) = [s for s in chain_built.sinks if s.name == end]
        string_values = same_serde(repartition.value_serde, Serdes.String())
    session = aggregation(tail.fields() | {"partitions_of": bypassed}, builder.store_builder(store))
    return NativeSessionAggregation(chain_sid, end, sid, tail.topics[0], bypassed, same_serde(key_serde, Serdes.String()),
                                    fused, native, shuffled, key_serde, kind=kind, string_values=string_values,
                                    session=session)  # fmt: skip


def _session(native: NativeCount) -> TaskAggregation:
    session = getattr(native, "session", None)
    if session is None:
        raise TypeError(f"{native} is not an aggregation of the per-task stage")
    return session  # type: ignore[no-any-return]


def session_functions(topology: bytes, props: Mapping[str, Any], native: NativeCount) -> AggregateFunctions:
    """The aggregation's functions, from the shipped topology (on the executor): `COUNT` for a count,
    else the processor's initializer, aggregator and merger (a reduce's, as the DSL builds them; no
    merger for time windows) with its store's value serde (the application's default if the store
    has none) on its changelog topic."""
    if native.kind == "session-count":
        return COUNT
    built = built_shipped(topology, props, native.count_subtopology)
    (node,) = [n for n in built.processors if n.name == native.native[0]]
    processor = node.processor
    if not isinstance(processor, KStreamSessionWindowAggregate | KStreamWindowAggregate):
        raise StreamsError(f"{node.name!r} is neither a session nor a time-window aggregation")
    (store,) = node.store_names
    config = StreamsConfig(props)
    serde = built.state_stores[store].value_serde or config["default.value.serde"]
    topic = store_changelog_topic(config["application.id"], store)
    serialize, deserialize = serde.serialize, serde.deserialize
    merger = processor._merger if isinstance(processor, KStreamSessionWindowAggregate) else None
    return AggregateFunctions(processor._initializer, processor._aggregator, merger,
                            lambda value: serialize(topic, value), lambda data: deserialize(topic, data))  # fmt: skip


class SessionKeys(WindowKeys):
    """`mapInArrow` function: Kafka rows (partition, timestamp, key, value) of one topic in; out one
    row per record the aggregation receives (key and value not None): (task, key, timestamp, its
    Kafka partition, its place in that partition's offset order; for an aggregate or reduce its
    value: the replaced repartition topic's bytes, a string for the String serde, else pickled,
    as `FoldValues` hands values over)."""

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount, partitions: int) -> None:
        super().__init__(topology, props, native, partitions)
        key_type = "string" if native.string_keys else "binary"
        self.schema = f"task int, key {key_type}, ts bigint, part int, seq bigint"
        if native.kind != "session-count":
            self.schema += f", value {'string' if native.string_values else 'binary'}"

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        native = self.native
        counts = native.kind == "session-count"
        transport = None if counts else _transport(self.topology, self.props, native)
        encode, topic = (None if transport is None else transport.serialize), native.bypassed_topic or ""
        keys: list[Any] = []
        times: list[int] = []
        values: list[Any] = []

        def received(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if key is None or value is None:  # the aggregation drops these before its stream time
                return
            if not counts:
                if encode is not None:
                    value = encode(topic, value)
                    if value is None:  # read back as None from the repartition topic: dropped
                        return
                values.append(value)
            keys.append(key)
            times.append(timestamp)

        chains = self._chains(received)
        tasks_of: dict[Any, int] = {}
        seq = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            self._run_batch(chains, batch)
            if not keys:
                continue
            partition = batch.column("partition")[0].as_py()
            if not native.string_keys:
                serialized = self._serialized(keys)
                kept = [i for i, k in enumerate(serialized) if k is not None]  # a None key: the aggregation drops it
                keys[:] = [serialized[i] for i in kept]
                times[:] = [times[i] for i in kept]
                values[:] = [values[i] for i in kept] if values else values
            column = key_column(keys, native.string_keys, native.output_topic)
            n = len(keys)
            if _session(native).partitions_of is None:
                tasks = np.full(n, partition, dtype=np.int32)
            else:
                encoded = column.dictionary_encode()
                of_key = np.asarray([self._task(k, tasks_of) for k in encoded.dictionary.to_pylist()], dtype=np.int32)
                tasks = of_key[encoded.indices.to_numpy(zero_copy_only=False)]
            columns = [pa.array(tasks), column, pa.array(times, pa.int64()), pa.array(np.full(n, partition, dtype=np.int32)),
                       pa.array(np.arange(seq, seq + n, dtype=np.int64))]  # fmt: skip
            if not counts:
                columns.append(key_column(values, encode is None, topic))
            yield pa.RecordBatch.from_arrays(columns, names=["task", "key", "ts", "part", "seq", "value"][:len(columns)])
            seq += n
            keys.clear()
            times.clear()
            values.clear()


@dataclass(frozen=True)
class SessionInputs:
    """What the per-task step needs beside the rows: the aggregation's functions, the keys its
    functions receive (None: the grouping keys themselves) and the values decoded from how
    `SessionKeys` handed them over (None: as they came)."""

    functions: AggregateFunctions
    user_key: Any = None  # Callable[[Any], Any] | None
    value: Any = None  # Callable[[Any], Any] | None

    def user_keys(self, keys: list[Any]) -> list[Any] | None:
        convert = self.user_key
        return None if convert is None else [convert(k) for k in keys]

    def values(self, values: list[Any]) -> list[Any]:
        convert = self.value
        return values if convert is None else [convert(v) for v in values]


class SessionTask(StatefulProcessor):
    """`transformWithStateInPandas` processor grouped by task: the task's rows of the micro-batch in
    Kafka Streams' order through its store and algorithm (`TaskSessions`, or `TaskWindows` for time
    windows); out the record cache's flush through the tail and sinks (`SessionOutput`): Kafka sink
    rows (topic, key, value).

    State: `sessions`, the session store's changelog rows (key, start, end, count or the store's
    value bytes; None: removed) as Arrow IPC streams, one appended per micro-batch and rewritten as
    one with the live sessions once twice as long (PySpark serializes list-state rows one by one:
    130,000 rows took 5.8 s); `task`, its stream times, dropped records, and the version the Python
    worker's live copy matches.
    """

    def __init__(self, session: TaskAggregation, key_type: str, output: SessionOutput) -> None:
        self.session = session
        self.key_type = key_type
        self.output = output

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._log = handle.getListState("sessions", "rows binary")
        self._task = handle.getValueState(
            "task", "observed long, stored long, dropped long, logged long, version long, lineage string")

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        import pandas as pd  # type: ignore[import-untyped]  # no stubs in the venv

        (task,) = key
        inputs = self.output.inputs()
        frame = pd.concat(list(rows), ignore_index=True)
        order = kafka_order_of(frame["part"].to_numpy(), frame["seq"].to_numpy(), frame["ts"].to_numpy())
        saved = self._task.get()
        observed, stored, dropped, logged, version, lineage = saved if saved else (
            NO_TIME, NO_TIME, 0, 0, 0, uuid.uuid4().hex)  # fmt: skip
        slot = (lineage, int(task))
        live = _live.pop(slot, None)
        if live is not None and live[0] == version:
            sessions = live[1]
        else:
            sessions = self.session.task_store(inputs.functions)
            if saved:
                sessions.load(row for (chunk,) in self._log.get() for row in _read_rows(chunk))
            sessions.observed, sessions.stored, sessions.dropped = int(observed), int(stored), int(dropped)
            sessions.expire()
        keys = frame["key"].to_numpy()[order].tolist()
        values = inputs.values(frame["value"].to_numpy()[order].tolist()) if "value" in frame.columns else None
        dirty = sessions.process(keys, frame["ts"].to_numpy()[order].tolist(), values, inputs.user_keys(keys))
        out = sessions.flushed(dirty)
        logged = self._log_changes(sessions, dirty, int(logged))
        version = int(version) + 1
        self._task.update((sessions.observed, sessions.stored, sessions.dropped, logged, version, lineage))
        _live[slot] = (version, sessions)
        while len(_live) > _MAX_LIVE:
            _live.popitem(last=False)
        if out:
            yield self.output.written(out)

    def _log_changes(self, store: Any, dirty: Any, logged: int) -> int:
        """The micro-batch's store changes appended to the changelog in Spark state in one call, or the
        changelog rewritten with the live sessions (windows) once it holds more than twice as many;
        its new length."""
        changes = store.changes(dirty)
        if not changes:
            return logged
        live = store.live()
        if logged + len(changes) <= 2 * live + _COMPACT_SLACK:
            self._log.appendList([(self._rows_bytes(changes, store),)])
            return logged + len(changes)
        store.expire()
        rows = store.rows()
        if rows:
            self._log.put([(self._rows_bytes(rows, store),)])
        else:
            self._log.clear()
        return len(rows)

    def _rows_bytes(self, rows: Sequence[tuple[Any, int, int, Any]], store: Any) -> bytes:
        """Changelog rows as one Arrow IPC stream (key, start, the store's third column: a session's
        end or a window's timestamp, and n for a count, else the store's value bytes)."""
        import pyarrow as pa

        keys, starts, thirds, values = zip(*rows, strict=True)
        counts = store.functions.serialize is None
        column = {"n": pa.array(values, pa.int64())} if counts else {"value": pa.array(values, pa.binary())}
        key, start, third = store.COLUMNS
        table = pa.table({key: pa.array(keys, pa.string() if self.key_type == "string" else pa.binary()),
                          start: pa.array(starts, pa.int64()), third: pa.array(thirds, pa.int64()), **column})  # fmt: skip
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return bytes(sink.getvalue().to_pybytes())

    def close(self) -> None:
        """The live sessions stay for the next micro-batch."""


def _read_rows(chunk: bytes) -> Iterator[tuple[Any, int, int, Any]]:
    """The changelog rows of one Arrow IPC stream in Spark state."""
    import pyarrow as pa

    table = pa.ipc.open_stream(pa.py_buffer(bytes(chunk))).read_all()
    return zip(*(table.column(i).to_pylist() for i in range(4)), strict=True)


class SessionOutput(WindowOutput):
    """The flushed sessions (key, start, end, stored value or None) as Kafka sink rows: each as
    `Windowed(key, SessionWindow(start, end))` and its value (the store's bytes deserialized; None:
    a tombstone) through `to_stream()`'s fused operators and the sinks (their serdes), with the
    session end as timestamp. Called by `SessionTask`, so the tail runs in the same Python worker
    (no second pass over Arrow); it also prepares the step's `SessionInputs` there."""

    _built: Any = None  # (the sinks' collector, the tail's runs), built on the executor
    _inputs: SessionInputs | None = None

    def _tail(self) -> Any:
        return _session(self.native)

    def inputs(self) -> SessionInputs:
        """The per-task step's functions and conversions, built once per Python worker."""
        if self._inputs is None:
            native = self.native
            functions = session_functions(self.topology, self.props, native)
            user_key = value = None
            if functions is not COUNT:
                topic = self.key_topic
                if not native.string_keys:
                    deserialize = native.key_serde.deserialize
                    user_key = lambda key: deserialize(topic, key)  # noqa: E731
                transport = _transport(self.topology, self.props, native)
                if transport is not None:
                    decode, where = transport.deserialize, native.bypassed_topic or ""
                    value = lambda data: decode(where, bytes(data))  # noqa: E731
            self._inputs = SessionInputs(functions, user_key, value)
        return self._inputs

    def written(self, flushed: Iterable[tuple[Any, int, int, Any]]) -> Any:
        """The Kafka sink's rows (topic, key, value) of the flushed sessions, as a pandas frame."""
        import pandas as pd

        from streams_core.spark.native_window_count import _Rows

        if self._built is None:
            rows = _Rows()
            self._built = rows, self._runs(rows)
        rows, runs = self._built
        deserialize = None if self.native.string_keys else self.native.key_serde.deserialize
        read = self.inputs().functions.deserialize
        topic = self.key_topic
        window_of = self._tail().window
        for key, start, third, stored in flushed:
            window, timestamp = window_of(start, third)
            windowed = Windowed(key if deserialize is None else deserialize(topic, key), window)
            value = stored if read is None or stored is None else read(stored)
            for run in runs:
                run(windowed, value, timestamp, ())
        frame = pd.DataFrame({"topic": rows.topics, "key": rows.keys, "value": rows.values})
        rows.topics, rows.keys, rows.values = [], [], []
        return frame


#: (lineage, task) -> (version, the task's sessions) after its last micro-batch.
_live: OrderedDict[tuple[str, int], tuple[int, TaskSessions]] = OrderedDict()
