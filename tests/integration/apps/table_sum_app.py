"""Table-sum app: a table read from its topic with `topology.optimization=all`, summed per bucket.

    python -m tests.integration.apps.table_sum_app --bootstrap B --app-id A --input T --output O
        --state-dir D --guarantee at_least_once|exactly_once_v2 [--commit-interval-ms MS] [--standby N]

The input holds `key -> value` (Strings, the value a decimal integer): the table `table-store`
keeps each key's latest value, with the input topic as its changelog (no `-changelog` topic).
`group_by(bucket)` and `reduce(adder, subtractor)` sum the latest values per bucket (the key's
last character) and write `(bucket, sum)` (Long values) to the output. A sum is right only if
every update reached the aggregation once with the right old value: what a table restored from
its source topic past the committed offset would get wrong. Prints `RUNNING` as counting_app does.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from streams_core import Grouped, KafkaStreams, Materialized, Produced, Serdes, State, StreamsBuilder, Topology
from tests.integration.apps.counting_app import streams_config
from tests.integration.group_protocol import use_group_protocol_under_test

__all__ = ["TABLE_STORE", "build_topology", "main"]

TABLE_STORE = "table-store"
OPTIMIZED = {"topology.optimization": "all"}


def build_topology(input_topic: str, output_topic: str) -> Topology:
    s, long = Serdes.String(), Serdes.Long()
    builder = StreamsBuilder()
    table = builder.table(input_topic, Materialized.as_(TABLE_STORE), key_serde=s, value_serde=s)
    sums = table.group_by(lambda key, value: (key[-1], int(value)), Grouped.with_(s, long)).reduce(
        lambda total, value: total + value, lambda total, value: total - value, Materialized.with_(s, long)
    )
    sums.to_stream().to(output_topic, Produced.with_(s, long))
    return builder.build(OPTIMIZED)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.apps.table_sum_app")
    for flag in ("--bootstrap", "--app-id", "--input", "--output", "--state-dir"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--guarantee", default="at_least_once")
    parser.add_argument("--commit-interval-ms", type=int, default=None)
    parser.add_argument("--standby", type=int, default=0, help="num.standby.replicas")
    args = parser.parse_args(argv)
    use_group_protocol_under_test()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    extra: dict[str, object] = dict(OPTIMIZED)
    if args.commit_interval_ms is not None:
        extra["commit.interval.ms"] = args.commit_interval_ms
    config = streams_config(args.bootstrap, args.app_id, args.state_dir, args.guarantee, standby=args.standby, extra=extra)
    streams = KafkaStreams(build_topology(args.input, args.output), config)

    def on_state(new: State, old: State) -> None:
        if new is State.RUNNING:
            print("RUNNING", flush=True)

    streams.set_state_listener(on_state)
    streams.run()
    return 1 if streams.state is State.ERROR else 0


if __name__ == "__main__":
    sys.exit(main())
