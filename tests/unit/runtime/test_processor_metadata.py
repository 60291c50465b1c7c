"""A task's processor metadata (Kafka Streams' `ProcessorMetadata`): processors keep named longs
through the context, the task commits them with its offsets, and the next owner of the task
reads them back before its processors start; emit-on-window-close aggregations keep their last
close time there, so a restart emits no window twice. Over the fake clients; the broker test is
tests/integration/test_window_close_restart.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams_core import (
    EmitStrategy,
    Grouped,
    Materialized,
    Processor,
    ProcessorContext,
    Record,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
)
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.topic_partition import TopicPartition
from streams_core.processor.internals.processor_metadata import ProcessorMetadata
from streams_core.runtime.tasks.topic_partition_metadata import TopicPartitionMetadata
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeProducer
from tests.window_close_restart import EXPECTED, LAST_CLOSE_TIMES, RUNS, STORE, window_close_topology

from .harness import APP, eventually, running, streams_config, unlong

S = Serdes.String()

# -- ProcessorMetadata (Kafka's ProcessorMetadataTest) ------------------------------------------------


def test_put_get_and_serialize_round_trip() -> None:
    metadata = ProcessorMetadata({"key1": 1, "key2": 2})
    metadata.put("key3", 3)
    assert (metadata.get("key1"), metadata.get("key3"), metadata.get("nope")) == (1, 3, None)
    assert ProcessorMetadata.deserialize(metadata.serialize()) == metadata
    assert ProcessorMetadata().serialize() == b"" and ProcessorMetadata.deserialize(b"") == ProcessorMetadata()


def test_update_keeps_the_larger_value_of_each_key() -> None:
    merged = ProcessorMetadata()
    merged.update(ProcessorMetadata({"key1": 1, "key2": 2}))
    merged.update(ProcessorMetadata({"key1": 0, "key2": 3, "key3": -5}))
    assert merged == ProcessorMetadata({"key1": 1, "key2": 3, "key3": -5})


# -- a Processor API processor that keeps metadata ---------------------------------------------------


class MetadataKeeper(Processor[str, str, str, str]):
    """Notes what the context holds under "k", "x" and "missing" at init; puts each record's
    timestamp under "k" and forwards the record."""

    def __init__(self, seen: list[tuple[int | None, ...]]) -> None:
        self.seen = seen

    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context: Any = context
        self.seen.append(tuple(context.processor_metadata_for_key(k) for k in ("k", "x", "missing")))  # type: ignore[attr-defined]

    def process(self, record: Record[str, str]) -> None:
        self.context.add_processor_metadata_key_value("k", record.timestamp)
        self.context.forward(record)


def two_source_topology(seen: list[tuple[int | None, ...]]) -> Topology:
    """Sources "a" and "b" into one processor: one task reads a partition of each."""
    return (
        Topology()
        .add_source("A", "a", key_serde=S, value_serde=S)
        .add_source("B", "b", key_serde=S, value_serde=S)
        .add_processor("P", lambda: MetadataKeeper(seen), "A", "B")
        .add_sink("K", "out", "P", key_serde=S, value_serde=S)
    )


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_a_task_starts_from_the_largest_committed_value_and_commits_it_with_every_partition(
    tmp_path: Path, guarantee: str
) -> None:
    """Kafka's initializeTaskTimeAndProcessorMetadata merges the metadata of every partition (the
    larger value wins); the commit carries the whole map with every input partition, the one
    nothing was read from at the consumer's position (as Kafka's once a processor put a value)."""
    cluster = FakeKafkaCluster()
    for topic in ("a", "b", "out"):
        cluster.create_topic(topic, 1)
    a0, b0 = TopicPartition("a", 0), TopicPartition("b", 0)
    cluster.produce("b", "old", "old", timestamp=1)  # before the committed offset of b: not read again
    committer = FakeProducer(cluster, client_id="committer", transactional_id="committer")
    await committer.start()
    await committer.begin_transaction()
    await committer.send_offsets_to_transaction({
        a0: OffsetAndMetadata(0, TopicPartitionMetadata(5, ProcessorMetadata({"k": 7, "x": 1})).encode()),
        b0: OffsetAndMetadata(1, TopicPartitionMetadata(3, ProcessorMetadata({"k": 9})).encode()),
    }, APP)  # fmt: skip
    await committer.commit_transaction()

    seen: list[tuple[int | None, ...]] = []
    async with running(cluster, two_source_topology(seen), streams_config(tmp_path, {"processing.guarantee": guarantee})):
        cluster.produce("a", "r", "r", timestamp=20)
        await eventually(lambda: len(cluster.records("out")) == 1, what="the record out")
    assert seen == [(9, 1, None)], "the largest value of each key over the task's partitions"
    committed = {tp: (c.offset, TopicPartitionMetadata.decode(c.metadata)) for tp, c in cluster.committed_with_metadata(APP).items()}
    expected = ProcessorMetadata({"k": 20, "x": 1})
    assert committed == {a0: (1, (20, expected)), b0: (1, (3, expected))}


# -- emit on window close across a restart ----------------------------------------------------------


async def run_in_two_parts(
    cluster: FakeKafkaCluster, topology: Callable[[], Topology], config: dict[str, Any]
) -> list[tuple[list[tuple[str, int | None]], ProcessorMetadata]]:
    """Per run of RUNS: produce its records, run the topology until they are committed, close; the
    output so far ("out") and the processor metadata committed."""
    cluster.create_topic("in", 1)
    cluster.create_topic("out", 1)
    in0, produced, results = TopicPartition("in", 0), 0, []
    for records in RUNS:
        for key, timestamp in records:
            cluster.produce("in", key, key, timestamp=timestamp)
        produced += len(records)
        async with running(cluster, topology(), config):
            await eventually(lambda n=produced: cluster.committed(APP).get(in0) == n, what=f"{produced} records committed")
        (committed,) = cluster.committed_with_metadata(APP).values()
        output = [((r.key or b"").decode(), unlong(r.value)) for r in cluster.records("out")]
        results.append((output, TopicPartitionMetadata.decode(committed.metadata).processor_metadata))
    return results


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_a_restarted_window_close_count_emits_each_window_once(tmp_path: Path, guarantee: str) -> None:
    """Kafka's KStreamWindowAggregateTest.shouldEmitFromLastEmitTime through the runtime: the
    second run's new processor starts from the close time the first committed."""
    config = streams_config(tmp_path, {"processing.guarantee": guarantee})
    first, second = await run_in_two_parts(FakeKafkaCluster(), lambda: window_close_topology("in", "out"), config)
    assert first == (EXPECTED[0], ProcessorMetadata({STORE: LAST_CLOSE_TIMES[0]}))
    assert second == (EXPECTED[0] + EXPECTED[1], ProcessorMetadata({STORE: LAST_CLOSE_TIMES[1]}))


