"""The executor Spark calls, without Spark: same bytes as the runtime, Kafka Streams' order, replays skipped."""

from __future__ import annotations

from typing import Any

from app.wordcount import build_topology
from streams_core.spark import SparkRunner
from streams_core.spark.subtopology_executor import (
    ORIGIN_HEADER,
    TIMESTAMP_HEADER,
    InputRow,
    SubtopologyExecutor,
    kafka_order,
)

CONFIG = {"application.id": "exec", "bootstrap.servers": "127.0.0.1:9"}


def queries() -> Any:
    return SparkRunner(build_topology("lines", "counts", windowed=False), CONFIG).plan().queries


def test_the_stateless_stage_writes_what_the_runtime_writes_with_the_runner_headers() -> None:
    first, _ = queries()
    executor = SubtopologyExecutor(first.spec)
    try:
        out = executor.process([InputRow("lines", 2, 7, 1234, b"k", b"Hello hello", ())])
    finally:
        executor.close()
    assert [(r.topic, r.key, r.value) for r in out] == [("exec-word-count-repartition", b"hello", b"hello")] * 2
    for index, row in enumerate(out):
        headers = dict(row.headers)
        assert int.from_bytes(headers[TIMESTAMP_HEADER], "big") == 1234
        assert headers[ORIGIN_HEADER][:16] == (2).to_bytes(4, "big") + (7).to_bytes(8, "big") + index.to_bytes(4, "big")
        assert headers[ORIGIN_HEADER][16:] == b"lines"


def test_the_keyed_stage_skips_records_written_twice_by_a_rerun_upstream_query() -> None:
    first, second = queries()
    upstream = SubtopologyExecutor(first.spec)
    counter = SubtopologyExecutor(second.spec)
    try:
        written = upstream.process([InputRow("lines", 0, offset, 10 + offset, None, b"a b a", ()) for offset in range(2)])
        as_read = [InputRow(r.topic, 0, i, 99, r.key, r.value, tuple(r.headers)) for i, r in enumerate(written)]
        replayed = as_read + [InputRow(r.topic, r.partition, r.offset + len(as_read), 99, r.key, r.value, r.headers) for r in as_read]
        a_rows = [r for r in replayed if r.key == b"a"]
        applied: dict[Any, Any] = {}
        counter.stores["word-count"].load({})
        out = counter.process(a_rows, applied)
    finally:
        upstream.close()
        counter.close()
    assert [int.from_bytes(r.value or b"", "big") for r in out] == [1, 2, 3, 4], "the replayed copies are skipped"
    assert all(not r.headers for r in out), "no runner headers on the output topic"
    assert applied == {("lines", 0): (1, 2)}


def test_kafka_order_is_offset_order_per_partition_and_timestamp_order_across() -> None:
    rows = [InputRow("t", 0, 2, 50, None, None, ()), InputRow("t", 1, 0, 20, None, None, ()),
            InputRow("t", 0, 1, 30, None, None, ()), InputRow("u", 0, 5, 10, None, None, ())]
    assert [(r.topic, r.partition, r.offset) for r in kafka_order(rows)] == [("u", 0, 5), ("t", 1, 0), ("t", 0, 1), ("t", 0, 2)]
