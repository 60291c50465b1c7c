"""The runtime's per-record path without a broker: `StreamTask.add_records` then `process`.

A source -> map_values -> sink sub-topology (string serdes) on one partition, records added and
processed in batches of 500, output sent to a collector that only counts. Two variants: the
default timestamp extractor (the record's own timestamp) and a custom one (a function, which
gets a ConsumerRecord and the partition time), and the peers' pass-through (Bytes serdes, the
source straight into the sink). Then app/wordcount.py's count (without its
windowed part) as two tasks: lines -> split -> group_by -> repartition records, which the second
task counts (record cache on and off: commit every 10 batches) -> output records; in µs per
word, the CPU of both tasks per word, the producer's work excluded. Prints the best of
`--repeat` runs. To compare two versions, run it with each on PYTHONPATH, alternating, under the lock:

    git archive <base> streams_core | tar -x -C /tmp/base
    flock /tmp/bench.lock sh -c 'for i in 1 2 3; do for p in /tmp/base $PWD; do
        PYTHONPATH=$p .venv/bin/python bench/record_path.py; done; done'

`--word-count LINES` runs only the word count (cache on, or off with `--cache-off`), once per
`--repeat`: what to count instructions of under valgrind, which the load does not move (the run
of 10,000 lines minus that of 5,000, over the 50,000 words between). `--without write-buffer`
or `--without memtable` takes one of a persistent key-value store's three write buffers away
(the typed layer's write buffer, the SQLite store's memtable; the record cache is `--cache-off`):
how the decision to keep all three was measured (docs/state.md, "One write path").
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from streams_core import Consumed, Serdes, StreamsBuilder, StreamsConfig
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.tasks.record_collector_impl import RecordCollectorImpl
from streams_core.runtime.tasks.stream_task import StreamTask
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.testing.fake_kafka_cluster import FakeRecord as Raw

BATCH = 500


class CountingCollector:
    """A record collector that counts what the sink sends (and, when asked, keeps it as the runtime's does)."""

    def __init__(self, keep: bool = False) -> None:
        self.sent = 0
        self.kept: list[tuple[Any, ...]] | None = [] if keep else None

    def send(self, topic: str, key: Any, value: Any, timestamp: int, headers: Any, partition: int | None) -> None:
        self.sent += 1
        if self.kept is not None:
            self.kept.append((topic, key, value, timestamp, headers, partition))

    def partitions_for(self, topic: str) -> int:
        return 1


def run(custom_extractor: bool, records: int, *, raw_bytes: bool = False) -> float:
    """µs per record of one run over `records` records; `raw_bytes`: the peers' pass-through instead
    (Bytes serdes both ways, source straight to sink)."""
    builder = StreamsBuilder()
    if raw_bytes:
        b = Serdes.Bytes()
        builder.stream("in", Consumed.with_(b, b)).to("out", key_serde=b, value_serde=b)
    else:
        s = Serdes.String()
        consumed = Consumed.with_(s, s)
        if custom_extractor:
            consumed = consumed.with_timestamp_extractor(lambda record, partition_time: record.timestamp)
        builder.stream("in", consumed).map_values(str.upper).to("out")
    internal = builder.build().internal_topology_builder
    internal.set_application_id("record-path")
    with tempfile.TemporaryDirectory() as state_dir:
        config = StreamsConfig({"application.id": "record-path", "state.dir": state_dir})
        task_id = TaskId(0, 0)
        state = ProcessorStateManager(task_id, "record-path", Path(state_dir) / "0_0")
        tp = TopicPartition("in", 0)
        collector = CountingCollector()
        task = StreamTask(task_id, [tp], internal.build_subtopology(0, config), config, state,
                          cast(RecordCollectorImpl, collector), checkpoint_on_commit=False)
        task.processor.init()
        raws = [Raw("in", 0, i, 1000 + i, b"k%d" % (i % 100), b"value %d" % i) for i in range(records)]
        started = time.perf_counter()
        for start in range(0, records, BATCH):
            task.add_records(tp, raws[start:start + BATCH])
            task.process(BATCH, 0)
        elapsed = time.perf_counter() - started
        task.close()
    assert collector.sent == records
    return elapsed / records * 1e6


def word_count(records: int, cache_bytes: int) -> float:
    """µs per word of app/wordcount.py's count over `records` lines of 10 words (both sub-topologies)."""
    from app.wordcount import build_topology

    internal = build_topology("lines", "counts", windowed=False).internal_topology_builder
    internal.set_application_id("record-path")
    words = [f"word{i}" for i in range(5000)]
    lines = [Raw("lines", 0, i, 1000 + i, b"line-%d" % i,
                 " ".join(words[(i * 7 + j * 131) % 5000] for j in range(10)).encode()) for i in range(records)]
    with tempfile.TemporaryDirectory() as state_dir:
        config = StreamsConfig({"application.id": "record-path", "state.dir": state_dir,
                                "statestore.cache.max.bytes": cache_bytes})
        tasks = []
        for sid in (0, 1):
            task_id = TaskId(sid, 0)
            topology = internal.build_subtopology(sid, config)
            state = ProcessorStateManager(task_id, "record-path", Path(state_dir) / str(task_id))
            collector = CountingCollector(keep=sid == 0)
            (topic,) = topology.source_topics
            tp = TopicPartition(topic, 0)
            task = StreamTask(task_id, [tp], topology, config, state, cast(RecordCollectorImpl, collector),
                              checkpoint_on_commit=False)
            task.processor.init()
            tasks.append((task, tp, collector))
        (split, split_tp, repartition), (count, count_tp, output) = tasks
        assert repartition.kept is not None
        elapsed = 0.0
        offset = 0
        for n, start in enumerate(range(0, records, BATCH)):
            started = time.process_time()
            split.add_records(split_tp, lines[start:start + BATCH])
            split.process(BATCH, 0)
            elapsed += time.process_time() - started
            batch = [Raw(count_tp.topic, 0, offset + i, r[3], r[1], r[2], r[4]) for i, r in enumerate(repartition.kept)]
            offset += len(batch)
            repartition.kept.clear()
            started = time.process_time()
            count.add_records(count_tp, batch)
            while count.process(len(batch), 0):
                pass
            if n % 10 == 9:
                count.processor.commit()
            elapsed += time.process_time() - started
        started = time.process_time()
        count.processor.commit()
        elapsed += time.process_time() - started
        for task, _, _ in tasks:
            task.processor.close()
    assert repartition.sent == records * 10 and count.processed_records == records * 10 and output.sent >= 5000
    return elapsed / (records * 10) * 1e6


class StubAioKafkaProducer:
    """What the producer port wraps, with aiokafka's own batches (`create_batch`), sent nowhere."""

    def __init__(self) -> None:
        from aiokafka.producer.message_accumulator import BatchBuilder

        self._new = lambda: BatchBuilder(16384, 0)
        self.batches = 0

    def create_batch(self) -> Any:
        return self._new()

    async def send_batch(self, batch: Any, topic: str, *, partition: int) -> Any:
        import asyncio

        self.batches += 1
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        return future

    async def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2, 3}


