"""Punctuation in a running instance: stream time (moved by input timestamps) and wall clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

from streams_core import PunctuationType, Topology
from streams_core.testing import FakeKafkaCluster

from .harness import Instance, Punctuating, eventually, running, streams_config


def setup(kind: PunctuationType, interval: int, *sources: str) -> tuple[FakeKafkaCluster, Topology]:
    cluster = FakeKafkaCluster()
    for topic in (*sources, "out"):
        cluster.create_topic(topic)
    topology = Topology()
    for source in sources:
        topology.add_source(f"SRC-{source}", source)
    topology.add_processor("P", lambda: Punctuating(kind, interval), *(f"SRC-{s}" for s in sources))
    topology.add_sink("SINK", "out", "P")
    return cluster, topology


def ticks(cluster: FakeKafkaCluster) -> list[int]:
    return [int(r.value or b"0") for r in cluster.records("out")]


async def processed(app: Instance, n: int) -> None:
    """Wait until `n` records were processed, then a little longer for what they may trigger."""
    await eventually(lambda: app.metric("processed_records") >= n, what=f"{n} records processed")
    await asyncio.sleep(0.03)


async def test_stream_time_punctuation_follows_input_timestamps(tmp_path: Path) -> None:
    cluster, topology = setup(PunctuationType.STREAM_TIME, 1000, "in")
    async with running(cluster, topology, streams_config(tmp_path)) as app:
        cluster.produce("in", b"k", b"v", timestamp=0)
        await processed(app, 1)
        assert ticks(cluster) == [0]
        cluster.produce("in", b"k", b"v", timestamp=700)
        await processed(app, 2)
        assert ticks(cluster) == [0], "stream time has not moved a whole interval"
        cluster.produce("in", b"k", b"v", timestamp=2500)
        await processed(app, 3)
        assert ticks(cluster) == [0, 2500]


async def test_wall_clock_punctuation_fires_without_input(tmp_path: Path) -> None:
    cluster, topology = setup(PunctuationType.WALL_CLOCK_TIME, 30, "in")
    async with running(cluster, topology, streams_config(tmp_path)):
        await eventually(lambda: len(ticks(cluster)) >= 3, what="three punctuations")
        times = ticks(cluster)
    assert times == sorted(times)
    assert all(c - a >= 30 for a, c in zip(times, times[2:], strict=False)), "at most one punctuation per interval"


async def test_stream_time_does_not_run_ahead_of_processed_records_while_idling(tmp_path: Path) -> None:
    cluster, topology = setup(PunctuationType.STREAM_TIME, 1000, "left", "right")
    config = streams_config(tmp_path, {"max.task.idle.ms": 60_000})
    async with running(cluster, topology, config) as app:
        cluster.produce("left", b"l", b"v", timestamp=50_000)
        cluster.produce("right", b"r", b"v", timestamp=0)
        await processed(app, 1)
        # Only the ts-0 record is processed (left waits for more right data): stream time is 0.
        assert ticks(cluster) == [0]
