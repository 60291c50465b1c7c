"""Partition time across a restart, on the real broker: each commit stores the partition's time
in its offset's metadata (Kafka Streams' encoding), and a restarted task continues from it.

What changes with it, as in Kafka Streams: the partition time a timestamp extractor receives and
the task's stream time (`current_stream_time_ms`) continue after the restart instead of starting
at UNKNOWN. What does not: a windowed aggregation decides lateness by its own observed stream time
(Kafka's `KStreamWindowAggregate.observedStreamTime`, a processor field that starts again at
NO_TIMESTAMP in the new task), so a late record that is the first after the restart is not dropped
by it. Its window store, in memory and so restored from the changelog, has observed the later
window and expired the late one (Kafka's `InMemoryWindowStore`): the count starts again at 1.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams_core import (
    Grouped,
    KafkaStreams,
    Materialized,
    Processor,
    ProcessorContext,
    Record,
    Serdes,
    State,
    Stores,
    StreamsBuilder,
    TimeWindows,
)
from streams_core.processor.consumer_record import ConsumerRecord
from streams_core.runtime.tasks.topic_partition_metadata import decode_partition_time
from tests.integration.streams_testkit import FAST_CONFIG, wait_until
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

S = Serdes.String()
SIZE_MS, GRACE_MS = 10_000, 5_000


class RecordingExtractor:
    """The record's own timestamp; notes the partition time it was given."""

    def __init__(self) -> None:
        self.partition_times: list[int] = []

    def extract(self, record: ConsumerRecord, partition_time: int) -> int:
        self.partition_times.append(partition_time)
        return int(record.timestamp)


class StreamTimeRecorder(Processor[str, str, str, str]):
    """Notes (timestamp, the task's stream time) of each record, and forwards it."""

    def __init__(self, seen: list[tuple[int, int]]) -> None:
        self.seen = seen

    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context = context

    def process(self, record: Record[str, str]) -> None:
        self.seen.append((record.timestamp, self.context.current_stream_time_ms()))
        self.context.forward(record)


async def run_once(
    config: dict[str, Any], source: str, sink: str, records: list[Rec], bootstrap_servers: str
) -> tuple[list[int], list[tuple[int, int]]]:
    """Start the application, produce `records`, wait until each was processed, close (which commits)."""
    extractor, seen = RecordingExtractor(), []
    builder = StreamsBuilder()
    stream = builder.stream(source, key_serde=S, value_serde=S, timestamp_extractor=extractor)
    stream.process(lambda: StreamTimeRecorder(seen))
    (stream.group_by_key(Grouped.with_(S, S)).windowed_by(TimeWindows.of_size_and_grace(SIZE_MS, GRACE_MS))
     .count(Materialized.as_(Stores.in_memory_window_store("counts", SIZE_MS + GRACE_MS, SIZE_MS))).to_stream().map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}", count))
     .to(sink, key_serde=S, value_serde=Serdes.Long()))  # fmt: skip
    streams = KafkaStreams(builder.build(), config)
    await streams.start()
    try:
        await streams.wait_for_state(State.RUNNING, timeout=60)
        await produce(bootstrap_servers, source, records)
        await wait_until(lambda: len(seen) == len(records), 60, message=lambda: f"{len(records)} records processed: {seen}")
    finally:
        await streams.close()
    return extractor.partition_times, seen


async def assert_committed(
    bootstrap_servers: str, group: str, topic: str, expected: tuple[int, Any], decode: Callable[[str], Any] = decode_partition_time
) -> None:
    """The group's committed (offset, `decode`d metadata: the partition time) of partition 0 becomes
    `expected`, read with aiokafka's admin client (not a stable read: a transaction's markers may
    land a moment late)."""
    found: tuple[int, Any] | None = None
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()

    async def committed() -> bool:
        nonlocal found
        offsets = await admin.list_consumer_group_offsets(group)
        mine = offsets.get(KafkaTopicPartition(topic, 0))
        found = None if mine is None else (mine.offset, decode(mine.metadata))
        return found == expected

    try:
        await wait_until(committed, 30, message=lambda: f"committed {found}, expected {expected}")
    finally:
        await admin.close()


async def one_partition_app(
    bootstrap_servers: str, name: str, tmp_path: Path, guarantee: str
) -> tuple[str, str, str, dict[str, Any]]:
    """A new application's id, its source and sink topics (one partition each, created) and its config."""
    suffix = unique_topic(name)
    app_id, source, sink = f"app-{suffix}", f"in-{suffix}", f"out-{suffix}"
    for topic in (source, sink):
        await create_topic(bootstrap_servers, topic, partitions=1)
    config = {
        **FAST_CONFIG,
        "application.id": app_id,
        "bootstrap.servers": bootstrap_servers,
        "state.dir": str(tmp_path / "state"),
        "processing.guarantee": guarantee,
    }
    return app_id, source, sink, config


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_partition_and_stream_time_continue_after_a_restart(
    bootstrap_servers: str, tmp_path: Path, guarantee: str
) -> None:
    app_id, source, sink, config = await one_partition_app(bootstrap_servers, "ptime", tmp_path, guarantee)
    config["statestore.cache.max.bytes"] = 0
    base = (int(time.time() * 1000) // 60_000 - 10) * 60_000  # ten minutes ago: inside the topic's retention
    first = [Rec(b"k", b"v", timestamp_ms=base + t) for t in (1_000, 30_000, 2_000)]
    partition_times, seen = await run_once(config, source, sink, first, bootstrap_servers)
    assert partition_times == [-1, base + 1_000, base + 30_000]
    assert seen == [(base + 1_000, base + 1_000), (base + 30_000, base + 30_000), (base + 2_000, base + 30_000)]
    await assert_committed(bootstrap_servers, app_id, source, (3, base + 30_000))  # the highest timestamp processed

    late = [Rec(b"k", b"v", timestamp_ms=base + 3_000)]  # its window [base, base + 10 s) closed at base + 15 s
    partition_times, seen = await run_once(config, source, sink, late, bootstrap_servers)
    assert partition_times == [base + 30_000], "the extractor continues from the committed partition time"
    assert seen == [(base + 3_000, base + 30_000)], "so does the task's stream time"
    await assert_committed(bootstrap_servers, app_id, source, (4, base + 30_000))

    isolation = "read_committed" if guarantee != "at_least_once" else "read_uncommitted"
    counts = [(r.key, int.from_bytes(r.value or b"", "big")) for r in await read_all(bootstrap_servers, sink, isolation_level=isolation)]
    window = f"k@{base}".encode()
    assert counts == [(window, 1), (f"k@{base + 30_000}".encode(), 1), (window, 1)], (
        "the late record of the first run was dropped (the aggregation had seen base + 30 s); the one after "
        "the restart is not, as in Kafka Streams, whose aggregation starts its observed time again, but its "
        "window had expired in the restored store"
    )
