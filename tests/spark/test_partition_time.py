"""Spark's executor gives a timestamp extractor the partition time the driver and the runtime give
(tests/unit/runtime/test_partition_time.py): Kafka Streams' rule, over the rows of one micro-batch.

The executor is what Spark's Python workers run for a partition of a micro-batch; its partition
times live as long as the executor (one micro-batch of a stateless stage)."""

from __future__ import annotations

from streams_core.spark import SparkRunner
from streams_core.spark.subtopology_executor import InputRow, SubtopologyExecutor
from tests.unit.runtime.test_partition_time import EXPECTED, VALUES, RecordingExtractor, partition_time_topology

CONFIG = {"application.id": "partition-time", "bootstrap.servers": "127.0.0.1:9"}


def test_the_executor_gives_extractors_kafka_partition_time() -> None:
    (query,) = SparkRunner(partition_time_topology(RecordingExtractor()), CONFIG).plan().queries
    executor = SubtopologyExecutor(query.spec)
    try:
        extractor = executor._task.source_node("in").extract_timestamp.__self__  # the executor's own copy
        rows = [InputRow("in", 0, offset, 1, b"k", value.encode(), ()) for offset, value in enumerate(VALUES)]
        rows += [InputRow("in", 1, offset, 1, b"k", value.encode(), ()) for offset, value in enumerate(reversed(VALUES))]
        out = executor.process(rows)
    finally:
        executor.close()
    assert extractor.seen == {0: EXPECTED, 1: [-1, 9, 9, 9, 9, 9]}
    assert len(out) == 10
