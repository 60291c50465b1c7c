"""Counting app: a Processor-API topology that counts records per key in a logged SQLite store.

    python -m tests.integration.apps.counting_app --bootstrap B --app-id A --input T --output O
        --state-dir D --guarantee at_least_once|exactly_once [--standby N] [--application-server H:P]
        [--commit-interval-ms MS] [--caching] [--cache-max-bytes N] [--autostop eol]
        [--group-protocol classic|streams]

Each input record (String key, any value) increments the key's count in the persistent
key-value store `counts` (changelog `<app id>-counts-changelog`) and forwards `(key, count)` to
the output topic (String key, Long value: 8-byte big-endian). So for every key the output is the
sequence 1, 2, 3, ... of its counts, which is what the exactly-once test checks.

The process prints `RUNNING` (flushed) every time the instance reaches state RUNNING, logs to
stderr, and closes cleanly on SIGTERM/SIGINT (`KafkaStreams.run()`). Group settings are fast
(session 6 s, heartbeat 0.5 s) so that a killed instance leaves the group quickly.
`build_topology` and `streams_config` are also used by tests that run the same application
in-process (to look into its tasks and stores).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from streams_core import KafkaStreams, Processor, ProcessorContext, Record, Serdes, State, Stores, Topology
from tests.integration.group_protocol import use_group_protocol_under_test

__all__ = ["STORE", "CountProcessor", "build_topology", "main", "streams_config"]

STORE = "counts"

FAST_GROUP_CONFIG: dict[str, Any] = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "commit.interval.ms": 100,
    "poll.ms": 50,
    "linger.ms": 5,
}
"""Quick failure detection and commits (the test broker's group.min.session.timeout.ms is 1000)."""


class CountProcessor(Processor[str, Any, str, int]):
    """count[key] += 1, then forward (key, count)."""

    def init(self, context: ProcessorContext[str, int]) -> None:
        self.context = context
        self.store = context.get_state_store(STORE)

    def process(self, record: Record[str, Any]) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


def build_topology(input_topic: str, output_topic: str, *, caching: bool = False) -> Topology:
    """SOURCE(input) -> COUNT (store `counts`, logged) -> SINK(output)."""
    store = Stores.key_value_store_builder(Stores.persistent_key_value_store(STORE), Serdes.String(), Serdes.Long())
    if caching:
        store = store.with_caching_enabled()
    return (
        Topology()
        .add_source("SOURCE", input_topic, key_serde=Serdes.String(), value_serde=Serdes.Bytes())
        .add_processor("COUNT", CountProcessor, "SOURCE")
        .add_state_store(store, "COUNT")
        .add_sink("SINK", output_topic, "COUNT", key_serde=Serdes.String(), value_serde=Serdes.Long())
    )


def streams_config(
    bootstrap: str,
    app_id: str,
    state_dir: str | Path,
    guarantee: str = "at_least_once",
    *,
    standby: int = 0,
    application_server: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The instance configuration: fast group settings, then `extra` (Kafka Streams names)."""
    config: dict[str, Any] = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "state.dir": str(state_dir),
        "processing.guarantee": guarantee,
        "num.standby.replicas": standby,
        **FAST_GROUP_CONFIG,
    }
    if application_server:
        config["application.server"] = application_server
    config.update(extra or {})
    return config


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.apps.counting_app", description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True, help="bootstrap servers host:port")
    parser.add_argument("--app-id", required=True, help="application.id")
    parser.add_argument("--input", required=True, help="input topic")
    parser.add_argument("--output", required=True, help="output topic")
    parser.add_argument("--state-dir", required=True, help="state.dir")
    parser.add_argument("--guarantee", choices=("at_least_once", "exactly_once"), default="at_least_once")
    parser.add_argument("--standby", type=int, default=0, help="num.standby.replicas")
    parser.add_argument("--application-server", default=None, help="application.server host:port")
    parser.add_argument("--commit-interval-ms", type=int, default=None, help="commit.interval.ms (default 100)")
    parser.add_argument("--caching", action="store_true", help="build the store with_caching_enabled()")
    parser.add_argument("--cache-max-bytes", type=int, default=None, help="statestore.cache.max.bytes")
    parser.add_argument("--autostop", choices=("eol",), default=None, help="autostop.at (KIP-95 batch run)")
    parser.add_argument("--group-protocol", choices=("classic", "streams"), default=None, help="group.protocol")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    use_group_protocol_under_test()
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    extra: dict[str, Any] = {}
    if args.commit_interval_ms is not None:
        extra["commit.interval.ms"] = args.commit_interval_ms
    if args.cache_max_bytes is not None:
        extra["statestore.cache.max.bytes"] = args.cache_max_bytes
    if args.autostop is not None:
        extra["autostop.at"] = args.autostop
    if args.group_protocol is not None:
        extra["group.protocol"] = args.group_protocol
    config = streams_config(
        args.bootstrap,
        args.app_id,
        args.state_dir,
        args.guarantee,
        standby=args.standby,
        application_server=args.application_server,
        extra=extra,
    )
    streams = KafkaStreams(build_topology(args.input, args.output, caching=args.caching), config)

    def on_state(new: State, old: State) -> None:
        if new is State.RUNNING:
            print("RUNNING", flush=True)

    streams.set_state_listener(on_state)
    streams.run()
    return 1 if streams.state is State.ERROR else 0


if __name__ == "__main__":
    sys.exit(main())
