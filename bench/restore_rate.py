"""Changelog restore rate (records/s) into a SQLite and an in-memory store, vs a plain aiokafka consume.

    .venv/bin/python bench/restore_rate.py --records 1000000 --repeat 3   (the recorded run)
    .venv/bin/python bench/restore_rate.py --records 100000 --repeat 1    (a quick run)

One run starts its own local broker (LocalKafkaBroker in a temp dir, stopped at the end even on
error), creates the changelog topic `<app>-counts-changelog` (1 partition, cleanup.policy=compact
as Kafka Streams creates it) and produces `--records` records into partition 0 with aiokafka's
batch API (distinct 20-byte keys `key-0000000000000042`, 8-byte big-endian values, no
compression). Then, in this one process, `--repeat` rounds of:

  consume   baseline: a plain aiokafka consumer with the restore consumer's own settings
            (`create_restore_consumer` of the same StreamsConfig), assigned partition 0, seek
            to the beginning, `getmany(max_records=10_000)` until its position reaches the end
            offset; it only counts the records
  sqlite    StoreChangelogReader.restore() of the whole partition into the store a task opens:
            `Stores.key_value_store_builder(Stores.persistent_key_value_store("counts"),
            Serdes.String(), Serdes.Long())` (logging on, as a logged store), initialised on a
            ProcessorStateManager, its registered restore callback (SqliteKeyValueStore.
            restore_batch) in a ChangelogPartition starting from the beginning; timed from the
            restore() call to the end of the state manager's flush() (the SQLite commit)
  memory    the same with `Stores.in_memory_key_value_store`

The consumer of each variant is created and started before the clock starts (connection and
metadata are not restore work). Each round uses a new store directory, so every restore is
from offset 0 to the end. Rates are records / wall seconds; the CPU time of this process is
printed too (the broker runs in another process).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import logging
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as KafkaTopicPartition

from bench.bench_broker import bench_broker
from streams_core.clients import InternalTopicManager, NewTopicSpec, create_admin, create_restore_consumer
from streams_core.clients.client_config import consumer_kwargs
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.runtime.restore.store_changelog_reader import ChangelogPartition, StoreChangelogReader
from streams_core.serde import Serdes
from streams_core.state import Stores
from streams_core.state.internals.processor_state_manager import ProcessorStateManager

APP = "bench-restore"
STORE = "counts"
TOPIC = f"{APP}-{STORE}-changelog"
VARIANTS = ("consume", "sqlite", "memory")


def key_of(i: int) -> bytes:
    return b"key-%016d" % i  # 20 bytes


async def produce(bootstrap: str, n: int) -> float:
    """Fill partition 0 of the changelog with n records using whole batches; returns seconds."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=50, max_batch_size=1024 * 1024, max_request_size=4 * 1024 * 1024
    )
    await producer.start()
    started = time.perf_counter()
    try:
        pending: list[asyncio.Future[Any]] = []
        batch = producer.create_batch()
        for i in range(n):
            if batch.append(key=key_of(i), value=i.to_bytes(8, "big"), timestamp=None) is None:
                pending.append(await producer.send_batch(batch, TOPIC, partition=0))
                batch = producer.create_batch()
                if batch.append(key=key_of(i), value=i.to_bytes(8, "big"), timestamp=None) is None:
                    raise RuntimeError("a record does not fit an empty batch")
            if len(pending) >= 32:
                await asyncio.gather(*pending)
                pending.clear()
        if batch.record_count():
            pending.append(await producer.send_batch(batch, TOPIC, partition=0))
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return time.perf_counter() - started


def streams_config(bootstrap: str) -> StreamsConfig:
    return StreamsConfig({"application.id": APP, "bootstrap.servers": bootstrap})


async def run_consume(bootstrap: str, n: int) -> tuple[float, float, int]:
    """Plain aiokafka getmany over the partition, with the restore consumer's settings."""
    consumer = AIOKafkaConsumer(**consumer_kwargs(streams_config(bootstrap), "restore.consumer"))
    await consumer.start()
    try:
        ktp = KafkaTopicPartition(TOPIC, 0)
        consumer.assign([ktp])
        end = (await consumer.end_offsets([ktp]))[ktp]
        wall, cpu = time.perf_counter(), time.process_time()
        await consumer.seek_to_beginning(ktp)
        count = 0
        while await consumer.position(ktp) < end:
            batch = await consumer.getmany(ktp, timeout_ms=200, max_records=10_000)
            for records in batch.values():
                count += len(records)
        return time.perf_counter() - wall, time.process_time() - cpu, count
    finally:
        await consumer.stop()


