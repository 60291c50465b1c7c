"""A stateless chain into a session count, compiled to one vectorized query (kind "session-count").

`stream(...)` → fused stateless operators → `group_by`/`group_by_key` →
`windowed_by(SessionWindows)` → `count()` (caching on, emit per update) → `to_stream()` → fused
stateless operators → `to(topic)` becomes:

    Kafka source → mapInArrow(SessionKeys: the chain per record; each counted record's task, key,
                   timestamp and place in its Kafka partition)
                 → groupBy(task).transformWithStateInPandas(SessionTask: the task's records in
                   Kafka Streams' order through `TaskSessions`, KStreamSessionWindowAggregate's
                   algorithm over the task's stream time; the record cache's flush, one row per
                   changed session, through `SessionOutput`: Windowed(key, SessionWindow(start, end))
                   and count through the tail and the sinks' serdes; state: the sessions as the
                   session store's compacted changelog, key bytes, start, end, count, in a list
                   state; the stream time in a value state)
                 → Kafka sink

The task is the replaced repartition topic's partition of the key (murmur2), or the source
partition, as for the native windowed count (native_window_count.py); Spark's shuffle replaces
the repartition topic. docs/spark.md ("The session count natively") gives the rules and where they
differ from Kafka Streams.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from streams_core.config import StreamsConfig
from streams_core.kstream.internals.functions import count_add
from streams_core.kstream.internals.kstream_session_window_aggregate import KStreamSessionWindowAggregate
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.serde import Serdes
from streams_core.spark.native_count import AGGREGATIONS, NO_AGGREGATION, NativeCount, _chain_into, same_serde
from streams_core.spark.native_reduce import kafka_order_of
from streams_core.spark.native_window_count import WindowKeys, WindowOutput
from streams_core.spark.windowed_tail import windowed_tail
from streams_core.state.windowed import SessionWindow, Windowed

__all__ = ["NativeSessionCount", "SessionCount", "SessionKeys", "SessionOutput", "SessionTask", "TaskSessions",
           "find_native_session_count"]  # fmt: skip

log = logging.getLogger(__name__)

_NO_TIME = -1
#: Live task sessions a Python worker keeps between micro-batches, least recently used first.
_MAX_LIVE = 32
#: The changelog in Spark state is rewritten with the live sessions only once it holds more than
#: twice as many rows, plus this many.
_COMPACT_SLACK = 1_000


@dataclass(frozen=True)
class SessionCount:
    """A session count's windows and what follows it: `to_stream()`, fused operators, sinks."""

    gap: int
    grace: int
    #: The session store's retention (at least gap + grace): sessions ending at or before the
    #: store's stream time minus it are gone from the store.
    retention: int
    to_stream: str
    tail: tuple[str, ...]
    sinks: tuple[str, ...]
    topics: tuple[str, ...]
    #: The repartition topic whose partitions are the count's tasks; None: the source's partitions.
    partitions_of: str | None = None


@dataclass(frozen=True)
class NativeSessionCount(NativeCount):
    """A `NativeCount` of kind "session-count", with its sessions' rules and tail."""

    session: SessionCount | None = None


def find_native_session_count(sid: int, built: ProcessorTopology, builder: Any, config: StreamsConfig,
                              readback: frozenset[str]) -> NativeSessionCount | str:  # fmt: skip
    """`NativeSessionCount` when sub-topology `sid` counts sessions of a stateless chain as the native
    query can, else why not (`NO_AGGREGATION` without a session aggregation)."""
    sessions = [n for n in built.processors if isinstance(n.processor, KStreamSessionWindowAggregate)]
    if not sessions:
        return NO_AGGREGATION
    if len(sessions) > 1 or any(isinstance(n.processor, AGGREGATIONS) for n in built.processors):
        return "several aggregations in one sub-topology"
    (agg,) = sessions
    processor: KStreamSessionWindowAggregate[Any, Any, Any] = agg.processor
    (store,) = agg.store_names
    if processor._aggregator is not count_add:
        return "a session aggregate or reduce (only the session count() is native)"
    if processor._emit_strategy.emits_on_close:
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
    session = SessionCount(processor._gap, processor._grace, builder.store_builder(store).retention_period,
                           tail.to_stream, tail.tail, tail.sinks, tail.topics, bypassed)  # fmt: skip
    return NativeSessionCount(chain_sid, end, sid, tail.topics[0], bypassed, same_serde(key_serde, Serdes.String()),
                              fused, native, shuffled, key_serde, kind="session-count", session=session)  # fmt: skip


