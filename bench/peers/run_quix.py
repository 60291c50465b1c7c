"""Quix Streams in the bench/peers harness (runs in .cache/peers/quix, its own venv).

    .cache/peers/quix/bin/python bench/peers/run_quix.py BOOTSTRAP APP_ID INPUT OUTPUT WORKLOAD STATE_DIR COMMIT_MS

The same workloads as run_ours.py, written as a Quix user would: `group_by` (a `repartition__`
topic), a stateful `apply` counting in RocksDB with a changelog, `tumbling_window(...).count().current()`
for the windowed count. Quix has no record cache: every update is emitted. Runs until SIGTERM.
"""

from __future__ import annotations

import sys
from typing import Any

from quixstreams import Application, State
from quixstreams.models.serializers import Serializer

# librdkafka names of the harness's common producer settings.
PRODUCER = {"acks": "all", "linger.ms": 100, "batch.size": 16384, "compression.type": "none"}


class SecondAsText(Serializer):
    """Serializes the value part of a (key, count) pair as decimal text."""

    def __call__(self, value: Any, ctx: Any) -> bytes:
        return str(value[1]).encode()


def count(word: str, state: State) -> int:
    total = state.get("count", 0) + 1
    state.set("count", total)
    return total


def main() -> int:
    bootstrap, app_id, input_name, output_name, workload, state_dir, commit_ms = sys.argv[1:8]
    app = Application(broker_address=bootstrap, consumer_group=app_id, auto_offset_reset="earliest",
                      commit_interval=int(commit_ms) / 1000, state_dir=state_dir, producer_extra_config=PRODUCER,
                      processing_guarantee="at-least-once", loglevel="WARNING")
    if workload == "passthrough":
        source = app.topic(input_name, key_deserializer="bytes", value_deserializer="bytes")
        app.dataframe(source).to_topic(app.topic(output_name, key_serializer="bytes", value_serializer="bytes"))
        app.run()
        return 0
    source = app.topic(input_name, key_deserializer="str", value_deserializer="str")
    words = (app.dataframe(source)
             .apply(lambda line: line.lower().split(), expand=True)
             .group_by(lambda word: word, name="words", key_serializer="str", value_serializer="str",
                       key_deserializer="str", value_deserializer="str"))
    if workload == "wc":
        output = app.topic(output_name, key_serializer="str", value_serializer="str")
        words.apply(count, stateful=True).apply(str).to_topic(output)
    elif workload == "windowed":
        output = app.topic(output_name, key_serializer="str", value_serializer=SecondAsText())
        (words.tumbling_window(duration_ms=60_000, grace_ms=10_000).count().current()
         .apply(lambda window, key, timestamp, headers: (f"{key}@{window['start']}", window["value"]), metadata=True)
         .to_topic(output, key=lambda pair: pair[0]))
    else:
        raise SystemExit(f"unknown workload {workload}")
    app.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
