"""KIP-663 against the real broker: one instance grows from one stream thread to two and back while
records keep coming; the tasks spread over the threads, and every record is counted once."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

import pytest

from streams_core import KafkaStreams
from streams_core.runtime.kafka_streams import State
from tests.integration import streams_testkit as kit
from tests.kafka_utils import create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

PARTITIONS = 4
"""The input's partitions: four tasks to spread over the threads."""


def keyed(prefix: str, count: int) -> list[tuple[bytes, bytes]]:
    return [(f"{prefix}-{i:04d}".encode(), b"v") for i in range(count)]


def tasks_per_thread(streams: KafkaStreams) -> dict[str, int]:
    return {m.thread_name: len(m.active_tasks) for m in streams.metadata_for_local_threads()}


async def wait_spread(streams: KafkaStreams, expected: dict[str, int]) -> None:
    """RUNNING, with the four tasks spread over the threads as `expected` (thread name -> task count)."""
    await kit.wait_until(
        lambda: streams.state is State.RUNNING and tasks_per_thread(streams) == expected,
        30,
        message=lambda: f"state {streams.state.name}, tasks per thread {tasks_per_thread(streams)}",
    )


async def test_add_and_remove_a_thread_while_records_flow(bootstrap_servers: str, tmp_path: Path) -> None:
    source, sink = unique_topic("threads-in"), unique_topic("threads-out")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    batches = {name: keyed(name, 400) for name in ("before", "adding", "two", "removing")}
    await produce(bootstrap_servers, source, batches["before"])

    async with kit.StreamsApp(bootstrap_servers, tmp_path, partial(kit.stateful_topology, source, sink)) as app:
        streams = await app.start(0)
        await app.wait_settled(kit.tasks_of(PARTITIONS))
        first, second = (f"{app.application_id}-StreamThread-{i}" for i in (1, 2))
        assert tasks_per_thread(streams) == {first: PARTITIONS}
        await kit.wait_for_output_keys(bootstrap_servers, sink, [k for k, _ in batches["before"]])

        added, _sent = await asyncio.gather(
            streams.add_stream_thread(), produce(bootstrap_servers, source, batches["adding"])
        )
        assert added == second
        await wait_spread(streams, {first: 2, second: 2})
        await produce(bootstrap_servers, source, batches["two"])
        await kit.wait_for_output_keys(bootstrap_servers, sink, [k for b in batches.values() for k, _ in b][:1200])
        assert all(thread.metrics()["processed_records"] > 0 for thread in streams.threads), "both threads processed"

        removed, _sent = await asyncio.gather(
            streams.remove_stream_thread(timeout=30), produce(bootstrap_servers, source, batches["removing"])
        )
        assert removed == first, "the oldest thread is removed"
        await wait_spread(streams, {second: PARTITIONS})
        every_key = [k for b in batches.values() for k, _ in b]
        await kit.wait_for_output_keys(bootstrap_servers, sink, every_key)

        store = streams.store("counts")
        counted = {key: store.get(key) for key in every_key}
        assert set(counted.values()) == {1}, {k: n for k, n in counted.items() if n != 1}
        assert kit.metric_total(streams, "processed_records") >= len(batches["removing"])
        await app.close_all()
        assert streams.state is State.NOT_RUNNING and streams.errors == []

    counts = kit.counts_by_key(await read_all(bootstrap_servers, sink))
    assert set(counts) == set(every_key)
    assert set(counts.values()) == {1}, {k: n for k, n in counts.items() if n != 1}