def sliding_or_session_topology(windows: Any) -> Topology:
    """An emit-on-close count of `windows` (store "windows", kept 60 s so that emitted windows are still there after the restart) from "in" to "out", keyed "key@start-end"."""
    builder = StreamsBuilder()
    (builder.stream("in", key_serde=S, value_serde=S).group_by_key(Grouped.with_(S, S)).windowed_by(windows)
     .emit_strategy(EmitStrategy.on_window_close()).count(Materialized.as_("windows").with_retention(60_000))
     .to_stream().map(lambda w, count: (f"{w.key}@{w.window.start}-{w.window.end}", count))
     .to("out", key_serde=S, value_serde=Serdes.Long()))  # fmt: skip
    topology: Topology = builder.build()
    return topology


WINDOWS = {
    "sliding": SlidingWindows.of_time_difference_with_no_grace(10_000),
    "session": SessionWindows.of_inactivity_gap_with_no_grace(5_000),
}


@pytest.mark.parametrize("kind", WINDOWS)
async def test_restarted_sliding_and_session_counts_emit_what_one_uninterrupted_run_emits(tmp_path: Path, kind: str) -> None:
    """Their last close time is kept under their store's name too: the output over a restart is
    the output of the same records in one run (the test driver's), no window twice."""
    topology = sliding_or_session_topology(WINDOWS[kind])
    with TopologyTestDriver(topology, {"application.id": "once"}) as driver:
        source = driver.create_input_topic("in", S, S)
        for key, timestamp in RUNS[0] + RUNS[1]:
            source.pipe_input(key, key, timestamp)
        reference = [(r.key, r.value) for r in driver.create_output_topic("out", S, Serdes.Long()).read_records_to_list()]
    assert len(reference) == len(set(reference)) >= 5

    _, (output, committed) = await run_in_two_parts(
        FakeKafkaCluster(), lambda: sliding_or_session_topology(WINDOWS[kind]), streams_config(tmp_path)
    )
    assert output == reference
    assert len(committed) == 1 and committed.get("windows") is not None, committed
