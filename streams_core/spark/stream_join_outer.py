"""Left and outer stream-stream joins: the unmatched records of one task, record by record.

The pairs come from the columns step (stream_join_arrays.py); what a left or outer join adds is
sequential by nature, so it runs as the runtime's `KStreamKStreamJoin` does, over the task's
records in order: the join's stream time (the largest timestamp either side received, None keys
and values included), an outer side's record without a partner waiting in the shared store keyed
(timestamp, side, key) until stream time passes its window end plus grace (checked when a record
at stream time arrives, oldest first, with the oldest-waiting-time shortcut), a later partner
removing it, a record already past its window emitted at once, a None key on an outer side
emitted at once (KIP-962).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from streams_core.spark.native_stream_join import _Topology
    from streams_core.spark.stream_join_arrays import JoinBatch

__all__ = ["MAX_TIME", "Unmatched"]

MAX_TIME = sys.maxsize
#: One waiting record: (timestamp, side byte: 1 left, 0 right, as the store's key orders them, key bytes).
Entry = tuple[int, int, bytes]


class Unmatched:
    """The shared store of a task's unmatched records (entry -> the values' store bytes, in arrival
    order), the join's stream time and its oldest waiting time."""

    def __init__(self, stream_time: int = -1, min_time: int = MAX_TIME, blob: pa.Table | None = None) -> None:
        self.stream_time = stream_time
        self.min_time = min_time
        self.entries: dict[Entry, list[bytes]] = {}
        if blob is not None:
            for ts, side, key, value in zip(*(blob.column(c).to_pylist() for c in ("ts", "side", "key", "value")), strict=True):
                self.entries.setdefault((ts, side, key), []).append(value)

    def table(self) -> pa.Table:
        """The entries as columns (one row per value), for Spark state."""
        rows = [(ts, side, key, value) for (ts, side, key), values in self.entries.items() for value in values]
        ts, side, key, value = zip(*rows, strict=True) if rows else ((), (), (), ())
        return pa.table({"ts": pa.array(ts, pa.int64()), "side": pa.array(side, pa.int8()),
                         "key": pa.array(key, pa.binary()), "value": pa.array(value, pa.binary())})  # fmt: skip

    def run(self, topology: _Topology, batch: JoinBatch, x: Any, y_ts: Any, y_side: Any, joined: Any) -> tuple[list[Any], ...]:
        """The batch's output records in the runtime's order: (keys, values, timestamps, headers).

        `x`, `y_ts`, `y_side`, `joined`: the pairs (probing record's index in `batch`, the stored
        record's timestamp and side, the joiner's result), sorted as they are forwarded.
        """
        join, joiner = topology.join, topology.joiner
        keys: list[Any] = []
        values: list[Any] = []
        stamps: list[int] = []
        headers_out: list[Any] = []
        offsets = np.concatenate([[0], np.cumsum(np.bincount(x, minlength=len(batch)))]).tolist()
        y_ts_list, y_side_list = y_ts.tolist(), y_side.tolist()
        key_bytes = batch.key_bytes.to_pylist()
        value_bytes = batch.value_bytes.to_pylist()
        entries = self.entries
        for i, (side, ts, key, value, headers) in enumerate(zip(batch.side.tolist(), batch.ts.tolist(), batch.keys,
                                                                batch.values, batch.headers, strict=True)):  # fmt: skip
            outer = join.outer[side]
            if ts > self.stream_time:
                self.stream_time = ts
            if key is None or value is None:
                if outer and value is not None:  # KIP-962: emitted at once
                    keys.append(key)
                    values.append(joiner(key, value, None) if side == 0 else joiner(key, None, value))
                    stamps.append(ts)
                    headers_out.append(headers)
                continue
            if ts == self.stream_time:
                self._emit_closed(topology, headers, keys, values, stamps, headers_out)
            first, last = offsets[i], offsets[i + 1]
            if last > first:
                for p in range(first, last):
                    entries.pop((y_ts_list[p], 1 - y_side_list[p], key_bytes[i]), None)
                    keys.append(key)
                    values.append(joined[p])
                    stamps.append(max(ts, y_ts_list[p]))
                    headers_out.append(headers)
                continue
            if not outer:
                continue
            after = join.after if side == 0 else join.before
            if max(0, ts + after) < self.stream_time:  # its window has closed already
                keys.append(key)
                values.append(joiner(key, value, None) if side == 0 else joiner(key, None, value))
                stamps.append(ts)
                headers_out.append(headers)
                continue
            self.min_time = min(self.min_time, ts)
            entries.setdefault((ts, 1 - side, key_bytes[i]), []).append(value_bytes[i])
        return keys, values, stamps, headers_out

    def _emit_closed(self, topology: _Topology, headers: Any, keys: list[Any], values: list[Any], stamps: list[int],
                     headers_out: list[Any]) -> None:  # fmt: skip
        """The waiting records whose window and grace have passed, oldest first, with the headers of
        the record that closed them (`KStreamKStreamJoin._emit_non_joined`)."""
        join = topology.join
        if self.min_time + min(join.before, join.after) + join.grace >= self.stream_time:
            return
        self.min_time = MAX_TIME
        left_open = right_open = False
        emitted: list[Entry] = []
        for entry in sorted(self.entries):
            ts, side_byte, key_bytes = entry
            self.min_time = ts
            if left_open and right_open:
                break
            is_left = side_byte == 1
            if ts + (join.after if is_left else join.before) + join.grace >= self.stream_time:
                left_open, right_open = left_open or is_left, right_open or not is_left
                continue
            side = 0 if is_left else 1
            key = topology.key_serde.deserialize(topology.changelogs[side], key_bytes)
            serde, changelog = topology.value_serdes[side], topology.changelogs[side]
            for data in self.entries[entry]:
                value = serde.deserialize(changelog, data)
                keys.append(key)
                values.append(topology.joiner(key, value, None) if is_left else topology.joiner(key, None, value))
                stamps.append(ts)
                headers_out.append(headers)
            emitted.append(entry)
        for entry in emitted:
            del self.entries[entry]
