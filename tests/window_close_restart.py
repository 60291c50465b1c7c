"""An emit-on-window-close windowed count run in two parts with a restart between them, shared by
the runtime's unit test (fake clients) and its broker test.

Tumbling windows of 10 s, no grace, a store that keeps windows for 60 s (so windows emitted in
the first run are still in the restored store when the second run starts). Expected outputs are
Kafka Streams' (`KStreamWindowAggregate` with the emit interval at 0, as ours always is), traced
record by record below: the second run's processor starts from the last close time the first
committed (`processorMetadataForKey("counts")`), so it emits each window once; without it, the
second run's first record would fetch every window from start 0 again and emit the four of the
first run a second time.
"""

from __future__ import annotations

from streams_core import EmitStrategy, Grouped, Materialized, Serdes, StreamsBuilder, TimeWindows, Topology

__all__ = ["EXPECTED", "LAST_CLOSE_TIMES", "RUNS", "STORE", "window_close_topology"]

STORE = "counts"
"""The count's store: the key of its last close time in the processor metadata (Kafka's too)."""

SIZE_MS, RETENTION_MS = 10_000, 60_000

RUNS: tuple[list[tuple[str, int]], list[tuple[str, int]]] = (
    # A@12 closes [0,10) (close time 12): A=2, B=1; B@15 closes nothing new (close time 15 adds no
    # window start); A@23 closes [10,20): A=1, B=1. Last close time committed: 23 s.
    [("A", 1_000), ("A", 5_000), ("B", 2_000), ("A", 12_000), ("B", 15_000), ("A", 23_000)],
    # B@25 and B@27: close times past 23 s but no new window start (fetch range [14 s, 15/17 s]
    # holds none); A@31 closes [20,30): A=1, B=2; B@42 closes [30,40): A=1. Committed: 42 s.
    [("B", 25_000), ("B", 27_000), ("A", 31_000), ("B", 42_000)],
)
"""(key, timestamp offset in ms) of each run, in produce order."""

EXPECTED: tuple[list[tuple[str, int]], list[tuple[str, int]]] = (
    [("A@0", 2), ("B@0", 1), ("A@10000", 1), ("B@10000", 1)],
    [("A@20000", 1), ("B@20000", 2), ("A@30000", 1)],
)
"""("key@window start offset", count) each run emits, in order."""

LAST_CLOSE_TIMES = (23_000, 42_000)
"""The last close time (offset) each run commits under `STORE`."""


def window_close_topology(source: str, sink: str, base: int = 0) -> Topology:
    """source (string keys) -> emit-on-close count per key and 10 s window -> sink, keyed
    "key@start offset" (start minus `base`), long counts."""
    s = Serdes.String()
    b = StreamsBuilder()
    (b.stream(source, key_serde=s, value_serde=s)
     .group_by_key(Grouped.with_(s, s))
     .windowed_by(TimeWindows.of_size_with_no_grace(SIZE_MS))
     .emit_strategy(EmitStrategy.on_window_close())
     .count(Materialized.as_(STORE).with_retention(RETENTION_MS))
     .to_stream()
     .map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start - base}", count))
     .to(sink, key_serde=s, value_serde=Serdes.Long()))  # fmt: skip
    topology: Topology = b.build()
    return topology
