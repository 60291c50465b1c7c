"""A task's Kafka rows through Spark's shuffle as Arrow IPC blobs: one row per task and Arrow batch.

A `groupBy(partition).transformWithStateInPandas` stage hands its step every record as a row:
Spark shuffles and sorts each one, and PySpark turns the Arrow batches it gets into pandas rows
one by one (`itertuples`) and back into frames per group. A step that reads its rows as columns
needs none of that. `PackRows` (a `mapInArrow` before the shuffle) writes each Arrow batch of
Kafka rows as one row per task, (partition, the batch as an Arrow IPC stream); the step gets its
task's blobs and any rows it held (`unpacked`) and takes the rows to process now in
PartitionGroup's order (`ready_rows`, the rule of partition_group.take_ready over columns).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streams_core.spark.stream_join_arrays import ready_order, table_from_ipc, table_to_ipc

__all__ = ["PACKED_SCHEMA", "ROW_COLUMNS", "PackRows", "held_blob", "ready_rows", "unpacked"]

#: The source columns a packed blob holds (the timestamp in ms).
ROW_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value")
ROW_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                        ("timestamp", pa.int64()), ("key", pa.binary()), ("value", pa.binary())])  # fmt: skip
#: What `PackRows` gives Spark: the task (the source partition) and the rows' blob.
PACKED_SCHEMA = "partition int, rows binary"


class PackRows:
    """`mapInArrow` function: each Arrow batch of Kafka rows (`ROW_COLUMNS`) as one row per task in it
    (a Kafka source partition is one topic partition, so usually one), the rows as an IPC blob."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if not batch.num_rows:
                continue
            partitions = batch.column("partition")
            tasks = pc.unique(partitions).to_pylist()
            parts = [batch] if len(tasks) == 1 else [batch.filter(pc.equal(partitions, t)) for t in tasks]
            blobs = [table_to_ipc(pa.Table.from_batches([part])) for part in parts]
            yield pa.RecordBatch.from_arrays([pa.array(tasks, pa.int32()), pa.array(blobs, pa.binary())],
                                             names=["partition", "rows"])  # fmt: skip


def unpacked(frames: Iterable[Any], held: Any) -> pa.Table | None:
    """The task's rows: those it held (an IPC blob; a list of `InputRow`s in the state of an earlier
    version; None: none) and its frames' blobs, as one table of `ROW_SCHEMA` (None: no rows)."""
    tables = []
    if isinstance(held, list):  # state written before the rows were packed
        tables.append(pa.Table.from_pylist([{name: getattr(row, name) for name in ROW_COLUMNS} for row in held], ROW_SCHEMA))
    elif held:
        tables.append(table_from_ipc(held))
    tables.extend(table_from_ipc(bytes(blob)) for frame in frames for blob in frame["rows"])
    tables = [t.select(list(ROW_COLUMNS)).cast(ROW_SCHEMA) for t in tables if len(t)]
    return pa.concat_tables(tables) if tables else None


def ready_rows(table: pa.Table | None, read: dict[tuple[str, int], int], waits: Any) -> tuple[pa.Table | None, pa.Table | None]:
    """(the rows to process now in PartitionGroup's order, the rows to hold): `ready_order` over the
    order columns. `read` (updated) is the highest offset read per partition."""
    import pandas as pd  # type: ignore[import-untyped]  # no stubs in the venv

    if table is None or not len(table):
        return None, None
    order = pd.DataFrame({name: table.column(name).to_numpy() for name in ("topic", "partition", "offset", "timestamp")})
    order["at"] = np.arange(len(table))
    ready, rest = ready_order(order, read, waits)

    def rows(frame: Any) -> pa.Table | None:
        return None if frame is None or not len(frame) else table.take(pa.array(frame["at"].to_numpy()))

    return rows(ready), rows(rest)


def held_blob(rest: pa.Table | None) -> bytes | None:
    """The rows a task holds, for its state (None: none)."""
    return None if rest is None or not len(rest) else table_to_ipc(rest)

