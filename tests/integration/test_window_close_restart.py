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

import pytest

from streams_core import KafkaStreams, State
from streams_core.processor.internals.processor_metadata import ProcessorMetadata
from streams_core.runtime.tasks.topic_partition_metadata import TopicPartitionMetadata
from tests.integration.test_partition_time import assert_committed, one_partition_app
from tests.kafka_utils import Rec, produce, read_all
from tests.window_close_restart import EXPECTED, LAST_CLOSE_TIMES, RUNS, STORE, window_close_topology

pytestmark = pytest.mark.broker


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_a_restarted_window_close_count_emits_each_window_once(
    bootstrap_servers: str, tmp_path: Path, guarantee: str
) -> None:
    app_id, source, sink, config = await one_partition_app(bootstrap_servers, "wclose", tmp_path, guarantee)
    isolation = "read_committed" if guarantee != "at_least_once" else "read_uncommitted"
    base = (int(time.time() * 1000) // 60_000 - 10) * 60_000  # ten minutes ago: inside the topic's retention
    produced, expected = 0, []
    for records, emitted, last_close in zip(RUNS, EXPECTED, LAST_CLOSE_TIMES, strict=True):
        produced += len(records)
        expected += emitted
        streams = KafkaStreams(window_close_topology(source, sink, base), config)
        await streams.start()
        try:
            await streams.wait_for_state(State.RUNNING, timeout=60)
            await produce(bootstrap_servers, source, [Rec(k.encode(), b"v", timestamp_ms=base + t) for k, t in records])
            committed = TopicPartitionMetadata(base + records[-1][1], ProcessorMetadata({STORE: base + last_close}))
            # the partition time and the last close time, in Kafka's encoding
            await assert_committed(bootstrap_servers, app_id, source, (produced, committed), TopicPartitionMetadata.decode)
        finally:
            await streams.close()
        output = [
            ((r.key or b"").decode(), int.from_bytes(r.value or b"", "big"))
            for r in await read_all(bootstrap_servers, sink, isolation_level=isolation)
        ]
        assert output == expected, "each closed window once, in Kafka's order"
