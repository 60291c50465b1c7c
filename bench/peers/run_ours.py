"""Our runtime in the bench/peers harness: one KafkaStreams instance (or SparkRunner) in this process.

    .venv/bin/python bench/peers/run_ours.py BOOTSTRAP APP_ID INPUT OUTPUT WORKLOAD STATE_DIR COMMIT_MS
        [--cache-bytes N] [--guarantee at_least_once|exactly_once_v2] [--engine asyncio|spark] [--workers N]

Workloads: `passthrough` (bytes in, bytes out), `wc` (app/wordcount.py's DSL count, without its
windowed part), `windowed` (1-minute tumbling windows, grace 10 s, key `word@window-start`). The
asyncio engine runs until SIGTERM (`--workers N`: N stream threads as worker processes, docs/runtime.md); the Spark engine (wc only) runs `available_now` and returns.
The environment variable PEERS_OURS_CONFIG (a JSON object) adds to or overrides the configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.wordcount import build_topology
from streams_core import KafkaStreams, Materialized, Serdes, StreamsBuilder, TimeWindows, Topology

PRODUCER = {"producer.acks": "all", "producer.linger.ms": 100, "producer.batch.size": 16384, "producer.compression.type": "none"}


def topology(workload: str, input_topic: str, output: str) -> Topology:
    if workload == "wc":
        return build_topology(input_topic, output, windowed=False)
    builder = StreamsBuilder()
    if workload == "passthrough":
        builder.stream(input_topic, key_serde=Serdes.Bytes(), value_serde=Serdes.Bytes()).to(
            output, key_serde=Serdes.Bytes(), value_serde=Serdes.Bytes())
        return builder.build()
    if workload != "windowed":
        raise SystemExit(f"unknown workload {workload}")
    (builder.stream(input_topic, key_serde=Serdes.String(), value_serde=Serdes.String())
     .flat_map_values(lambda line: line.lower().split())
     .group_by(lambda key, word: word)
     .windowed_by(TimeWindows.of_size_and_grace(60_000, 10_000))
     .count(Materialized.as_("windowed-counts"))
     .to_stream()
     .map(lambda window, count: (f"{window.key}@{window.window.start}", str(count)))
     .to(output, key_serde=Serdes.String(), value_serde=Serdes.String()))
    return builder.build()


async def run_asyncio(config: dict[str, Any], topo: Topology) -> None:
    streams = KafkaStreams(topo, config)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await streams.start()
    await stop.wait()
    print(json.dumps({"metrics": streams.metrics()}, default=str), file=sys.stderr)  # into the run's log, for diagnosis
    await streams.close(timeout=30)


def run_spark(config: dict[str, Any], topo: Topology, state_dir: str) -> None:
    from streams_core.spark import SparkRunner, build_session

    spark = build_session({"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g"},
                          app_name="peers")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        SparkRunner(topo, config, spark=spark).run("available_now", Path(state_dir) / "checkpoints")
    finally:
        spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("bootstrap", "app_id", "input", "output", "workload", "state_dir"):
        parser.add_argument(name)
    parser.add_argument("commit_ms", type=int)
    parser.add_argument("--cache-bytes", type=int, default=10 * 1024 * 1024)
    parser.add_argument("--guarantee", default="at_least_once")
    parser.add_argument("--engine", choices=("asyncio", "spark"), default="asyncio")
    parser.add_argument("--workers", type=int, default=0, help="stream threads as worker processes (0: one inline thread)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    config = {"application.id": args.app_id, "bootstrap.servers": args.bootstrap, "state.dir": args.state_dir,
              "commit.interval.ms": args.commit_ms, "statestore.cache.max.bytes": args.cache_bytes,
              "processing.guarantee": args.guarantee, **PRODUCER}
    if args.workers:
        config |= {"num.stream.threads": args.workers, "stream.threads.mode": "process"}
    config |= json.loads(os.environ.get("PEERS_OURS_CONFIG", "{}"))  # for experiments, e.g. fetch or linger settings
    topo = topology(args.workload, args.input, args.output)
    if args.engine == "spark":
        run_spark(config, topo, args.state_dir)
    else:
        asyncio.run(run_asyncio(config, topo))
    return 0


if __name__ == "__main__":
    sys.exit(main())
