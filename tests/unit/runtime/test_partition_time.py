"""The partition time a timestamp extractor receives is Kafka Streams' (its `RecordQueue`): the
highest timestamp extracted so far from the record's partition, UNKNOWN (-1) before the first;
a dropped record (negative timestamp) does not count. The same topology gives the same values
through the TopologyTestDriver and the runtime (Spark: tests/spark/test_partition_time.py).
The runtime commits it with each offset and a new task continues from it (with stream time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams_core import Processor, ProcessorContext, Record, Serdes, Topology
from streams_core.common.topic_partition import TopicPartition
from streams_core.processor.consumer_record import ConsumerRecord
from streams_core.runtime.tasks.topic_partition_metadata import decode_partition_time
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.topology_test_driver import TopologyTestDriver

from .harness import APP, eventually, running, streams_config

VALUES = ["5", "3", "drop", "8", "2", "9"]
"""Record values: the timestamp the extractor returns ("drop": -1, so the record is dropped)."""

EXPECTED = [-1, 5, 5, 5, 8, 8]
"""What the extractor receives for each: the highest earlier timestamp of the partition."""


class RecordingExtractor:
    """Returns the timestamp written in the value and notes the partition time it was given."""

    def __init__(self) -> None:
        self.seen: dict[int, list[int]] = {}

    def extract(self, record: ConsumerRecord, partition_time: int) -> int:
        self.seen.setdefault(record.partition, []).append(partition_time)
        return -1 if record.value == "drop" else int(record.value)


class StreamTimeRecorder(Processor[str, str, str, str]):
    """Notes (partition, timestamp, the task's stream time) per record, and forwards it."""

    def __init__(self, seen: list[tuple[int, int, int]]) -> None:
        self.seen = seen

    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context = context

    def process(self, record: Record[str, str]) -> None:
        self.seen.append((self.context.partition, record.timestamp, self.context.current_stream_time_ms()))
        self.context.forward(record)


def partition_time_topology(extractor: Any, seen: list[tuple[int, int, int]] | None = None) -> Topology:
    s = Serdes.String()
    topology = Topology().add_source("S", "in", key_serde=s, value_serde=s, timestamp_extractor=extractor)
    parent = "S"
    if seen is not None:
        topology.add_processor("T", lambda: StreamTimeRecorder(seen), "S")
        parent = "T"
    return topology.add_sink("K", "out", parent, key_serde=s, value_serde=s)


def test_driver_gives_extractors_kafka_partition_time() -> None:
    extractor = RecordingExtractor()
    with TopologyTestDriver(partition_time_topology(extractor)) as driver:
        source = driver.create_input_topic("in", Serdes.String(), Serdes.String())
        for value in VALUES:
            source.pipe_input("k", value, 1)
        out = driver.create_output_topic("out", Serdes.String(), Serdes.String()).read_records_to_list()
    assert extractor.seen == {0: EXPECTED}
    assert [r.timestamp for r in out] == [5, 3, 8, 2, 9]
    assert driver.dropped_records == 1


async def test_runtime_gives_extractors_kafka_partition_time_within_a_fetched_batch(tmp_path: Path) -> None:
    """All records of each partition arrive in one fetch: each extractor call still sees the ones before it."""
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", 2)
    cluster.create_topic("out", 2)
    for value in VALUES:
        cluster.produce("in", "k", value, partition=0, timestamp=1)
    for value in reversed(VALUES):
        cluster.produce("in", "k", value, partition=1, timestamp=1)
    extractor = RecordingExtractor()
    async with running(cluster, partition_time_topology(extractor), streams_config(tmp_path)):
        await eventually(lambda: len(cluster.records("out", committed_only=False)) == 10, what="10 records out")
    assert extractor.seen == {0: EXPECTED, 1: [-1, 9, 9, 9, 9, 9]}


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_a_new_task_continues_partition_and_stream_time_from_the_committed_metadata(
    tmp_path: Path, guarantee: str
) -> None:
    """Kafka's StreamTask.initializeTaskTimeAndProcessorMetadata: the second run's tasks start from
    the partition times the first run committed, instead of UNKNOWN."""
    cluster = FakeKafkaCluster()
    cluster.create_topic("in", 2)
    cluster.create_topic("out", 2)
    config = streams_config(tmp_path, {"processing.guarantee": guarantee})
    in0, in1 = TopicPartition("in", 0), TopicPartition("in", 1)

    def produce(partition: int, *values: str) -> None:
        for value in values:
            cluster.produce("in", "k", value, partition=partition, timestamp=1)

    def committed_times() -> dict[TopicPartition, int]:
        return {tp: decode_partition_time(c.metadata) for tp, c in cluster.committed_with_metadata(APP).items()}

    produce(0, "5", "3", "8")
    produce(1, "4")
    first, seen = RecordingExtractor(), []
    async with running(cluster, partition_time_topology(first, seen), config):
        await eventually(lambda: len(cluster.records("out")) == 4, what="4 records out")
    assert cluster.committed(APP) == {in0: 3, in1: 1}
    assert committed_times() == {in0: 8, in1: 4}, "the highest timestamp processed of each partition"

    produce(0, "2", "9")
    produce(1, "1")
    second, seen = RecordingExtractor(), []
    async with running(cluster, partition_time_topology(second, seen), config):
        await eventually(lambda: len(cluster.records("out")) == 7, what="7 records out")
    assert second.seen == {0: [8, 8], 1: [4]}, "the extractor continues from the committed partition time"
    assert sorted(seen) == [(0, 2, 8), (0, 9, 9), (1, 1, 4)], "stream time starts at the committed partition time"
    assert committed_times() == {in0: 9, in1: 4}