def collector(records: int) -> float:
    """µs per record of `RecordCollectorImpl.send` + `send_pending` into aiokafka batches (4 partitions)."""
    import asyncio

    async def fill() -> float:
        from streams_core.clients.aiokafka_supplier import AioKafkaProducer

        producer = StubAioKafkaProducer()
        target = RecordCollectorImpl(AioKafkaProducer(cast(Any, producer)))
        keys = [b"word%d" % (i % 5000) for i in range(records)]
        started = time.process_time()
        for start in range(0, records, BATCH * 10):
            for key in keys[start:start + BATCH * 10]:
                target.send("out", key, key, 1000, (), None)
            await target.send_pending()
        elapsed = time.process_time() - started
        assert target.sent_records == records and producer.batches >= 4
        return elapsed

    return asyncio.run(fill()) / records * 1e6


def without(layer: str) -> None:
    """Take a write buffer away from every store made from now on (an experiment, not a setting)."""
    if layer == "write-buffer":  # the caching layer no longer offers to take the typed layer's buffer
        from streams_core.state.internals.caching_key_value_store import CachingKeyValueStore

        CachingKeyValueStore.write_buffer_target = lambda self: None  # type: ignore[method-assign]
        return
    from streams_core.state.internals import sqlite_key_value_store as sqlite_kv

    def put(self: sqlite_kv.SqliteKeyValueStore, key: bytes, value: bytes | None) -> None:
        """One execute per put, as before the memtable."""
        if value is None:
            self._conn.execute(sqlite_kv._DELETE, (key,))
        else:
            self._conn.execute(sqlite_kv._PUT, (key, value))

    sqlite_kv.SqliteKeyValueStore.put = put  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--word-count", type=int, metavar="LINES", help="only the word count, of LINES lines")
    parser.add_argument("--cache-off", action="store_true", help="with --word-count: the record cache off")
    parser.add_argument("--without", choices=("write-buffer", "memtable"), help="one write buffer taken away")
    args = parser.parse_args()
    if args.without:
        without(args.without)
    if args.word_count:
        cache = 0 if args.cache_off else 10 * 1024 * 1024
        best = min(word_count(args.word_count, cache) for _ in range(args.repeat))
        print(f"word count, cache {'off' if args.cache_off else 'on'}: {best:.3f} us CPU per word")
        return
    for custom in (False, True):
        best = min(run(custom, args.records) for _ in range(args.repeat))
        print(f"{'custom' if custom else 'default'} extractor: {best:.3f} us per record")
    best = min(run(False, args.records, raw_bytes=True) for _ in range(args.repeat))
    print(f"bytes pass-through: {best:.3f} us per record")
    best = min(collector(args.records) for _ in range(args.repeat))
    print(f"record collector: {best:.3f} us per record (send and send_pending into aiokafka batches)")
    for cache in (10 * 1024 * 1024, 0):
        best = min(word_count(args.records // 10, cache) for _ in range(args.repeat))
        print(f"word count, cache {'on' if cache else 'off'}: {best:.3f} us CPU per word (both tasks, no producer)")


if __name__ == "__main__":
    main()