async def run_restore(bootstrap: str, n: int, directory: Path, persistent: bool) -> tuple[float, float, int]:
    """StoreChangelogReader.restore() from the beginning to the end into a fresh store."""
    supplier = Stores.persistent_key_value_store(STORE) if persistent else Stores.in_memory_key_value_store(STORE)
    store = Stores.key_value_store_builder(supplier, Serdes.String(), Serdes.Long()).build()
    manager = ProcessorStateManager(TaskId(0, 0), APP, directory / "0_0")
    consumer = create_restore_consumer(streams_config(bootstrap))
    await consumer.start()
    try:
        store.init(manager.context, store)
        meta = manager.store_metadata(STORE)
        assert meta is not None and meta.restore_callback is not None and meta.changelog_topic == TOPIC
        reader = StoreChangelogReader(consumer)
        partition = ChangelogPartition(STORE, TopicPartition(TOPIC, 0), None, meta.restore_callback)
        wall, cpu = time.perf_counter(), time.process_time()
        result = await reader.restore("0_0", [partition])
        manager.flush()
        elapsed = time.perf_counter() - wall, time.process_time() - cpu
        entries = store.approximate_num_entries()
        if entries != n or result.total != n:
            raise RuntimeError(f"restored {result.total} records, store holds {entries}; expected {n}")
        return elapsed[0], elapsed[1], result.total
    finally:
        await consumer.stop()
        manager.close()


async def main_async(args: argparse.Namespace, bootstrap: str) -> None:
    n = args.records
    admin = create_admin(streams_config(bootstrap))
    await admin.start()
    try:
        await InternalTopicManager(admin).ensure_topics([NewTopicSpec(TOPIC, 1, {"cleanup.policy": "compact"})])
    finally:
        await admin.close()
    seconds = await produce(bootstrap, n)
    print(f"produced {n:,} records into {TOPIC}-0 in {seconds:.1f} s ({n / seconds:,.0f}/s)", flush=True)

    runs: dict[str, list[tuple[float, float, int]]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="bench-restore-state-") as state_dir:
        for round_ in range(args.repeat):
            for variant in VARIANTS:
                directory = Path(state_dir) / f"{variant}-{round_}"
                if variant == "consume":
                    run = await run_consume(bootstrap, n)
                else:
                    run = await run_restore(bootstrap, n, directory, variant == "sqlite")
                if run[2] != n:
                    raise RuntimeError(f"{variant}: saw {run[2]} records, expected {n}")
                runs[variant].append(run)
                print(f"round {round_ + 1} {variant}: {n / run[0]:,.0f} records/s "
                      f"({run[0]:.2f} s wall, {run[1]:.2f} s CPU)", flush=True)

    print(
        f"\n{datetime.date.today()} {platform.python_implementation()} {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} cores; --records {n} --repeat {args.repeat}; "
        f"load average {LOAD_AT_START:.2f} at the start, {os.getloadavg()[0]:.2f} at the end\n"
    )
    print("| variant | records/s (median) | rounds, records/s | ratio to consume | CPU us/record |")
    print("|---|---:|---|---:|---:|")
    labels = {"consume": "plain aiokafka consume (baseline)", "sqlite": "restore into SQLite store",
              "memory": "restore into in-memory store"}
    for variant in VARIANTS:
        rates = [n / w for w, _, _ in runs[variant]]
        ratios = [n / r[0] / (n / c[0]) for r, c in zip(runs[variant], runs["consume"], strict=False)]
        cpu = statistics.median(c for _, c, _ in runs[variant]) / n * 1e6
        ratio = "1.00" if variant == "consume" else f"{statistics.median(ratios):.2f} (same round: {', '.join(f'{x:.2f}' for x in ratios)})"
        print(f"| {labels[variant]} | {statistics.median(rates):,.0f} | {', '.join(f'{r:,.0f}' for r in rates)} | {ratio} | {cpu:.1f} |")


LOAD_AT_START = os.getloadavg()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="changelog records (default 1000000)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of the three variants (default 2)")
    parser.add_argument("--jvm-c2", action=argparse.BooleanOptionalAction, default=True,
                        help="run the broker JVM with C2 (drop -XX:TieredStopAtLevel=1); default on")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    with bench_broker(c2=args.jvm_c2) as broker:
        asyncio.run(main_async(args, broker.bootstrap_servers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
