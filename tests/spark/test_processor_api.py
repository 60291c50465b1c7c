"""Processor API topologies on Spark: key-value stores and a stream-time punctuation, against KafkaStreams.

The task stage runs `process()`/`process_values()` with their stores carried between micro-batches
as changelog bytes and their stream-time schedules carried with the task; the punctuations' output
names the stream time they fired at, so equal outputs mean they fired where Kafka Streams fires
them, over small micro-batches and two runs from one checkpoint.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams_core import Topology
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark import processor_api
from tests.spark.engines import BASE_TS, run_asyncio_to_end

KEYS = "abcde"


def _input(partition: int, count: int) -> list[Rec]:
    """Records of one partition: a few keys, timestamps mostly rising by 0-60 ms with some out of order,
    every ninth value deleting its key."""
    records, ts = [], BASE_TS + 37 * partition
    for i in range(count):
        ts += (i * 17 + partition * 29) % 61
        late = 150 if i % 7 == 3 else 0  # an out-of-order record: stream time does not move back
        value = f"v{partition}.{i}" + ("!" if i % 9 == 5 else "")
        records.append(Rec(KEYS[(i * 3 + partition) % len(KEYS)].encode(), value.encode(), partition, ts - late))
    return records


async def _outputs(bootstrap: str, topic: str) -> Counter[tuple[str, str]]:
    return Counter((r.key.decode(), r.value.decode()) for r in await read_all(bootstrap, topic)
                   if r.key is not None and r.value is not None)  # fmt: skip


@pytest.mark.parametrize("build", [processor_api.tally_topology, processor_api.dsl_topology],
                         ids=["topology-api", "dsl-process-values"])  # fmt: skip
async def test_stores_and_a_stream_time_punctuation_match_kafka_streams_across_two_runs(
    build: Callable[[str, str], Topology], bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    suffix = unique_topic("papi")
    source, on_spark, on_asyncio = f"in-{suffix}", f"spark-{suffix}", f"asyncio-{suffix}"
    for topic in (source, on_spark, on_asyncio):
        await create_topic(bootstrap_servers, topic, partitions=2)
    records = [_input(p, 40) for p in range(2)]
    config = {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers}
    (query,) = SparkRunner(build(source, on_spark), config).plan().queries
    assert query.stage == "task" and "tallies" in query.stores
    batches = 0
    for half in (slice(0, 25), slice(25, None)):  # two runs from one checkpoint
        await produce(bootstrap_servers, source, [r for part in records for r in part[half]])
        runner = SparkRunner(build(source, on_spark), config, spark=spark, source_options={"maxOffsetsPerTrigger": "8"})
        await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
        batches += sum(1 for report in runner.progress[0] if report["numInputRows"])
    assert batches >= 8, "several micro-batches per run"
    await run_asyncio_to_end(build(source, on_asyncio), f"asyncio-{suffix}", bootstrap_servers, tmp_path / "state")
    spark_out, asyncio_out = await _outputs(bootstrap_servers, on_spark), await _outputs(bootstrap_servers, on_asyncio)
    punctuations = {value.rsplit("@", 1)[1] for _, value in asyncio_out if "@" in value}
    assert len(punctuations) >= 10, "the punctuation fired many times"
    assert any(value.startswith(("1@", "2@")) for _, value in asyncio_out), "deletes restarted some counts"
    assert spark_out == asyncio_out


@pytest.mark.slow
async def test_a_run_killed_mid_way_and_rerun_writes_kafka_streams_records(bootstrap_servers: str, tmp_path: Path) -> None:
    """SIGKILL once part of the output is written, then a rerun from the checkpoint: the task's store,
    stream time and schedules roll back with Spark's state, so a replayed micro-batch writes the same
    records again (the Kafka sink is at-least-once) and the distinct records are KafkaStreams'."""
    suffix = unique_topic("papi-kill")
    source, on_spark, on_asyncio = f"in-{suffix}", f"spark-{suffix}", f"asyncio-{suffix}"
    for topic in (source, on_spark, on_asyncio):
        await create_topic(bootstrap_servers, topic, partitions=2)
    await produce(bootstrap_servers, source, [r for p in range(2) for r in _input(p, 150)])
    command = [sys.executable, "-m", "tests.spark.processor_api", bootstrap_servers, source, on_spark, str(tmp_path / "ck")]
    root = Path(__file__).parents[2]
    victim = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=root, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while True:  # kill once the query has written part of its output, mid-run
            assert victim.poll() is None, "the run ended before it could be killed"
            try:
                written = len(await read_all(bootstrap_servers, on_spark, timeout=5))
            except TimeoutError:
                written = 0
            if written > 0:
                break
            assert time.monotonic() < deadline, "no progress to kill"
            await asyncio.sleep(0.2)
    finally:
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
    await run_asyncio_to_end(processor_api.tally_topology(source, on_asyncio), f"asyncio-{suffix}", bootstrap_servers,
                             tmp_path / "state")  # fmt: skip
    asyncio_out = await _outputs(bootstrap_servers, on_asyncio)
    assert set(await _outputs(bootstrap_servers, on_spark)) < set(asyncio_out), "killed mid-run"
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=300, cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    assert set(await _outputs(bootstrap_servers, on_spark)) == set(asyncio_out)
