"""The stream-stream join of one task and micro-batch over columns (native_stream_join.py's step).

Kafka Streams runs the join record by record: a record of one side probes the other side's window
store for its key within `[ts - before, ts + after]` (the right side: `[ts - after, ts + before]`),
each match forwarding `joiner(key, left, right)`, then is put in its own side's store. A store's
observed stream time is the largest timestamp put into it; it holds a record while
`ts > observed - retention` (a put at or below is dropped, a fetch does not see it). So a pair
(x, y) of one key is joined exactly when y came first in the task's order, its timestamp is
within x's window, and `ts(y) > observed(y's side, just before x) - retention` (which implies that
y was stored). With the observed times as running maxima over the task's order, that is a sorted
range search per record and a few array filters; the pairs come out sorted as Kafka Streams
forwards them: by the probing record's place, then the stored record's timestamp and arrival
(a window store with duplicates fetches by timestamp, then insertion).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute

from streams_core.spark.native_count import same_serde
from streams_core.spark.native_reduce import kafka_order_of

if TYPE_CHECKING:
    from streams_core.spark.native_stream_join import _Topology
    from streams_core.spark.stream_join_outer import Unmatched

__all__ = ["NO_TIME", "JoinBatch", "Side", "join_batch", "ready_order", "record_headers", "table_from_ipc", "table_to_ipc"]

#: A store's observed stream time before its first record (far below any timestamp, and minus a
#: retention still an int64).
NO_TIME = -(2**62)
_BUFFER = pa.schema([("side", pa.int8()), ("key", pa.binary()), ("ts", pa.int64()), ("pos", pa.int64()),
                     ("value", pa.binary())])  # fmt: skip


def table_to_ipc(table: Any) -> bytes:
    """A pyarrow table (or a pandas frame) as Arrow IPC stream bytes: Spark state holds no Python objects."""
    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def table_from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


class Side:
    """One side's window store: its live records (key bytes, timestamp, position, the store value
    serde's bytes; in arrival order) and its observed stream time."""

    def __init__(self, table: pa.Table, observed: int) -> None:
        self.table = table
        self.observed = observed
        #: The records this micro-batch stored (to append to Spark state), None once logged.
        self.added: pa.Table | None = None

    @staticmethod
    def restored(tables: list[pa.Table], observed: list[int], retention: int) -> list[Side]:
        """Both sides from the blobs in Spark state, without the records their stores no longer hold."""
        every = pa.concat_tables(tables) if tables else _BUFFER.empty_table()
        ts, side = every.column("ts").to_numpy(), every.column("side").to_numpy()
        return [Side(every.filter(pa.array((side == s) & (ts > observed[s] - retention))).drop_columns(["side"]), observed[s])
                for s in (0, 1)]  # fmt: skip

    @staticmethod
    def combined(sides: list[Side], added: bool = False) -> pa.Table:
        """Both sides' live (or just added) records as one table with a `side` column."""
        parts = []
        for s, side in enumerate(sides):
            table = side.added if added else side.table
            if table is not None and len(table):
                parts.append(table.add_column(0, "side", pa.array(np.full(len(table), s, np.int8))))
        return pa.concat_tables(parts) if parts else _BUFFER.empty_table()


