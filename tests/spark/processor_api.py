"""Processor API topologies the Spark tests run on both engines: key-value stores and a stream-time punctuation.

`Tally` counts records per key in a key-value store (a value ending in "!" deletes the key) and, every
`INTERVAL_MS` of the task's stream time, forwards every stored key with its count and the
punctuation's time: its output depends on where stream time crossed the interval grid, so it shows
whether punctuations fire when Kafka Streams fires them. `Previous` (a FixedKeyProcessor whose
supplier brings its own store, KIP-401) writes each value after the key's previous one.

As a process of its own (test_processor_api's kill test): `tally_topology` on SparkRunner,
available_now, 10 records per micro-batch:

    python -m tests.spark.processor_api BOOTSTRAP SOURCE OUTPUT CHECKPOINT_DIR
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from streams_core import (
    FixedKeyProcessor,
    Processor,
    PunctuationType,
    Record,
    Serdes,
    Stores,
    StreamsBuilder,
    Topology,
)

S = Serdes.String()
INTERVAL_MS = 100


def tallies_store(name: str = "tallies") -> Any:
    return Stores.key_value_store_builder(Stores.persistent_key_value_store(name), S, Serdes.Long())


class Tally(Processor[str, str, str, str]):
    """Counts per key in the store "tallies"; each punctuation forwards "count@time" for every key."""

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("tallies")
        context.schedule(INTERVAL_MS, PunctuationType.STREAM_TIME, self.punctuate)

    def process(self, record: Record[str, str]) -> None:
        if record.value.endswith("!"):
            self.store.delete(record.key)
        else:
            self.store.put(record.key, (self.store.get(record.key) or 0) + 1)

    def punctuate(self, timestamp: int) -> None:
        for key, count in list(self.store.all()):
            self.context.forward(Record(key, f"{count}@{timestamp}", timestamp))


class Previous(FixedKeyProcessor[str, str, str]):
    """Each value after the key's previous one ("<prev>><value>"), the previous one kept in the store "previous"."""

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("previous")

    def process(self, record: Any) -> None:
        before = self.store.get(record.key)
        self.store.put(record.key, record.value)
        self.context.forward(record.with_value(f"{before}>{record.value}"))


class PreviousSupplier:
    """A FixedKeyProcessorSupplier that is also a ConnectedStoreProvider."""

    def get(self) -> Previous:
        return Previous()

    def stores(self) -> Iterable[Any]:
        return [Stores.key_value_store_builder(Stores.in_memory_key_value_store("previous"), S, S)]


class Recent(Processor[str, str, str, str]):
    """Keeps each key's last value per 100 ms window in the window store "recent" (retention 300 ms);
    each punctuation forwards the windows the store still holds, oldest first."""

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("recent")
        context.schedule(INTERVAL_MS, PunctuationType.STREAM_TIME, self.punctuate)

    def process(self, record: Record[str, str]) -> None:
        self.store.put(record.key, record.value, record.timestamp - record.timestamp % INTERVAL_MS)

    def punctuate(self, timestamp: int) -> None:
        held = [f"{windowed.key}@{windowed.window.start}={value}" for windowed, value in self.store.all()]
        self.context.forward(Record("recent", " ".join(held), timestamp))


def window_topology(source: str, output: str) -> Topology:
    """The Processor API with a window store: source -> Recent -> sink."""
    store = Stores.window_store_builder(Stores.persistent_window_store("recent", 3 * INTERVAL_MS, INTERVAL_MS), S, S)
    return (Topology()
            .add_source("SOURCE", source, key_serde=S, value_serde=S)
            .add_processor("RECENT", Recent, "SOURCE")
            .add_state_store(store, "RECENT")
            .add_sink("SINK", output, "RECENT", key_serde=S, value_serde=S))  # fmt: skip


def tally_topology(source: str, output: str) -> Topology:
    """The Processor API: source -> Tally (store added with `add_state_store`, connected by name) -> sink."""
    return (Topology()
            .add_source("SOURCE", source, key_serde=S, value_serde=S)
            .add_processor("TALLY", Tally, "SOURCE")
            .add_state_store(tallies_store(), "TALLY")
            .add_sink("SINK", output, "TALLY", key_serde=S, value_serde=S))  # fmt: skip


def dsl_topology(source: str, output: str) -> Topology:
    """The DSL: `process_values(PreviousSupplier())` (its own store) -> `to`, and on to
    `process(Tally, "tallies")` (a store added to the builder) -> `to`."""
    builder = StreamsBuilder()
    builder.add_state_store(tallies_store())
    previous = builder.stream(source, key_serde=S, value_serde=S).process_values(PreviousSupplier())
    previous.to(output, key_serde=S, value_serde=S)
    previous.process(Tally, "tallies").to(output, key_serde=S, value_serde=S)
    return builder.build()


def main(bootstrap: str, source: str, output: str, checkpoints: str) -> int:
    from streams_core.spark import SparkRunner

    config = {"application.id": f"papi-{output}", "bootstrap.servers": bootstrap, "spark.master": "local[2]",
              "spark.sql.shuffle.partitions": "2"}  # fmt: skip
    runner = SparkRunner(tally_topology(source, output), config, source_options={"maxOffsetsPerTrigger": "10"},
                         progress=False)  # fmt: skip
    runner.run("available_now", checkpoints)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
