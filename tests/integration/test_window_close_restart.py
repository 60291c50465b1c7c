"""An emit-on-window-close count stopped and restarted on the real broker emits each window once.

Its last close time is committed with the input offset, in Kafka Streams' processor metadata
(`TopicPartitionMetadata` v2, key: the store's name), and the restarted task's processor starts
from it; the scenario and Kafka's expected output are in tests/window_close_restart.py. Without
it, the restarted processor would fetch every window from start 0 again and emit the four of
the first run a second time (they are still in its restored store).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams_core import KafkaStreams, State
from streams_core.processor.internals.processor_metadata import ProcessorMetadata
from streams_core.runtime.topic_partition_metadata import TopicPartitionMetadata
from tests.integration.streams_testkit import FAST_CONFIG, wait_until
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.window_close_restart import EXPECTED, LAST_CLOSE_TIMES, RUNS, STORE, window_close_topology

pytestmark = pytest.mark.broker


async def committed_metadata(bootstrap_servers: str, group: str, topic: str) -> tuple[int, TopicPartitionMetadata] | None:
    """The group's committed offset of partition 0 and its decoded metadata (aiokafka's admin client)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        found = (await admin.list_consumer_group_offsets(group)).get(KafkaTopicPartition(topic, 0))
    finally:
        await admin.close()
    return None if found is None else (found.offset, TopicPartitionMetadata.decode(found.metadata))


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_a_restarted_window_close_count_emits_each_window_once(
    bootstrap_servers: str, tmp_path: Path, guarantee: str
) -> None:
    suffix = unique_topic("wclose")
    app_id, source, sink = f"app-{suffix}", f"in-{suffix}", f"out-{suffix}"
    for topic in (source, sink):
        await create_topic(bootstrap_servers, topic, partitions=1)
    config: dict[str, Any] = {
        **FAST_CONFIG,
        "application.id": app_id,
        "bootstrap.servers": bootstrap_servers,
        "state.dir": str(tmp_path / "state"),
        "processing.guarantee": guarantee,
    }
    isolation = "read_committed" if guarantee != "at_least_once" else "read_uncommitted"
    base = (int(time.time() * 1000) // 60_000 - 10) * 60_000  # ten minutes ago: inside the topic's retention

    async def output() -> list[tuple[str, int]]:
        return [
            ((r.key or b"").decode(), int.from_bytes(r.value or b"", "big"))
            for r in await read_all(bootstrap_servers, sink, isolation_level=isolation)
        ]

    produced, expected = 0, []
    for records, emitted, last_close in zip(RUNS, EXPECTED, LAST_CLOSE_TIMES, strict=True):
        produced += len(records)
        expected += emitted
        streams = KafkaStreams(window_close_topology(source, sink, base), config)
        await streams.start()
        try:
            await streams.wait_for_state(State.RUNNING, timeout=60)
            await produce(bootstrap_servers, source, [Rec(k.encode(), b"v", timestamp_ms=base + t) for k, t in records])

            async def committed_all(n: int = produced) -> bool:
                found = await committed_metadata(bootstrap_servers, app_id, source)
                return found is not None and found[0] == n

            await wait_until(committed_all, 60, message=f"{produced} records committed")
        finally:
            await streams.close()
        assert await output() == expected, "each closed window once, in Kafka's order"
        assert await committed_metadata(bootstrap_servers, app_id, source) == (
            produced, (base + records[-1][1], ProcessorMetadata({STORE: base + last_close}))
        ), "the partition time and the last close time, in Kafka's encoding"