@dataclass
class JoinBatch:
    """The records reaching the join in one micro-batch, in the task's order: side (0 left, 1 right),
    position, timestamp, the store key serde's bytes, the store value serde's bytes, key and value
    objects, headers (tuples of (key, value); None: none)."""

    side: Any
    pos: Any
    ts: Any
    key_bytes: pa.Array
    value_bytes: pa.Array
    keys: Any
    values: Any
    headers: Any

    def __len__(self) -> int:
        return len(self.pos)

    @property
    def joinable(self) -> Any:
        """The records with a key and a value (the others reach only a left or outer join's stream time)."""
        nulls = pa.compute.or_(self.key_bytes.is_null(), self.value_bytes.is_null())
        return ~nulls.to_numpy(zero_copy_only=False)

    def subset(self, index: Any) -> JoinBatch:
        at = pa.array(index)
        return JoinBatch(self.side[index], self.pos[index], self.ts[index], self.key_bytes.take(at),
                         self.value_bytes.take(at), self.keys[index], self.values[index], self.headers[index])  # fmt: skip

    @staticmethod
    def from_lists(topology: _Topology) -> JoinBatch:
        """From what the chains reached each side with (`_Topology.reached`), keys and values serialized by the stores' serdes."""
        sides, positions, timestamps = [], [], []
        keys: list[Any] = []
        values: list[Any] = []
        headers: list[Any] = []
        values_bytes: list[bytes | None] = []
        key_serialize = topology.key_serde.serialize
        for s, (pos, ks, vs, ts, hs) in enumerate(topology.reached):
            headers.extend(hs)
            serialize, changelog = topology.value_serdes[s].serialize, topology.changelogs[s]
            sides.append(np.full(len(pos), s, np.int8))
            positions.append(np.asarray(pos, np.int64))
            timestamps.append(np.asarray(ts, np.int64))
            keys.extend(ks)
            values.extend(vs)
            values_bytes.extend(None if v is None else serialize(changelog, v) for v in vs)
        order = np.argsort(np.concatenate(positions), kind="stable")
        key_bytes = pa.array([None if k is None else key_serialize(topology.changelogs[0], k) for k in keys],
                             pa.binary()).take(pa.array(order))  # fmt: skip
        return JoinBatch(np.concatenate(sides)[order], np.concatenate(positions)[order], np.concatenate(timestamps)[order],
                         key_bytes, pa.array(values_bytes, pa.binary()).take(pa.array(order)),
                         _objects(keys)[order], _objects(values)[order], _objects(headers)[order])  # fmt: skip

    @staticmethod
    def from_columns(topology: _Topology, ready: Any) -> JoinBatch | None:
        """From the ready rows over columns, when every source feeds its side directly and its serdes'
        bytes are the store's (the String or Bytes serde); None if a column does not deserialize."""
        rows = ready
        sides = rows["topic"].map({t: s for t, (s, _, _, _) in topology.sources.items()}).to_numpy(np.int8)
        raw_keys, raw_values = pa.array(rows["key"], pa.binary()), pa.array(rows["value"], pa.binary())
        keys, values = _objects([None] * len(rows)), _objects([None] * len(rows))
        values_bytes = raw_values
        for topic, (s, source, _, _) in topology.sources.items():
            mask = (rows["topic"] == topic).to_numpy()
            if not mask.any():
                continue
            at = pa.array(np.nonzero(mask)[0])
            decoded = [_decoded(raw_keys.take(at), source.key_serde), _decoded(raw_values.take(at), source.value_serde)]
            if decoded[0] is None or decoded[1] is None:
                return None
            keys[mask], values[mask] = decoded
            if not same_serde(source.value_serde, topology.value_serdes[s]):
                serialize, changelog = topology.value_serdes[s].serialize, topology.changelogs[s]
                serialized = np.array(values_bytes.to_pylist(), dtype=object)
                serialized[mask] = [None if v is None else serialize(changelog, v) for v in decoded[1]]
                values_bytes = pa.array(serialized.tolist(), pa.binary())
        pos = topology.position + np.arange(len(rows), dtype=np.int64)
        topology.position += len(rows)
        headers = _objects(map(record_headers, rows["headers"])) if "headers" in rows else _objects([None] * len(rows))
        return JoinBatch(sides, pos, rows["timestamp"].to_numpy(np.int64), raw_keys, values_bytes, keys, values, headers)


def _objects(items: Iterable[Any]) -> Any:
    """A 1-d numpy object array (tuples stay elements)."""
    items = list(items)
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


def _decoded(column: pa.Array, serde: Any) -> list[Any] | None:
    """A String column's strings (None: not UTF-8), or a Bytes column's bytes."""
    from streams_core.serde import Serdes

    if same_serde(serde, Serdes.Bytes()):
        values: list[Any] = column.to_pylist()
        return values
    try:
        strings: list[Any] = column.cast(pa.string()).to_pylist()
        return strings
    except pa.ArrowInvalid:
        return None


def ready_order(frame: Any, read: dict[tuple[str, int], int], waits: Mapping[tuple[str, int], int]) -> tuple[Any, Any]:
    """(the rows to process now in PartitionGroup's order, the rows to hold): `partition_group.take_ready`
    over columns. `read` (updated) is the highest offset read per partition; processing stops after
    the last row of a partition with unread data (below its `waits` offset)."""
    import pandas as pd  # type: ignore[import-untyped]  # no stubs in the venv

    if not len(frame):
        return None, None
    for (topic, partition), offset in frame.groupby(["topic", "partition"])["offset"].max().items():
        read[(topic, int(partition))] = max(read.get((topic, int(partition)), -1), int(offset))
    codes, topics = pd.factorize(frame["topic"])  # the task's partitions: one per topic, all of one number
    uniques = [(str(t), int(frame["partition"].iat[0])) for t in topics]
    present = set(uniques)
    unread = {tp for tp, last in waits.items() if read.get(tp, -1) < last}
    if unread - present:
        return None, frame
    order = kafka_order_of(np.asarray(codes, np.int64), frame["offset"].to_numpy(np.int64), frame["timestamp"].to_numpy(np.int64))
    cut = len(order)
    if unread:
        place = np.empty(len(order), np.int64)
        place[order] = np.arange(len(order))
        for i, (topic, partition) in enumerate(uniques):
            if (str(topic), int(partition)) in unread:
                cut = min(cut, int(place[codes == i].max()) + 1)
    return frame.iloc[order[:cut]], frame.iloc[order[cut:]]


