"""Both engines on the same input: the asyncio runtime run to the end of its input, Spark's output read.

`run_asyncio_to_end` starts a `KafkaStreams` app, waits until its group has committed every
source partition (input and repartition topics) up to the end offsets seen when it is idle,
then closes it: the asyncio engine's equivalent of one `available_now` run. `final_table` turns
an output topic into the table a consumer of the changelog would build (key -> latest value,
tombstones delete).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient

from streams_core import KafkaStreams, Topology
from streams_core.runtime.kafka_streams import State
from tests.kafka_utils import Consumed, create_topic, read_all, topic_partitions

#: Base of the tests' record timestamps: recent, because the broker's retention (7 days) deletes
#: segments whose records are older, at its next retention check, even in the middle of a test.
BASE_TS = int(time.time() * 1000) - 3_600_000

FAST_CONFIG: dict[str, Any] = {
    "commit.interval.ms": 100,
    "poll.ms": 50,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "linger.ms": 5,
}


async def _end_offsets(bootstrap: str, topics: Iterable[str]) -> dict[tuple[str, int], int]:
    tps = [tp for t in topics for tp in await topic_partitions(bootstrap, t)]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        ends = await consumer.end_offsets(tps)
        return {(tp.topic, tp.partition): off for tp, off in ends.items()}
    finally:
        await consumer.stop()


async def _committed(bootstrap: str, group_id: str) -> dict[tuple[str, int], int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group_id)
    finally:
        await admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}


async def run_asyncio_to_end(
    topology: Topology,
    app_id: str,
    bootstrap: str,
    state_dir: Path,
    timeout: float = 120.0,
    config: Mapping[str, Any] | None = None,
    pattern_topics: Iterable[str] = (),
) -> None:
    """Run `topology` on KafkaStreams until every source partition is committed at its end, then close.

    Its repartition topics are created first, with leaders, sized as the runtime sizes them (the
    runtime accepts existing ones), so its first offset fetch never meets a topic whose leader is
    still being elected (NotLeaderForPartition was logged once on the shared 2-core machine).
    """
    builder = topology.internal_topology_builder
    builder.set_application_id(app_id)
    if builder.internal_topics:
        external = sorted(builder.source_topics - builder.internal_topics)
        counts = {t: len(await topic_partitions(bootstrap, t)) for t in external}
        for topic, partitions in builder.internal_topic_partition_counts(counts).items():
            await create_topic(bootstrap, topic, partitions=partitions)
    streams = KafkaStreams(
        topology,
        {"application.id": app_id, "bootstrap.servers": bootstrap, "state.dir": str(state_dir), **FAST_CONFIG, **(config or {})},
    )
    await streams.start()
    try:
        await streams.wait_for_state(State.RUNNING, timeout=60)
        topics = sorted(builder.source_topics | builder.internal_topics | set(pattern_topics))
        deadline = time.monotonic() + timeout
        stable = 0
        ends: dict[tuple[str, int], int] = {}
        committed: dict[tuple[str, int], int] = {}
        while stable < 3:
            if time.monotonic() > deadline:
                raise AssertionError(f"{app_id} did not reach the end offsets {ends} in {timeout} s: committed {committed}")
            await asyncio.sleep(0.3)
            ends = await _end_offsets(bootstrap, topics)
            committed = await _committed(bootstrap, app_id)
            done = all(end == 0 or committed.get(tp, -1) >= end for tp, end in ends.items())
            stable = stable + 1 if done else 0
    finally:
        await streams.close()


ENGINES = ("spark", "asyncio")


async def run_both_engines(
    build: Callable[[str], Topology],
    bootstrap: str,
    spark: Any,
    tmp_path: Path,
    suffix: str,
    outputs: Mapping[str, tuple[str, ...]],
    source_options: Mapping[str, str] | None = None,
    pattern_topics: Iterable[str] = (),
    **asyncio_config: Any,
) -> tuple[dict[str, list[dict[Any, Any]]], Any]:
    """`build(engine)` run on Spark (`available_now`) and on KafkaStreams; per engine, the tables
    (UTF-8 keys and values) of its `outputs[engine]` topics, and the SparkRunner (its progress)."""
    from streams_core.spark import SparkRunner

    runner = SparkRunner(build("spark"), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap},
                         spark=spark, source_options=source_options)
    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    await run_asyncio_to_end(build("asyncio"), f"asyncio-{suffix}", bootstrap, tmp_path / "state", config=asyncio_config,
                             pattern_topics=pattern_topics)
    tables = {engine: [await read_table(bootstrap, t, utf8, utf8) for t in outputs[engine]] for engine in ENGINES}
    return tables, runner


async def both_engines(
    build: Callable[[str], Topology],
    bootstrap: str,
    spark: Any,
    tmp_path: Path,
    suffix: str,
    outputs: tuple[str, str],
    **asyncio_config: Any,
) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """`build(output)` on both engines, each writing its own output (Spark's first); their tables."""
    by_engine = dict(zip(ENGINES, outputs, strict=True))
    tables, _ = await run_both_engines(lambda engine: build(by_engine[engine]), bootstrap, spark, tmp_path, suffix,
                                    {engine: (topic,) for engine, topic in by_engine.items()}, **asyncio_config)
    return tables["spark"][0], tables["asyncio"][0]


def final_table(records: Iterable[Consumed], decode_key: Callable[[bytes], Any], decode_value: Callable[[bytes], Any]) -> dict[Any, Any]:
    """key -> latest value over the records in (partition, offset) order; a null value deletes."""
    table: dict[Any, Any] = {}
    for r in records:
        assert r.key is not None, "changelog records have keys"
        key = decode_key(r.key)
        if r.value is None:
            table.pop(key, None)
        else:
            table[key] = decode_value(r.value)
    return table


async def read_table(bootstrap: str, topic: str, decode_key: Callable[[bytes], Any], decode_value: Callable[[bytes], Any]) -> dict[Any, Any]:
    return final_table(await read_all(bootstrap, topic), decode_key, decode_value)


def utf8(data: bytes) -> str:
    return data.decode()


def long_be(data: bytes) -> int:
    return int.from_bytes(data, "big", signed=True)


async def kill_mid_run(command: list[str], bootstrap: str, output: str, cwd: Path, timeout: float = 240.0) -> None:
    """Start `command` in its own process group and SIGKILL it once `output` holds a record (mid-run)."""
    victim = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:  # kill once the query has written part of its output, mid-run
            assert victim.poll() is None, "the run ended before it could be killed"
            try:
                written = len(await read_all(bootstrap, output, timeout=5))
            except TimeoutError:
                written = 0
            if written > 0:
                break
            assert time.monotonic() < deadline, "no progress to kill"
            await asyncio.sleep(0.2)
    finally:
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
