"""The partition time a timestamp extractor receives is Kafka Streams' (its `RecordQueue`): the
highest timestamp extracted so far from the record's partition, UNKNOWN (-1) before the first;
a dropped record (negative timestamp) does not count. The same topology gives the same values
through the TopologyTestDriver and the runtime (Spark: tests/spark/test_partition_time.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streams_core import Serdes, Topology
from streams_core.processor.consumer_record import ConsumerRecord
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.topology_test_driver import TopologyTestDriver

from .harness import eventually, running, streams_config

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


def partition_time_topology(extractor: Any) -> Topology:
    s = Serdes.String()
    return (
        Topology()
        .add_source("S", "in", key_serde=s, value_serde=s, timestamp_extractor=extractor)
        .add_sink("K", "out", "S", key_serde=s, value_serde=s)
    )


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
