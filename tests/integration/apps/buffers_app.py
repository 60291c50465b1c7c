"""Buffers app: the DSL's buffering operators as a process to kill (tests/chaos/buffer_kills.py).

    python -m tests.integration.apps.buffers_app --topology suppress|join --bootstrap B --app-id A
        --input T --output O --state-dir D --guarantee at_least_once|exactly_once [--table T]
        [--commit-interval-ms MS]

`suppress`: a count per String key and 1 s tumbling window (no grace), suppressed until the
window closes (the buffer `final-store`), written as `key@window start` with the count (Long).
The counts store keeps windows for `RETENTION_MS`, not Kafka's default of size + grace (1 s):
under at-least-once a restart reprocesses up to a commit interval of records whose windows the
restored store may already have expired, and an expired window counts again from zero (in
Kafka Streams too; docs/runtime.md, "At-least-once and window retention").
`join`: the input stream (String keys and values) joined with the versioned table read from
`--table` (history 10 min) with a grace period of `GRACE_MS`, written as `value+table value`.

Prints `RUNNING` (flushed) each time the instance reaches RUNNING; logs to stderr; closes cleanly
on SIGTERM. Group settings as the counting app's (fast failure detection).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from streams_core import (
    BufferConfig,
    Joined,
    KafkaStreams,
    Materialized,
    Serdes,
    State,
    Stores,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Topology,
)
from tests.integration.apps.counting_app import streams_config
from tests.integration.group_protocol import use_group_protocol_under_test

__all__ = ["GRACE_MS", "RETENTION_MS", "WINDOW_MS", "join_topology", "main", "suppress_topology"]

WINDOW_MS = 1_000
RETENTION_MS = 600_000
GRACE_MS = 2_000
S = Serdes.String()


def suppress_topology(input_topic: str, output_topic: str) -> Topology:
    builder = StreamsBuilder()
    (builder.stream(input_topic, key_serde=S, value_serde=S)
     .group_by_key()
     .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS))
     .count(Materialized.as_("counts").with_retention(RETENTION_MS))
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final"))
     .to_stream()
     .map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}", count))
     .to(output_topic, key_serde=S, value_serde=Serdes.Long()))  # fmt: skip
    topology: Topology = builder.build()
    return topology


def join_topology(input_topic: str, table_topic: str, output_topic: str) -> Topology:
    builder = StreamsBuilder()
    versions = Stores.persistent_versioned_key_value_store("versions", 600_000)
    table = builder.table(table_topic, key_serde=S, value_serde=S, materialized=Materialized.as_(versions))
    (builder.stream(input_topic, key_serde=S, value_serde=S)
     .join(table, lambda value, table_value: f"{value}+{table_value}", Joined.with_(S, S, S, "graced", GRACE_MS))
     .to(output_topic, key_serde=S, value_serde=S))  # fmt: skip
    topology: Topology = builder.build()
    return topology


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.apps.buffers_app")
    parser.add_argument("--topology", choices=("suppress", "join"), default="suppress")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--table", default=None, help="the table topic of the join")
    parser.add_argument("--output", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--guarantee", choices=("at_least_once", "exactly_once"), default="at_least_once")
    parser.add_argument("--commit-interval-ms", type=int, default=None)
    args = parser.parse_args(argv)
    use_group_protocol_under_test()
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    extra = {} if args.commit_interval_ms is None else {"commit.interval.ms": args.commit_interval_ms}
    config = streams_config(args.bootstrap, args.app_id, args.state_dir, args.guarantee, extra=extra)
    if args.topology == "suppress":
        topology = suppress_topology(args.input, args.output)
    else:
        topology = join_topology(args.input, args.table, args.output)
    streams = KafkaStreams(topology, config)
    streams.set_state_listener(lambda new, old: print("RUNNING", flush=True) if new is State.RUNNING else None)
    streams.run()
    return 1 if streams.state is State.ERROR else 0


if __name__ == "__main__":
    sys.exit(main())
