"""`python -m streams_core.tools topics`: the topics a user creates on the real broker, which an
application then reads (the broker creates none on first use)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from streams_core import KafkaStreams
from streams_core.common.partitioner import default_partition
from tests.integration.streams_testkit import passthrough_topology
from tests.kafka_utils import consume_until, produce, topic_partitions, unique_topic

ROOT = Path(__file__).resolve().parents[2]


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams_core.tools", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


async def test_the_tool_creates_topics_an_application_then_reads(bootstrap_servers: str, tmp_path: Path) -> None:
    source, sink = unique_topic("tool-in"), unique_topic("tool-out")
    created = await asyncio.to_thread(
        _tool, "topics", "create", source, sink, "--partitions", "3", "--bootstrap-servers", bootstrap_servers
    )
    assert created.returncode == 0, created.stderr[-2000:]
    assert created.stdout.splitlines() == [f"created topic {source} (3 partitions)", f"created topic {sink} (3 partitions)"]
    assert len(await topic_partitions(bootstrap_servers, source)) == 3

    again = await asyncio.to_thread(_tool, "topics", "create", source, "--partitions", "5", "--bootstrap-server", bootstrap_servers)
    assert again.returncode == 1 and f"already exist: '{source}' (3 partitions)" in again.stderr
    kept = await asyncio.to_thread(
        _tool, "topics", "create", source, "--partitions", "5", "--if-not-exists", "--bootstrap-servers", bootstrap_servers
    )
    assert kept.returncode == 0 and f"topic {source} exists (3 partitions): left as it is" in kept.stdout
    listed = await asyncio.to_thread(_tool, "topics", "list", "--bootstrap-servers", bootstrap_servers)
    assert listed.returncode == 0 and f"{source}\t3" in listed.stdout.splitlines()

    streams = KafkaStreams(
        passthrough_topology(source, sink),
        {"application.id": unique_topic("tool-app"), "bootstrap.servers": bootstrap_servers, "state.dir": str(tmp_path)},
    )
    await streams.start()
    try:
        await streams.wait_for_state(KafkaStreams.State.RUNNING, timeout=60)
        await produce(bootstrap_servers, source, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(6)])
        out = await consume_until(bootstrap_servers, sink, 6)
    finally:
        await streams.close(timeout=30)
    assert sorted((r.key, r.value) for r in out) == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(6)]
    assert {r.key: r.partition for r in out} == {r.key: default_partition(r.key, 3) for r in out}