def _ranges(c_kid: Any, c_ts: Any, kid: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
    """For candidates sorted by (key id, timestamp), each probe's [start, end) of its key's candidates with lo <= ts <= hi."""
    if not len(c_ts) or not len(kid):
        return np.zeros(len(kid), np.int64), np.zeros(len(kid), np.int64)
    tmin, tmax = int(c_ts.min()) - 1, int(c_ts.max()) + 1
    lo, hi, cts = np.clip(lo, tmin, tmax) - tmin, np.clip(hi, tmin, tmax) - tmin, c_ts - tmin
    span = tmax - tmin + 1
    if (int(max(c_kid.max(), kid.max())) + 1) * span >= 2**62:  # rank the times instead
        times = np.unique(np.concatenate([cts, lo, hi]))
        cts, lo, hi = (np.searchsorted(times, a) for a in (cts, lo, hi))
        span = len(times)
    combined = c_kid * span + cts
    return np.searchsorted(combined, kid * span + lo, "left"), np.searchsorted(combined, kid * span + hi, "right")


def join_batch(topology: _Topology, sides: list[Side], every: JoinBatch, unmatched: Unmatched | None = None) -> Any:
    """The micro-batch's joined records as the sinks' (topic, key, value, headers) pandas frame (None:
    none); `sides` (and a left or outer join's `unmatched`) updated with what their stores hold after it."""
    join = topology.join
    retention = join.retention
    if not len(every):
        return None
    joinable = np.nonzero(every.joinable)[0]
    batch = every if len(joinable) == len(every) else every.subset(joinable)
    runs = []  # per side: its store's observed time after each record of the batch
    for s in (0, 1):
        run = np.maximum.accumulate(np.where(batch.side == s, batch.ts, NO_TIME))
        runs.append(np.maximum(run, sides[s].observed))
    every_key = pa.concat_arrays([sides[0].table.column("key").combine_chunks(), sides[1].table.column("key").combine_chunks(),
                                  batch.key_bytes])  # fmt: skip
    kid = every_key.dictionary_encode().indices.to_numpy().astype(np.int64)
    n0, n1 = len(sides[0].table), len(sides[1].table)
    buffered_kid, batch_kid = [kid[:n0], kid[n0:n0 + n1]], kid[n0 + n1:]
    parts = []
    for s in (0, 1):  # the probing side
        o = 1 - s
        before, after = (join.before, join.after) if s == 0 else (join.after, join.before)
        own, other = np.nonzero(batch.side == s)[0], np.nonzero(batch.side == o)[0]
        stored = sides[o].table
        c_kid = np.concatenate([buffered_kid[o], batch_kid[other]])
        c_ts = np.concatenate([stored.column("ts").to_numpy(), batch.ts[other]])
        c_pos = np.concatenate([stored.column("pos").to_numpy(), batch.pos[other]])
        by_key = np.lexsort((c_pos, c_ts, c_kid))
        ts = batch.ts[own]
        start, end = _ranges(c_kid[by_key], c_ts[by_key], batch_kid[own], np.maximum(0, ts - before), np.maximum(0, ts + after))
        counts = np.maximum(end - start, 0)
        x = np.repeat(own, counts)
        y = by_key[np.repeat(start - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))]
        found = (c_pos[y] < batch.pos[x]) & (c_ts[y] > runs[o][x] - retention)
        x, y = x[found], y[found]
        stored_values = pa.concat_arrays([stored.column("value").combine_chunks(), batch.value_bytes.take(pa.array(other))])
        theirs = _deserialized(stored_values.take(pa.array(y)), topology.value_serdes[o], topology.changelogs[o])
        ours = batch.values[x]
        left, right = (ours, theirs) if s == 0 else (theirs, ours)
        joiner, keys = topology.joiner, batch.keys[x]
        joined = [joiner(k, a, b) for k, a, b in zip(keys, left, right, strict=True)]
        parts.append((x, c_ts[y], c_pos[y], joined))
    _store(sides, batch, runs, retention)
    x = np.concatenate([p[0] for p in parts])
    y_ts, y_pos = np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])
    order = np.lexsort((y_pos, y_ts, batch.pos[x]))
    joined = _objects([v for p in parts for v in p[3]])[order]
    x, y_ts = x[order], y_ts[order]
    if unmatched is not None:
        records = unmatched.run(topology, every, joinable[x], y_ts, 1 - batch.side[x], joined)
        return _through_tail(topology, *records) if records[0] else None
    if not len(x):
        return None
    return _written(topology, batch, x, np.maximum(batch.ts[x], y_ts), joined)


