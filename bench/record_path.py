"""The runtime's per-record path without a broker: `StreamTask.add_records` then `process`.

A source -> map_values -> sink sub-topology (string serdes) on one partition, records added and
processed in batches of 500, output sent to a collector that only counts. Two variants: the
default timestamp extractor (the record's own timestamp) and a custom one (a function, which
gets a ConsumerRecord and the partition time). Prints the best of `--repeat` runs in µs per
record. To compare two versions, run it with each on PYTHONPATH, alternating, under the lock:

    git archive <base> streams_core | tar -x -C /tmp/base
    flock /tmp/bench.lock sh -c 'for i in 1 2 3; do for p in /tmp/base $PWD; do
        PYTHONPATH=$p .venv/bin/python bench/record_path.py; done; done'
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple, cast

from streams_core import Consumed, Serdes, StreamsBuilder, StreamsConfig
from streams_core.processor.task_id import TaskId
from streams_core.runtime.record_collector_impl import RecordCollectorImpl
from streams_core.runtime.stream_task import StreamTask
from streams_core.runtime.topic_partition import TopicPartition
from streams_core.state.internals.processor_state_manager import ProcessorStateManager

BATCH = 500


class Raw(NamedTuple):
    """A consumed record as bytes."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


class CountingCollector:
    """A record collector that counts what the sink sends."""

    def __init__(self) -> None:
        self.sent = 0

    def send(self, topic: str, key: Any, value: Any, timestamp: int, headers: Any, partition: int | None) -> None:
        self.sent += 1

    def partitions_for(self, topic: str) -> int:
        return 1


def run(custom_extractor: bool, records: int) -> float:
    """µs per record of one run over `records` records."""
    s = Serdes.String()
    consumed = Consumed.with_(s, s)
    if custom_extractor:
        consumed = consumed.with_timestamp_extractor(lambda record, partition_time: record.timestamp)
    builder = StreamsBuilder()
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for custom in (False, True):
        best = min(run(custom, args.records) for _ in range(args.repeat))
        print(f"{'custom' if custom else 'default'} extractor: {best:.3f} us per record")


if __name__ == "__main__":
    main()
