"""A task's Kafka rows packed per task before Spark's shuffle and read back in the task's order (packed_rows.py)."""

from __future__ import annotations

import pyarrow as pa

from streams_core.spark.packed_rows import ROW_SCHEMA, PackRows, held_blob, ready_rows, unpacked
from streams_core.spark.spark_rows import InputRow


def _batch(rows: list[tuple[str, int, int, int, bytes | None]]) -> pa.RecordBatch:
    """(topic, partition, offset, timestamp, key) rows with value b"v"."""
    columns = list(zip(*rows, strict=True)) or [()] * 5
    return pa.RecordBatch.from_arrays([pa.array(columns[0], pa.string()), pa.array(columns[1], pa.int32()),
                                       pa.array(columns[2], pa.int64()), pa.array(columns[3], pa.int64()),
                                       pa.array(columns[4], pa.binary()), pa.array([b"v"] * len(rows), pa.binary())],
                                      schema=ROW_SCHEMA)  # fmt: skip


def test_a_batch_is_one_row_per_task_and_the_task_takes_its_rows_in_partition_group_order() -> None:
    packed = list(PackRows()(iter([_batch([("a", 0, 5, 30, b"x"), ("a", 1, 7, 10, b"y"), ("a", 0, 6, 40, None)]),
                                   _batch([])])))  # fmt: skip
    (frame,) = [p.to_pandas() for p in packed]
    assert sorted(frame["partition"]) == [0, 1]
    task0 = frame[frame["partition"] == 0]
    # Task 0 holds one of topic b from before (an earlier layout's list of InputRows): b's head at
    # timestamp 35 goes between a's records at 30 and 40; then b's partition has unread data (up to
    # offset 9), so a's record after the cut is held again.
    held = [InputRow("b", 0, 8, 35, b"z", b"v", ())]
    read: dict[tuple[str, int], int] = {}
    ready, rest = ready_rows(unpacked([task0], held), read, {("b", 0): 9})
    assert ready is not None and rest is not None
    assert [(t, o) for t, o in zip(ready.column("topic").to_pylist(), ready.column("offset").to_pylist(), strict=True)] == [
        ("a", 5), ("b", 8)]  # fmt: skip
    assert rest.column("offset").to_pylist() == [6] and rest.column("key").to_pylist() == [None]
    assert read == {("a", 0): 6, ("b", 0): 8}
    # Without b's last record the held row waits again; once it comes, both run, in timestamp order.
    assert ready_rows(unpacked([], held_blob(rest)), read, {("b", 0): 9})[0] is None
    (late,) = [p.to_pandas() for p in PackRows()(iter([_batch([("b", 0, 9, 50, b"w")])]))]
    again, none = ready_rows(unpacked([late], held_blob(rest)), read, {("b", 0): 9})
    assert none is None and again is not None
    assert list(zip(again.column("topic").to_pylist(), again.column("offset").to_pylist(), strict=True)) == [("a", 6), ("b", 9)]
    assert ready_rows(unpacked([], None), read, {}) == (None, None)