def record_headers(raw: Any) -> tuple[tuple[str, bytes], ...] | None:
    """A Kafka row's headers (Spark's array of key/value structs) as the runtime's tuple; None for none."""
    if raw is None or not len(raw):
        return None
    return tuple((h["key"], h["value"]) for h in raw)


def _headers_column(headers: Any) -> list[Any]:
    """Headers tuples as the Kafka sink's array of structs (an empty array for none)."""
    return [[] if h is None else [{"key": k, "value": v} for k, v in h] for h in headers]


def _store(sides: list[Side], batch: JoinBatch, runs: list[Any], retention: int) -> None:
    """Each side's store after the batch: its records still live by its observed time (records put
    below it were dropped on arrival, and are below it now)."""
    for s, side in enumerate(sides):
        mine = np.nonzero(batch.side == s)[0]
        if not len(mine):
            continue
        observed = int(runs[s][-1])
        new = pa.table({"key": batch.key_bytes.take(pa.array(mine)), "ts": batch.ts[mine], "pos": batch.pos[mine],
                        "value": batch.value_bytes.take(pa.array(mine))})  # fmt: skip
        new = new.filter(pa.array(batch.ts[mine] > observed - retention))
        kept = side.table.filter(pa.array(side.table.column("ts").to_numpy() > observed - retention))
        side.table, side.added, side.observed = pa.concat_tables([kept, new]), new, observed


def _deserialized(column: pa.Array, serde: Any, topic: str) -> Any:
    """The stored values as the join reads them back from its store (the serde's round trip)."""
    from streams_core.serde import Serdes

    if same_serde(serde, Serdes.String()):
        return _objects(column.cast(pa.string()).to_pylist())
    deserialize = serde.deserialize
    return _objects(None if b is None else deserialize(topic, b) for b in column.to_pylist())


def _written(topology: _Topology, batch: JoinBatch, x: Any, timestamps: Any, joined: Any) -> Any:
    """The joined records through what follows the join, as the sinks' (topic, key, value) frame."""
    from streams_core.serde import Serdes

    sink = topology.direct_sink
    if sink is not None:
        topic = str(sink.topic)
        if same_serde(sink.key_serde, topology.key_serde) and any(
                same_serde(sink.key_serde, s) for s in (Serdes.String(), Serdes.Bytes())):  # fmt: skip
            keys = batch.key_bytes.take(pa.array(x))
        else:
            serialize = sink.key_serde.serialize
            keys = pa.array([None if k is None else serialize(topic, k) for k in batch.keys[x]], pa.binary())
        values = None
        if same_serde(sink.value_serde, Serdes.String()):
            try:
                values = pa.array(joined, pa.string()).cast(pa.binary())
            except (pa.ArrowTypeError, pa.ArrowInvalid):
                values = None  # the serde raises its own error below
        if values is None:
            serialize = sink.value_serde.serialize
            values = pa.array([None if v is None else serialize(topic, v) for v in joined], pa.binary())
        frame = pa.table({"topic": pa.array(np.full(len(x), topic, object), pa.string()), "key": keys,
                          "value": values}).to_pandas()  # fmt: skip
        frame["headers"] = _headers_column(batch.headers[x])
        return frame
    return _through_tail(topology, batch.keys[x], joined, timestamps.tolist(), batch.headers[x])


def _through_tail(topology: _Topology, keys: Any, values: Any, timestamps: Any, headers: Any) -> Any:
    """Output records through the fused operators after the join and the sinks' serdes, one by one."""
    import pandas as pd

    for items in topology.out:
        items.clear()
    tail = topology.tail
    for key, value, timestamp, record_headers in zip(keys, values, timestamps, headers, strict=True):
        tail(key, value, timestamp, record_headers or ())
    topics, keys_out, values_out, all_headers = topology.out
    return pd.DataFrame({"topic": topics, "key": keys_out, "value": values_out, "headers": _headers_column(all_headers)})
