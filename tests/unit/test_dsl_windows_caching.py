"""Windowed and session aggregations with the record cache on and off, in the TopologyTestDriver.

The driver commits (and so flushes the cache) after each piped record, as Kafka Streams' does;
updates of one windowed key made while one record is processed (a `flat_map_values` fanning out)
reach downstream once with the cache on. Final results must be the same either way, as long as
nothing passes retention: the stores keep every window here, since a caching store serves an
expired window or session while it is cached, as Kafka Streams' do (test_dsl_expired_windows.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from streams_core import (
    BufferConfig,
    EmitStrategy,
    Grouped,
    Materialized,
    Processor,
    Record,
    Serdes,
    SessionWindow,
    SessionWindows,
    SlidingWindows,
    Stores,
    StreamsBuilder,
    Suppressed,
    TimeWindow,
    TimeWindows,
    Topology,
    TopologyTestDriver,
    Windowed,
)

S, L = Serdes.String(), Serdes.Long()
OFF = {"application.id": "wcache", "statestore.cache.max.bytes": 0}
ON = {"application.id": "wcache"}
TINY = {"application.id": "wcache", "statestore.cache.max.bytes": 400}


def _numbers(builder: StreamsBuilder, topic: str = "in") -> Any:
    """Each input record holds several numbers: one record, several updates of its windows."""
    return (builder.stream(topic, key_serde=S, value_serde=S).flat_map_values(str.split).map_values(int)
            .group_by_key(Grouped.with_(S, L)))  # fmt: skip


def _add(key: Any, value: int, total: int) -> int:
    return total + value


def _merge(key: Any, one: int, two: int) -> int:
    return one + two


def _out(table: Any) -> None:
    (table.to_stream().map(lambda k, v: (f"{k.key}@{k.window.start}/{k.window.end}", v))
     .to("out", key_serde=S, value_serde=L))  # fmt: skip


Case = Callable[[StreamsBuilder, Materialized], None]

CASES: dict[str, Case] = {
    "tumbling count": lambda b, m: _out(_numbers(b).windowed_by(TimeWindows.of_size_and_grace(10, 5)).count(m)),
    "hopping aggregate": lambda b, m: _out(
        _numbers(b).windowed_by(TimeWindows.of_size_and_grace(20, 5).advance_by(5)).aggregate(lambda: 0, _add, m)
    ),
    "sliding reduce": lambda b, m: _out(
        _numbers(b).windowed_by(SlidingWindows.of_time_difference_and_grace(10, 5)).reduce(lambda x, y: x + y, m)
    ),
    "session count": lambda b, m: _out(_numbers(b).windowed_by(SessionWindows.of_inactivity_gap_and_grace(6, 4)).count(m)),
    "session aggregate": lambda b, m: _out(
        _numbers(b).windowed_by(SessionWindows.of_inactivity_gap_and_grace(6, 4)).aggregate(lambda: 0, _add, _merge, m)
    ),
    "cogrouped tumbling": lambda b, m: _out(
        _numbers(b).cogroup(_add).cogroup(_numbers(b, "in2"), lambda k, v, t: t + 10 * v)
        .windowed_by(TimeWindows.of_size_and_grace(10, 5)).aggregate(lambda: 0, materialized=m)
    ),
    "cogrouped sliding": lambda b, m: _out(
        _numbers(b).cogroup(_add).cogroup(_numbers(b, "in2"), lambda k, v, t: t + 10 * v)
        .windowed_by(SlidingWindows.of_time_difference_and_grace(10, 5)).aggregate(lambda: 0, materialized=m)
    ),
    "cogrouped session": lambda b, m: _out(
        _numbers(b).cogroup(_add).cogroup(_numbers(b, "in2"), lambda k, v, t: t + 10 * v)
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(6, 4)).aggregate(lambda: 0, _merge, materialized=m)
    ),
    "emit on window close": lambda b, m: _out(
        _numbers(b).windowed_by(TimeWindows.of_size_and_grace(10, 5))
        .emit_strategy(EmitStrategy.on_window_close()).count(m)
    ),
    "suppressed until window closes": lambda b, m: _out(
        _numbers(b).windowed_by(TimeWindows.of_size_and_grace(10, 5)).count(m)
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    ),
}


def _records(seed: int) -> list[tuple[str, str, str, int]]:
    """(topic, key, numbers, timestamp): mostly ascending time, some out of order, some late."""
    rnd = random.Random(seed)
    records = []
    for i in range(150):
        timestamp = max(0, 2 * i + rnd.randint(-25, 3))
        numbers = " ".join(str(rnd.randint(1, 9)) for _ in range(rnd.randint(1, 4)))
        records.append((rnd.choice(("in", "in", "in2")), rnd.choice("abc"), numbers, timestamp))
    return records


def _run(name: str, config: dict[str, Any], materialized: Materialized) -> tuple[list[Any], dict[str, Any]]:
    """The output records and the store's final content."""
    builder = StreamsBuilder()
    CASES[name](builder, materialized)
    with TopologyTestDriver(builder.build(), config) as driver:
        topics = {"in": driver.create_input_topic("in", S, S)}
        topics["in2"] = driver.create_input_topic("in2", S, S) if name.startswith("cogrouped") else topics["in"]
        for topic, key, numbers, timestamp in _records(7):
            topics[topic].pipe_input(key, numbers, timestamp=timestamp)
        output = driver.create_output_topic("out", S, L).read_key_values_to_list()
        store = driver.get_state_store("store")
        if hasattr(store, "find_sessions"):
            content = {f"{kv.key.key}@{kv.key.window}": kv.value for kv in store.fetch(None, None)}
        else:
            content = {f"{kv.key.key}@{kv.key.window}": kv.value for kv in store.all()}
    return output, content


