"""Spark gives a timestamp extractor the partition time the driver and the runtime give: Kafka
Streams' rule (tests/unit/runtime/test_partition_time.py; docs/runtime.md, "Stream time").

The first test runs the executor Spark's Python workers run, without Spark; the second runs one
topology on Spark, on KafkaStreams and in the TopologyTestDriver over the same input and
compares what the extractor gave (the records carry it in their timestamps)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from streams_core import Processor, ProcessorContext, Record, Serdes, Topology, TopologyTestDriver
from streams_core.processor.consumer_record import ConsumerRecord
from streams_core.spark import SparkRunner
from streams_core.spark.subtopology_executor import InputRow, SubtopologyExecutor
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import BASE_TS, run_asyncio_to_end
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


INPUT = {0: ["?", "5", "3", "?", "8", "2", "?"], 1: ["9", "?", "1", "?"]}
"""Per input partition: a number n is the timestamp BASE_TS + n; "?" asks for the partition time."""

SEEN = {0: ["?@0", "5@5", "3@3", "?@6", "8@8", "2@2", "?@9"], 1: ["9@9", "?@10", "1@1", "?@11"]}
"""value@(timestamp - BASE_TS): a "?" got the partition time + 1 (BASE_TS while it was unknown)."""


class PartitionTimeProbe:
    """A number's timestamp, or for "?" the partition time it was given + 1 (BASE_TS when unknown)."""

    def __init__(self, base: int) -> None:
        self.base = base

    def extract(self, record: ConsumerRecord, partition_time: int) -> int:
        if record.value == "?":
            return partition_time + 1 if partition_time >= 0 else self.base
        return self.base + int(record.value)


class ShowTimestamp(Processor[str, str, str, str]):
    """Forwards value@(timestamp - base): the output shows what the extractor returned."""

    def __init__(self, base: int) -> None:
        self.base = base

    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context = context

    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_value(f"{record.value}@{record.timestamp - self.base}"))


def probe_topology(source: str, output: str) -> Topology:
    s = Serdes.String()
    return (
        Topology()
        .add_source("S", source, key_serde=s, value_serde=s, timestamp_extractor=PartitionTimeProbe(BASE_TS))
        .add_processor("P", lambda: ShowTimestamp(BASE_TS), "S")
        .add_sink("K", output, "P", key_serde=s, value_serde=s)
    )


async def test_spark_the_runtime_and_the_driver_give_extractors_the_same_partition_time(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    suffix = unique_topic("ptime")
    source, outputs = f"in-{suffix}", {"spark": f"spark-{suffix}", "asyncio": f"asyncio-{suffix}"}
    await create_topic(bootstrap_servers, source, partitions=2)
    for topic in outputs.values():
        await create_topic(bootstrap_servers, topic, partitions=1)
    await produce(bootstrap_servers, source, [
        Rec(f"p{p}".encode(), value.encode(), partition=p, timestamp_ms=BASE_TS) for p, values in INPUT.items() for value in values
    ])
    runner = SparkRunner(probe_topology(source, outputs["spark"]),
                         {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers}, spark=spark)
    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    await run_asyncio_to_end(probe_topology(source, outputs["asyncio"]), f"asyncio-{suffix}", bootstrap_servers,
                             tmp_path / "state")
    expected = {f"p{p}": values for p, values in SEEN.items()}
    for engine, topic in outputs.items():
        seen: dict[str, list[str]] = {}
        for record in await read_all(bootstrap_servers, topic):
            seen.setdefault((record.key or b"").decode(), []).append((record.value or b"").decode())
        assert seen == expected, engine
    with TopologyTestDriver(probe_topology(source, "out")) as driver:
        pipe = driver.create_input_topic(source, Serdes.String(), Serdes.String())
        for value in INPUT[0]:
            pipe.pipe_input("p0", value, BASE_TS)
        assert driver.create_output_topic("out", Serdes.String(), Serdes.String()).read_values_to_list() == SEEN[0]