def _session(native: NativeCount) -> SessionCount:
    session = getattr(native, "session", None)
    if session is None:
        raise TypeError(f"{native} is not a session count")
    return session  # type: ignore[no-any-return]


class SessionKeys(WindowKeys):
    """`mapInArrow` function: Kafka rows (partition, timestamp, key, value) of one topic in; out one
    row per record the count receives (key and value not None): (task, key, timestamp, its Kafka
    partition, its place in that partition's offset order)."""

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount, partitions: int) -> None:
        super().__init__(topology, props, native, partitions)
        key_type = "string" if native.string_keys else "binary"
        self.schema = f"task int, key {key_type}, ts bigint, part int, seq bigint"

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        from streams_core.spark.native_count import key_column

        keys: list[Any] = []
        times: list[int] = []

        def counted(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if key is not None and value is not None:  # the aggregation drops these before its stream time
                keys.append(key)
                times.append(timestamp)

        chains = self._chains(counted)
        tasks_of: dict[Any, int] = {}
        seq = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            self._run_batch(chains, batch)
            if not keys:
                continue
            partition = batch.column("partition")[0].as_py()
            if not self.native.string_keys:
                serialized = self._serialized(keys)
                kept = [i for i, k in enumerate(serialized) if k is not None]  # a None key: the aggregation drops it
                keys[:] = [serialized[i] for i in kept]
                times[:] = [times[i] for i in kept]
            column = key_column(keys, self.native.string_keys, self.native.output_topic)
            n = len(keys)
            if _session(self.native).partitions_of is None:
                tasks = np.full(n, partition, dtype=np.int32)
            else:
                encoded = column.dictionary_encode()
                of_key = np.asarray([self._task(k, tasks_of) for k in encoded.dictionary.to_pylist()], dtype=np.int32)
                tasks = of_key[encoded.indices.to_numpy(zero_copy_only=False)]
            yield pa.RecordBatch.from_arrays(
                [pa.array(tasks), column, pa.array(times, pa.int64()), pa.array(np.full(n, partition, dtype=np.int32)),
                 pa.array(np.arange(seq, seq + n, dtype=np.int64))], names=["task", "key", "ts", "part", "seq"])  # fmt: skip
            seq += n
            keys.clear()
            times.clear()


#: A changed session in a micro-batch: [count, or None once removed; whether the store had it before].
_Dirty = list[Any]


class TaskSessions:
    """One Kafka Streams task's session counts: KStreamSessionWindowAggregate's algorithm over its
    session store (Kafka Streams' rule of retention) and its stream time, and the record cache's
    flush per micro-batch (the micro-batch being the commit)."""

    def __init__(self, gap: int, grace: int, retention: int) -> None:
        self.gap, self.grace, self.retention = gap, grace, retention
        #: key -> its sessions [start, end, count], in the order they were stored.
        self.sessions: dict[Any, list[list[int]]] = {}
        #: The task's stream time: the largest timestamp the aggregation received.
        self.observed = _NO_TIME
        #: The store's stream time: the largest session end it was given.
        self.stored = _NO_TIME
        #: Records dropped as late (Kafka Streams' dropped-records).
        self.dropped = 0
        #: The store's stream time at the last `expire()`.
        self._expired_at = _NO_TIME

    def live(self) -> int:
        """The number of sessions the store holds."""
        return sum(len(s) for s in self.sessions.values())

    def load(self, rows: Iterable[tuple[Any, int, int, int | None]]) -> None:
        """The store from its changelog rows (key, start, end, count or None: removed), in order."""
        sessions = self.sessions
        for key, start, end, n in rows:
            found = sessions.setdefault(key, [])
            found[:] = [s for s in found if s[0] != start or s[1] != end]
            if n is not None:
                found.append([start, end, n])
                found.sort(key=_by_end)
                self.stored = max(self.stored, end)
            elif not found:
                del sessions[key]

    def expire(self) -> None:
        """Drop the sessions past retention (the store no longer returns them)."""
        self._expired_at = self.stored
        cutoff = self.stored - self.retention
        for key in [k for k, found in self.sessions.items() if any(s[1] <= cutoff for s in found)]:
            kept = [s for s in self.sessions[key] if s[1] > cutoff]
            if kept:
                self.sessions[key] = kept
            else:
                del self.sessions[key]

    def process(self, keys: list[Any], stamps: list[int]) -> dict[tuple[Any, int, int], _Dirty]:
        """The records (in the task's order) through the aggregation; the sessions they changed, in
        the record cache's order (last write last): (key, start, end) -> [count or None, stored before].

        A key's sessions are kept by end; those the store still returns do not overlap, so the ones a
        record merges (end >= t - gap, start <= t + gap) are consecutive, found from the latest back."""
        gap, grace, retention = self.gap, self.grace, self.retention
        sessions = self.sessions
        dirty: dict[tuple[Any, int, int], _Dirty] = {}
        pop = dirty.pop
        observed, stored, dropped = self.observed, self.stored, self.dropped
        for key, t in zip(keys, stamps, strict=True):
            if t > observed:
                observed = t
            found = sessions.get(key)
            start = end = t
            n = 0
            i = j = 0
            if found:
                # find_sessions(key, t - gap, t + gap) of a store keeping the sessions ending after stored - retention
                earliest = t - gap
                if stored - retention >= earliest:
                    earliest = stored - retention + 1
                latest = t + gap
                i = len(found)
                while i and found[i - 1][0] > latest:
                    i -= 1
                j = i
                while j and found[j - 1][1] >= earliest:
                    j -= 1
                    s = found[j]
                    n += s[2]
                    if s[0] < start:
                        start = s[0]
                    if s[1] > end:
                        end = s[1]
            if end < observed - grace - gap:
                dropped += 1
                log.debug("session count: skipping a late record: key=%r timestamp=%d stream time=%d", key, t, observed)
                continue
            if found is None:
                found = sessions[key] = []
            n += 1
            if end > stored:
                stored = end
            if start == t and end == t and i > j:  # the session [t, t] itself: overwritten
                found[j][2] = n
                below = True
            else:
                for s in found[j:i]:  # merged away, in the store's order (by end)
                    session = (key, s[0], s[1])
                    entry = pop(session, None)
                    if entry is None:
                        dirty[session] = [None, True]
                    elif entry[1]:
                        entry[0] = None
                        dirty[session] = entry
                    # else: created and merged away within the micro-batch, never forwarded
                del found[j:i]
                if end > stored - retention:  # else the store drops it as expired (it is forwarded all the same)
                    found.insert(j, [start, end, n])
                below = False
            session = (key, start, end)
            entry = pop(session, None)
            if entry is None:
                entry = [n, below]
            else:
                entry[0] = n
            dirty[session] = entry
        self.observed, self.stored, self.dropped = observed, stored, dropped
        if stored - self._expired_at > retention:
            self.expire()
        return dirty

    @staticmethod
    def flushed(dirty: Mapping[tuple[Any, int, int], _Dirty]) -> list[tuple[Any, int, int, int | None]]:
        """What the cache's flush forwards: each changed session's count; a removed one's tombstone only
        if the store had it before the micro-batch (one created and merged away within it: nothing)."""
        return [(key, start, end, n) for (key, start, end), (n, below) in dirty.items() if n is not None or below]


def _by_end(session: list[int]) -> tuple[int, int]:
    return session[1], session[0]


class SessionTask(StatefulProcessor):
    """`transformWithStateInPandas` processor grouped by task: the task's rows of the micro-batch in
    Kafka Streams' order through its `TaskSessions`; out the record cache's flush through the tail
    and sinks (`SessionOutput`): Kafka sink rows (topic, key, value).

    State: `sessions`, the session store's changelog rows (key, start, end, count; None: removed)
    as Arrow IPC streams, one appended per micro-batch and rewritten as one with the live sessions
    once twice as long (PySpark serializes list-state rows one by one: 130,000 rows took 5.8 s);
    `task`, its stream times, dropped records, and the version the Python worker's live copy matches.
    """

    def __init__(self, session: SessionCount, key_type: str, output: SessionOutput) -> None:
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
        frame = pd.concat(list(rows), ignore_index=True)
        order = kafka_order_of(frame["part"].to_numpy(), frame["seq"].to_numpy(), frame["ts"].to_numpy())
        saved = self._task.get()
        observed, stored, dropped, logged, version, lineage = saved if saved else (
            _NO_TIME, _NO_TIME, 0, 0, 0, uuid.uuid4().hex)  # fmt: skip
        slot = (lineage, int(task))
        live = _live.pop(slot, None)
        if live is not None and live[0] == version:
            sessions = live[1]
        else:
            session = self.session
            sessions = TaskSessions(session.gap, session.grace, session.retention)
            if saved:
                sessions.load(row for (chunk,) in self._log.get() for row in _read_rows(chunk))
            sessions.observed, sessions.stored, sessions.dropped = int(observed), int(stored), int(dropped)
            sessions.expire()
        dirty = sessions.process(frame["key"].to_numpy()[order].tolist(), frame["ts"].to_numpy()[order].tolist())
        out = sessions.flushed(dirty)
        logged = self._log_changes(sessions, dirty, int(logged))
        version = int(version) + 1
        self._task.update((sessions.observed, sessions.stored, sessions.dropped, logged, version, lineage))
        _live[slot] = (version, sessions)
        while len(_live) > _MAX_LIVE:
            _live.popitem(last=False)
        if out:
            yield self.output.written(out)

    def _log_changes(self, sessions: TaskSessions, dirty: Mapping[tuple[Any, int, int], _Dirty], logged: int) -> int:
        """The micro-batch's store changes appended to the changelog in Spark state in one call, or the
        changelog rewritten with the live sessions once it holds more than twice as many; its new length."""
        cutoff = sessions.stored - sessions.retention
        changes = [(key, start, end, n) for (key, start, end), (n, below) in dirty.items()
                   if (n is None and below) or (n is not None and end > cutoff)]  # fmt: skip
        if not changes:
            return logged
        live = sessions.live()
        if logged + len(changes) <= 2 * live + _COMPACT_SLACK:
            self._log.appendList([(self._rows_bytes(changes),)])
            return logged + len(changes)
        sessions.expire()
        rows = [(key, s, e, n) for key, found in sessions.sessions.items() for s, e, n in found]
        if rows:
            self._log.put([(self._rows_bytes(rows),)])
        else:
            self._log.clear()
        return len(rows)

    def _rows_bytes(self, rows: Sequence[tuple[Any, int, int, int | None]]) -> bytes:
        """Changelog rows as one Arrow IPC stream (key, start, end, n)."""
        import pyarrow as pa

        keys, starts, ends, counts = zip(*rows, strict=True)
        table = pa.table({"key": pa.array(keys, pa.string() if self.key_type == "string" else pa.binary()),
                          "start": pa.array(starts, pa.int64()), "end": pa.array(ends, pa.int64()),
                          "n": pa.array(counts, pa.int64())})  # fmt: skip
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return bytes(sink.getvalue().to_pybytes())

    def close(self) -> None:
        """The live sessions stay for the next micro-batch."""


def _read_rows(chunk: bytes) -> Iterator[tuple[Any, int, int, int | None]]:
    """The changelog rows of one Arrow IPC stream in Spark state."""
    import pyarrow as pa

    table = pa.ipc.open_stream(pa.py_buffer(bytes(chunk))).read_all()
    return zip(*(table.column(c).to_pylist() for c in ("key", "start", "end", "n")), strict=True)


class SessionOutput(WindowOutput):
    """The flushed sessions (key, start, end, count or None) as Kafka sink rows: each as
    `Windowed(key, SessionWindow(start, end))` and count (None: a tombstone) through `to_stream()`'s
    fused operators and the sinks (their serdes), with the session end as timestamp. Called by
    `SessionTask`, so the tail runs in the same Python worker (no second pass over Arrow)."""

    _built: Any = None  # (the sinks' collector, the tail's runs), built on the executor

    def _tail(self) -> Any:
        return _session(self.native)

    def written(self, flushed: Iterable[tuple[Any, int, int, int | None]]) -> Any:
        """The Kafka sink's rows (topic, key, value) of the flushed sessions, as a pandas frame."""
        import pandas as pd

        from streams_core.spark.native_window_count import _Rows

        if self._built is None:
            rows = _Rows()
            self._built = rows, self._runs(rows)
        rows, runs = self._built
        deserialize = None if self.native.string_keys else self.native.key_serde.deserialize
        topic = self.key_topic
        for key, start, end, count in flushed:
            windowed = Windowed(key if deserialize is None else deserialize(topic, key), SessionWindow(start, end))
            for run in runs:
                run(windowed, count, end, ())
        frame = pd.DataFrame({"topic": rows.topics, "key": rows.keys, "value": rows.values})
        rows.topics, rows.keys, rows.values = [], [], []
        return frame


#: (lineage, task) -> (version, the task's sessions) after its last micro-batch.
_live: OrderedDict[tuple[str, int], tuple[int, TaskSessions]] = OrderedDict()