def _latest(output: list[Any]) -> dict[str, Any]:
    latest: dict[str, Any] = {}
    for key, value in output:
        latest[key] = value
    return {key: value for key, value in latest.items() if value is not None}


@pytest.mark.parametrize("name", list(CASES))
def test_windowed_aggregations_give_the_same_final_results_with_the_cache_on_and_off(name: str) -> None:
    store = Materialized.as_("store").with_value_serde(L).with_retention(10_000)
    reference, reference_store = _run(name, OFF, store)
    assert reference and reference_store, "the input exercises the aggregation"
    runs = {
        "cache on": _run(name, ON, store),
        "tiny cache (evictions)": _run(name, TINY, store),
        "caching disabled per store": _run(name, ON, store.with_caching_disabled()),
    }
    for label, (output, content) in runs.items():
        assert _latest(output) == _latest(reference), f"{label}: last value per windowed key"
        assert content == reference_store, f"{label}: store content"
        assert len(output) <= len(reference), f"{label}: never more updates than without the cache"
    assert len(runs["cache on"][0]) < len(reference) or name.startswith(("emit", "suppressed")), (
        "the cache compacts updates of a window made while one record is processed"
    )
    assert runs["caching disabled per store"][0] == reference, "with_caching_disabled() forwards every update"


@pytest.mark.parametrize(
    ("windows", "expected_on", "expected_off"),
    [
        (TimeWindows.of_size_with_no_grace(10), [("k@0/10", 3)], [("k@0/10", 1), ("k@0/10", 2), ("k@0/10", 3)]),
        (SessionWindows.with_inactivity_gap(10), [("k@4/4", 3)], [("k@4/4", 1), ("k@4/4", 2), ("k@4/4", 3)]),
    ],
)
def test_the_cache_forwards_one_update_per_windowed_key_and_commit(
    windows: Any, expected_on: list[Any], expected_off: list[Any]
) -> None:
    for config, expected in ((ON, expected_on), (OFF, expected_off)):
        builder = StreamsBuilder()
        _out(_numbers(builder).windowed_by(windows).count())
        with TopologyTestDriver(builder.build(), config) as driver:
            driver.create_input_topic("in", S, S).pipe_input("k", "1 1 1", timestamp=4)
            assert driver.create_output_topic("out", S, L).read_key_values_to_list() == expected


class _CountThenRead(Processor):
    """Counts each word of a record into its window, reading the store between writes, as the DSL forwards."""

    reads: ClassVar[list[Any]] = []

    def init(self, context: Any) -> None:
        self.context = context
        self.windows = context.get_state_store("windows")
        self.sessions = context.get_state_store("sessions")
        for store in (self.windows, self.sessions):
            assert store.set_flush_listener(self._forward)

    def _forward(self, key: Any, new: Any, old: Any, timestamp: int) -> None:
        self.context.forward(Record(f"{key.key}@{key.window.start}/{key.window.end}", [new, old], timestamp))

    def process(self, record: Record[Any, Any]) -> None:
        for word in record.value.split():
            count = (self.windows.fetch(word, 0) or 0) + 1
            self.windows.put(word, count, 0)
            session = Windowed(word, SessionWindow(record.timestamp, record.timestamp))
            self.sessions.put(session, count)
            _CountThenRead.reads.append((
                word, list(self.windows.all()), list(self.windows.fetch(word, 0, 100)),
                list(self.windows.backward_fetch(None, None, 0, 100)), list(self.sessions.fetch(word)),
            ))  # fmt: skip


def test_reads_through_caching_stores_see_cached_writes_and_emit_nothing() -> None:
    windows = Stores.window_store_builder(Stores.persistent_window_store("windows", 1000, 10), S, L)
    sessions = Stores.session_store_builder(Stores.in_memory_session_store("sessions", 1000), S, L)
    topology = (
        Topology()
        .add_source("S", "in", key_serde=S, value_serde=S)
        .add_processor("P", _CountThenRead, "S")
        .add_state_store(windows.with_caching_enabled(), "P")
        .add_state_store(sessions.with_caching_enabled(), "P")
        .add_sink("OUT", "out", "P", key_serde=S, value_serde=Serdes.Json())
    )
    _CountThenRead.reads = []
    with TopologyTestDriver(topology, ON) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "a a b", timestamp=5)
        out = driver.create_output_topic("out", S, Serdes.Json()).read_key_values_to_list()
        window_log = driver.create_output_topic("wcache-windows-changelog", Serdes.ByteArray(), L).read_values_to_list()
        session_log = driver.create_output_topic("wcache-sessions-changelog", Serdes.ByteArray(), L).read_values_to_list()
    a, b = Windowed("a", TimeWindow(0, 10)), Windowed("b", TimeWindow(0, 10))
    first, second, third = _CountThenRead.reads
    assert first[1:] == ([(a, 1)], [(0, 1)], [(a, 1)], [(Windowed("a", SessionWindow(5, 5)), 1)])
    assert second[1:] == ([(a, 2)], [(0, 2)], [(a, 2)], [(Windowed("a", SessionWindow(5, 5)), 2)])
    assert third[1] == [(a, 2), (b, 1)] and third[3] == [(b, 1), (a, 2)], "merged in order, backwards too"
    assert sorted(map(tuple, out)) == sorted([
        ("a@0/10", [2, None]), ("b@0/10", [1, None]), ("a@5/5", [2, None]), ("b@5/5", [1, None])])  # fmt: skip
    assert sorted(window_log) == [1, 2] and sorted(session_log) == [1, 2], "one changelog record per key"
