"""take_ready: Kafka Streams' PartitionGroup choice across Spark micro-batches (no Spark, no broker)."""

from __future__ import annotations

from streams_core.spark.partition_group import take_ready
from streams_core.spark.subtopology_executor import InputRow


def row(topic: str, offset: int, timestamp: int, partition: int = 0) -> InputRow:
    return InputRow(topic, partition, offset, timestamp, f"{topic}{offset}".encode(), b"v", ())


def names(rows: list[InputRow]) -> list[str]:
    return [f"{r.topic}{r.offset}" for r in rows]


def test_without_unread_partitions_the_lowest_head_goes_first() -> None:
    read: dict[tuple[str, int], int] = {}
    ready, held = take_ready([], [row("a", 0, 5), row("b", 0, 1), row("a", 1, 2), row("b", 1, 9)], read, {})
    assert names(ready) == ["b0", "a0", "a1", "b1"], "heads by timestamp; offset order within a partition"
    assert held == [] and read == {("a", 0): 1, ("b", 0): 1}


def test_stream_records_wait_for_the_table_partition_read_behind_them() -> None:
    # The table topic's partition ends at offset 3 and only offsets 0-1 came in this micro-batch:
    # the orders after customers' offset 1 wait, whatever their timestamps.
    read: dict[tuple[str, int], int] = {}
    waits = {("customers", 0): 3, ("orders", 0): 2}
    first = [row("customers", 0, 1), row("customers", 1, 2), row("orders", 0, 10), row("orders", 1, 11), row("orders", 2, 12)]
    ready, held = take_ready([], first, read, waits)
    assert names(ready) == ["customers0", "customers1"]
    assert names(held) == ["orders0", "orders1", "orders2"]
    ready, held = take_ready(held, [row("customers", 2, 3), row("customers", 3, 4)], read, waits)
    assert names(ready) == ["customers2", "customers3", "orders0", "orders1", "orders2"]
    assert held == []


def test_a_partition_never_read_holds_everything_and_a_caught_up_one_does_not() -> None:
    read: dict[tuple[str, int], int] = {}
    ready, held = take_ready([], [row("orders", 0, 10)], read, {("customers", 0): 0, ("orders", 0): 0})
    assert ready == [] and names(held) == ["orders0"]
    ready, held = take_ready(held, [row("customers", 0, 50)], read, {("customers", 0): 0, ("orders", 0): 0})
    assert names(ready) == ["orders0", "customers0"], "both read to their ends: by timestamp"


def test_the_task_stops_when_a_partition_with_unread_data_runs_empty() -> None:
    read: dict[tuple[str, int], int] = {}
    waits = {("customers", 0): 5, ("orders", 0): 1}
    ready, held = take_ready([], [row("customers", 0, 1), row("orders", 0, 2), row("customers", 1, 3), row("orders", 1, 4)],
                             read, waits)
    assert names(ready) == ["customers0", "orders0", "customers1"], "customers ran empty at offset 1 of 5"
    assert names(held) == ["orders1"]


def test_a_read_back_topics_event_time_header_orders_it_not_the_produce_time() -> None:
    from streams_core.spark.subtopology_executor import TIMESTAMP_HEADER

    stamped = InputRow("repartition", 0, 0, 999, b"k", b"v", ((TIMESTAMP_HEADER, (5).to_bytes(8, "big")),))
    ready, _ = take_ready([], [row("table", 0, 7), stamped], {}, {})
    assert names(ready) == ["repartition0", "table0"], "event time 5 (header) before 7, though produced at 999"
