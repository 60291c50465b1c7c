"""The word count on the Spark engine: `python -m app wordcount --engine spark [--autostop eol]`.

Same topology and topics as the asyncio service (without the windowed count, which the Spark
runner does not compile yet): reads `TextLinesTopic`, writes `WordsWithCountsTopic` in our
changelog format, so a `KafkaStreams` app (or the asyncio service) can serve the counts.
`--autostop eol` runs `availableNow` (what is in the topic now, then exit 0); without it the
queries run until SIGINT/SIGTERM. Checkpoints live in `<state-dir>/<application-id>/spark`.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
from typing import Any

from app.service import EXIT_APP_FAILED, ServiceError, _ensure_topics, kafka_bootstrap
from app.settings import ServiceSettings
from app.wordcount import INPUT_TOPIC, OUTPUT_TOPIC, build_topology

__all__ = ["run_spark_wordcount"]

log = logging.getLogger(__name__)


def run_spark_wordcount(
    settings: ServiceSettings,
    autostop: str | None,
    spark_master: str | None,
    input_topic: str = INPUT_TOPIC,
    output_topic: str = OUTPUT_TOPIC,
    max_offsets_per_trigger: int | None = None,
) -> int:
    """Run the word count on Spark; 0 when done (or stopped by a signal), 2 if Kafka is unreachable, 4 on failure."""
    from streams_core.spark import SparkRunner

    try:
        with kafka_bootstrap(settings) as bootstrap:
            config: dict[str, Any] = {
                "application.id": settings.application_id,
                "bootstrap.servers": bootstrap,
                "state.dir": settings.state_dir,
                **settings.properties,  # client security keys (flags, STREAMS_*, --command-config) among them
            }
            asyncio.run(_ensure_topics(config, dict.fromkeys((input_topic, output_topic), 4), timeout=15))
            if spark_master:
                config["spark.master"] = spark_master
            options = {"maxOffsetsPerTrigger": str(max_offsets_per_trigger)} if max_offsets_per_trigger else None
            runner = SparkRunner(build_topology(input_topic, output_topic, windowed=False), config, source_options=options)
            print(runner.plan().describe(), flush=True)
            if threading.current_thread() is threading.main_thread():
                for sig in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(sig, lambda *_: runner.stop())
            try:
                runner.run("available_now" if autostop == "eol" else "continuous")
            except Exception as exc:
                if runner.stopped:
                    return 0
                raise ServiceError(EXIT_APP_FAILED, f"{settings.application_id} failed on Spark: {exc}") from exc
            if autostop != "eol":
                print("stopped", flush=True)
                return 0
            total = sum(p.get("numInputRows", 0) for p in runner.progress.get(0, []))
            print(f"done: {total} lines read from {input_topic}", flush=True)
            return 0
    except ServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
