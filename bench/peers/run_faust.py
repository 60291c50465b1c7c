"""Faust (faust-streaming, RocksDB through rocksdict) in the bench/peers harness (its own venv).

    .cache/peers/faust/bin/python bench/peers/run_faust.py BOOTSTRAP APP_ID INPUT OUTPUT WORKLOAD STATE_DIR COMMIT_MS

The same workloads as run_ours.py, as Faust's own word count example writes them: one agent splits
lines and sends each word keyed by itself to an internal `<app>-words-repartition` topic, a second
agent counts in a Table (RocksDB, changelog) and sends every new count. The windowed count is a
`tumbling(60)` table relative to the stream's timestamps (Faust has no grace period). Runs until SIGTERM.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import faust
from faust.streams import current_event


def build(bootstrap: str, app_id: str, input_name: str, output_name: str, workload: str, state_dir: str,
          commit_ms: str) -> faust.App:
    app = faust.App(app_id, broker=f"kafka://{bootstrap}", store="rocksdb://", datadir=state_dir, topic_partitions=4,
                    broker_commit_interval=int(commit_ms) / 1000, consumer_auto_offset_reset="earliest",
                    producer_acks=-1, producer_linger_ms=100, producer_max_batch_size=16384,
                    producer_compression_type=None, processing_guarantee="at_least_once", web_enabled=False)
    source = app.topic(input_name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
    output = app.topic(output_name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
    if workload == "passthrough":
        @app.agent(source)
        async def copy(stream: Any) -> None:
            async for event in stream.events():
                await output.send(key=event.key, value=event.value)
        return app
    words = app.topic(f"{app_id}-words-repartition", key_type=bytes, value_type=bytes, key_serializer="raw",
                      value_serializer="raw", partitions=4, internal=True)

    @app.agent(source)
    async def split(lines: Any) -> None:
        async for event in lines.events():  # the input's timestamp goes along, as Kafka Streams forwards it
            timestamp = event.message.timestamp
            for word in event.value.lower().split():
                await words.send(key=word, value=word, timestamp=timestamp)

    if workload == "wc":
        counts = app.Table("counts", default=int, partitions=4)

        @app.agent(words)
        async def count(stream: Any) -> None:
            async for word in stream:
                counts[word] += 1
                await output.send(key=word, value=str(counts[word]).encode())
    elif workload == "windowed":
        windowed = app.Table("windowed-counts", default=int, partitions=4).tumbling(
            60, expires=timedelta(hours=1)).relative_to_stream()

        @app.agent(words)
        async def count_windowed(stream: Any) -> None:
            async for word in stream:
                windowed[word] += 1
                event = current_event()
                assert event is not None
                start = int(event.message.timestamp * 1000) // 60_000 * 60_000
                await output.send(key=b"%s@%d" % (word, start), value=str(windowed[word].current()).encode())
    else:
        raise SystemExit(f"unknown workload {workload}")
    return app


def main() -> int:
    app = build(*sys.argv[1:8])
    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn"]
    app.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
