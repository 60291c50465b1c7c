"""Word count on Spark (local[2], real broker) against the asyncio runtime, and incremental runs."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from app.wordcount import build_topology
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic
from tests.spark.engines import BASE_TS, long_be, read_table, run_asyncio_to_end, utf8

WORDS = ["kafka", "streams", "spark", "python", "table", "stream", "join", "window"]


def lines(start: int, count: int) -> list[str]:
    return [" ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 5)).title() + f" w{i % 7}" for i in range(start, start + count)]


async def produce_lines(bootstrap: str, topic: str, text: list[str], start: int) -> None:
    await produce(bootstrap, topic, [Rec(f"line-{start + i}".encode(), line.encode(), timestamp_ms=BASE_TS + start + i) for i, line in enumerate(text)])


def count_words(text: list[str]) -> Counter[str]:
    return Counter(word for line in text for word in line.lower().split())


async def test_word_count_on_spark_equals_the_asyncio_runtime(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    """Caching on (the default) compiles to Spark's own count, one record per word and micro-batch;
    caching off keeps the keyed Python stage, one record per update; both give the asyncio table."""
    suffix = unique_topic("wc")
    input_topic, asyncio_out = f"lines-{suffix}", f"asyncio-counts-{suffix}"
    coalesced, uncoalesced = f"spark-counts-{suffix}", f"spark-uncached-{suffix}"
    for topic in (input_topic, coalesced, uncoalesced, asyncio_out):
        await create_topic(bootstrap_servers, topic, partitions=3)
    text = lines(0, 300)
    await produce_lines(bootstrap_servers, input_topic, text, 0)

    config = {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers}
    runner = SparkRunner(build_topology(input_topic, coalesced, windowed=False), config, spark=spark)
    assert [q.stage for q in runner.plan().queries] == ["native"]
    explained = runner.explain()
    assert "MapInArrow" in explained and "StateStoreSave" in explained, explained
    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    uncached = SparkRunner(build_topology(input_topic, uncoalesced, windowed=False),
                           {**config, "application.id": f"spark-uncached-{suffix}", "statestore.cache.max.bytes": 0},
                           spark=spark)  # fmt: skip
    assert [q.stage for q in uncached.plan().queries] == ["stateless", "keyed"]
    await asyncio.to_thread(uncached.run, "available_now", tmp_path / "uncached-checkpoints")
    await run_asyncio_to_end(build_topology(input_topic, asyncio_out, windowed=False), f"asyncio-{suffix}",
                             bootstrap_servers, tmp_path / "state")

    expected = dict(count_words(text))
    on_asyncio = await read_table(bootstrap_servers, asyncio_out, utf8, long_be)
    assert on_asyncio == expected
    assert await read_table(bootstrap_servers, coalesced, utf8, long_be) == on_asyncio
    assert await read_table(bootstrap_servers, uncoalesced, utf8, long_be) == on_asyncio
    batches = len([p for p in runner.progress[0] if p["numInputRows"]])
    assert len(await read_all(bootstrap_servers, coalesced)) <= batches * len(expected), "one record per word and batch"
    assert len(await read_all(bootstrap_servers, uncoalesced)) == sum(expected.values()), "one record per update"
    # The same partitioning: each word lands in the partition murmur2 gives its key on both engines.
    asyncio_parts = {(r.key, r.partition) for r in await read_all(bootstrap_servers, asyncio_out)}
    for topic in (coalesced, uncoalesced):
        assert {(r.key, r.partition) for r in await read_all(bootstrap_servers, topic)} == asyncio_parts


async def test_a_second_available_now_run_takes_only_new_records(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    suffix = unique_topic("wc-incr")
    input_topic, output_topic = f"lines-{suffix}", f"counts-{suffix}"
    await create_topic(bootstrap_servers, input_topic, partitions=2)
    await create_topic(bootstrap_servers, output_topic, partitions=2)
    # Caching off: the two-query plan through the repartition topic, whose lineage this test is about.
    config = {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers, "statestore.cache.max.bytes": 0}
    first, second = lines(0, 120), lines(120, 40)

    await produce_lines(bootstrap_servers, input_topic, first, 0)
    runner = SparkRunner(build_topology(input_topic, output_topic, windowed=False), config, spark=spark)
    await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    assert sum(p["numInputRows"] for p in runner.progress[0]) == len(first)
    assert await read_table(bootstrap_servers, output_topic, utf8, long_be) == dict(count_words(first))

    await produce_lines(bootstrap_servers, input_topic, second, len(first))
    again = SparkRunner(build_topology(input_topic, output_topic, windowed=False), config, spark=spark)
    await asyncio.to_thread(again.run, "available_now", tmp_path / "checkpoints")
    assert sum(p["numInputRows"] for p in again.progress[0]) == len(second), "only the new lines are read"
    assert sum(p["numInputRows"] for p in again.progress[1]) == sum(count_words(second).values()), "only their words"
    assert await read_table(bootstrap_servers, output_topic, utf8, long_be) == dict(count_words(first + second))

    # A fresh checkpoint directory (a reset) starts over from the input, and must not read what the
    # earlier lineage wrote to the repartition topic: the counts are not doubled.
    fresh = SparkRunner(build_topology(input_topic, output_topic, windowed=False), config, spark=spark)
    await asyncio.to_thread(fresh.run, "available_now", tmp_path / "fresh-checkpoints")
    assert sum(p["numInputRows"] for p in fresh.progress[1]) == sum(count_words(first + second).values())
    assert await read_table(bootstrap_servers, output_topic, utf8, long_be) == dict(count_words(first + second))


async def test_continuous_mode_keeps_counting_until_stopped(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    suffix = unique_topic("wc-cont")
    input_topic, output_topic = f"lines-{suffix}", f"counts-{suffix}"
    await create_topic(bootstrap_servers, input_topic, partitions=2)
    await create_topic(bootstrap_servers, output_topic, partitions=2)
    runner = SparkRunner(build_topology(input_topic, output_topic, windowed=False),
                         {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers}, spark=spark)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            runner.run("continuous", tmp_path / "checkpoints")
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        first, second = lines(0, 50), lines(50, 30)
        for start, text in ((0, first), (50, second)):  # two arrivals while the queries run
            await produce_lines(bootstrap_servers, input_topic, text, start)
            expected = dict(count_words(first if start == 0 else first + second))
            deadline = time.monotonic() + 90
            while await read_table(bootstrap_servers, output_topic, utf8, long_be) != expected:
                assert not errors, errors
                assert time.monotonic() < deadline, "the continuous queries did not catch up"
                await asyncio.sleep(0.5)
    finally:
        runner.stop()
        await asyncio.to_thread(thread.join, 60)
    assert not thread.is_alive() and not errors, errors
