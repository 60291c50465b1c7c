"""What windowed and session tables serve around their retention, as Kafka Streams does.

Two rules meet here. An emit-on-close time-window store (Java's time-ordered window store) keeps
a window until its start is below stream time minus retention, one millisecond longer than the
other window stores. And a caching store serves what is in the cache, flushed or not, even once
the store below has expired it (Java's CachingWindowStore and CachingSessionStore merge the
cache with the store below and apply no retention of their own); the test driver's cache is on
by default, so Kafka's own tests show both.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import (
    EmitStrategy,
    KeyValue,
    Materialized,
    Serdes,
    SessionWindow,
    SessionWindows,
    StreamsBuilder,
    TestRecord,
    TimeWindows,
    TopologyTestDriver,
    Windowed,
    WindowedSerdes,
)
from tests.unit.test_dsl_window_emit import ON_CLOSE, ON_UPDATE, W, _add, _init

S = Serdes.String()


def _windowed_table(builder: StreamsBuilder, topic: str, grace: int, emit: EmitStrategy, cache: bool) -> Any:
    materialized = Materialized.as_(f"{topic}-Canonized").with_value_serde(S)
    materialized = materialized.with_caching_enabled() if cache else materialized.with_caching_disabled()
    return (
        builder.stream(topic, key_serde=S, value_serde=S)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(10, grace).advance_by(5))
        .emit_strategy(emit)
        .aggregate(_init, _add, materialized)
    )


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no cache"])
def test_join_of_two_emit_on_close_windowed_tables(cache: bool) -> None:
    """KStreamWindowAggregateTest.testJoin (ON_WINDOW_CLOSE, with and without cache): at stream
    time 20, retention 15, the window [5,15) is still found; [0,10) only while it is cached."""
    builder = StreamsBuilder()
    table1 = _windowed_table(builder, "topic1", 5, ON_CLOSE, cache)
    table2 = _windowed_table(builder, "topic2", 5, ON_CLOSE, cache)
    table1.to_stream().to("processor0")
    table2.to_stream().to("processor1")
    table1.join(table2, lambda p1, p2: f"{p1}%{p2}").to_stream().to("processor2")
    with TopologyTestDriver(builder.build(), {"application.id": "window-join"}) as driver:
        topic1, topic2 = driver.create_input_topic("topic1", S, S), driver.create_input_topic("topic2", S, S)
        serde = WindowedSerdes.time_windowed_serde_from(S, 10)
        processors = [driver.create_output_topic(f"processor{i}", serde, S) for i in range(3)]

        def processed(index: int) -> list[TestRecord[Any, Any]]:
            return processors[index].read_records_to_list()

        for key, timestamp in [("A", 0), ("B", 1), ("C", 2), ("D", 3), ("A", 9), ("A", 15)]:
            topic1.pipe_input(key, {"A": "1", "B": "2", "C": "3", "D": "4"}[key], timestamp)
        assert processed(0) == [
            TestRecord(W("A", 0, 10), "0+1+1", 9), TestRecord(W("B", 0, 10), "0+2", 1),
            TestRecord(W("C", 0, 10), "0+3", 2), TestRecord(W("D", 0, 10), "0+4", 3)]  # fmt: skip
        assert processed(1) == [] and processed(2) == []

        for key, value, timestamp in [("A", "1", 10), ("B", "2", 11), ("D", "4", 12), ("B", "2", 13), ("C", "3", 14),
                                      ("A", "1", 20)]:  # fmt: skip
            topic1.pipe_input(key, value, timestamp)
        assert processed(0) == [
            TestRecord(W("A", 5, 15), "0+1+1", 10), TestRecord(W("B", 5, 15), "0+2+2", 13),
            TestRecord(W("C", 5, 15), "0+3", 14), TestRecord(W("D", 5, 15), "0+4", 12)]  # fmt: skip
        assert processed(1) == [] and processed(2) == []

        for key, value, timestamp in [("A", "a", 0), ("B", "b", 1), ("C", "c", 2), ("D", "d", 10), ("A", "a", 15)]:
            topic2.pipe_input(key, value, timestamp)
        assert processed(0) == []
        closed_first = [TestRecord(W("A", 0, 10), "0+a", 0), TestRecord(W("B", 0, 10), "0+b", 1),
                        TestRecord(W("C", 0, 10), "0+c", 2)]  # fmt: skip
        if cache:  # topic1's windows [0,10) have expired below (stream time 20) but are still cached
            assert processed(1) == closed_first
            assert processed(2) == [
                TestRecord(W("A", 0, 10), "0+1+1%0+a", 9), TestRecord(W("B", 0, 10), "0+2%0+b", 1),
                TestRecord(W("C", 0, 10), "0+3%0+c", 2)]  # fmt: skip
        else:
            assert processed(2) == []

        for key, value, timestamp in [("A", "a", 5), ("B", "b", 6), ("D", "d", 7), ("D", "d", 18), ("A", "a", 21)]:
            topic2.pipe_input(key, value, timestamp)
        assert processed(0) == []
        closed_second = [TestRecord(W("A", 5, 15), "0+a", 5), TestRecord(W("B", 5, 15), "0+b", 6),
                         TestRecord(W("D", 5, 15), "0+d+d", 10)]  # fmt: skip
        assert processed(1) == (closed_second if cache else closed_first + closed_second)
        assert processed(2) == [  # [5,15) is live at stream time 20 with retention 15
            TestRecord(W("A", 5, 15), "0+1+1%0+a", 10), TestRecord(W("B", 5, 15), "0+2+2%0+b", 13),
            TestRecord(W("D", 5, 15), "0+4%0+d+d", 12)]  # fmt: skip


def _session_data(driver: TopologyTestDriver) -> None:
    """SessionWindowedKStreamImplTest.processData."""
    topic = driver.create_input_topic("input", S, S)
    for key, value, timestamp in [("1", "1", 10), ("1", "2", 15), ("1", "3", 600), ("2", "1", 600), ("2", "2", 599)]:
        topic.pipe_input(key, value, timestamp)


def _sessions(emit: EmitStrategy) -> Any:
    builder = StreamsBuilder()
    windowed = (builder.stream("input", key_serde=S, value_serde=S).group_by_key()
                .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(500)).emit_strategy(emit))  # fmt: skip
    return builder, windowed


def S_(key: str, start: int, end: int) -> Windowed[str]:
    return Windowed(key, SessionWindow(start, end))


@pytest.mark.parametrize("emit", [ON_UPDATE, ON_CLOSE], ids=["on update", "on close"])
@pytest.mark.parametrize("operation", ["count", "reduce", "aggregate"])
def test_materialized_session_store_serves_an_expired_session_still_cached(emit: EmitStrategy, operation: str) -> None:
    """SessionWindowedKStreamImplTest.shouldMaterializeCount / shouldMaterializeReduced /
    shouldMaterializeAggregated: session 1 [10,15] has passed retention (gap 500, stream time 600)
    and is still returned while it sits in the cache (emit on update; emit on close has no cache)."""
    builder, windowed = _sessions(emit)
    if operation == "count":
        windowed.count(Materialized.as_("store"))
        values = [2, 1, 2]
    elif operation == "reduce":
        windowed.reduce(lambda a, b: f"{a}+{b}", Materialized.as_("store"))
        values = ["1+2", "3", "1+2"]
    else:
        windowed.aggregate(_init, _add, lambda key, a, b: f"{a}+{b}", Materialized.as_("store").with_value_serde(S))
        values = ["0+0+1+2", "0+3", "0+0+1+2"]
    with TopologyTestDriver(builder.build(), {"application.id": "sessions"}) as driver:
        _session_data(driver)
        data = list(driver.get_session_store("store").fetch("1", "2"))
    sessions = [S_("1", 10, 15), S_("1", 600, 600), S_("2", 599, 600)]
    expected = [KeyValue(s, v) for s, v in zip(sessions, values, strict=True)]
    assert data == (expected if emit is ON_UPDATE else expected[1:])


@pytest.mark.parametrize("cache_bytes", [None, 0], ids=["cache", "no cache"])
def test_session_count_results_do_not_depend_on_the_cache(cache_bytes: int | None) -> None:
    """SessionWindowedKStreamImplTest.shouldCountSessionWindowedWithCachingEnabled / ...Disabled."""
    builder, windowed = _sessions(ON_UPDATE)
    windowed.count().to_stream().to("out")
    config: dict[str, Any] = {"application.id": "sessions"}
    if cache_bytes is not None:
        config["statestore.cache.max.bytes"] = cache_bytes
    with TopologyTestDriver(builder.build(), config) as driver:
        _session_data(driver)
        out = driver.create_output_topic("out", WindowedSerdes.session_windowed_serde_from(S), Serdes.Long())
        assert out.read_records_to_list() == [
            TestRecord(S_("1", 10, 10), 1, 10), TestRecord(S_("1", 10, 10), None, 10),
            TestRecord(S_("1", 10, 15), 2, 15), TestRecord(S_("1", 600, 600), 1, 600),
            TestRecord(S_("2", 600, 600), 1, 600), TestRecord(S_("2", 600, 600), None, 600),
            TestRecord(S_("2", 599, 600), 2, 600)]  # fmt: skip
