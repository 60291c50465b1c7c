"""Window boundaries, drop counts and `emit_strategy` (KIP-825), with Kafka Streams' own inputs.

Inputs and expected outputs come from Kafka Streams' KStreamSlidingWindowAggregateTest,
KStreamWindowAggregateTest and KStreamSessionWindowAggregateProcessorTest (their emit
interval set to 0, which is what we always do). Aggregates are strings, "0" then "+value".
"""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import (
    EmitStrategy,
    Materialized,
    Serdes,
    SessionWindow,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TestRecord,
    TimeWindow,
    TimeWindows,
    TopologyTestDriver,
    Windowed,
    WindowedSerdes,
)

S = Serdes.String()
CONFIG = {"application.id": "emit", "statestore.cache.max.bytes": 0}
ON_UPDATE, ON_CLOSE = EmitStrategy.on_window_update(), EmitStrategy.on_window_close()


def W(key: str, start: int, end: int) -> Windowed[str]:
    return Windowed(key, TimeWindow(start, end))


def _init() -> str:
    return "0"


def _add(key: Any, value: str, aggregate: str) -> str:
    return f"{aggregate}+{value}"


def run(windowed: Any, records: list[tuple[str, str, int]], size: int, materialized: Any = None) -> tuple[Any, int]:
    """Aggregate `windowed` from topic "in" to "out"; the output records and the driver's drop count."""
    windowed.aggregate(_init, _add, materialized or Materialized.as_("store")).to_stream().to("out")
    with TopologyTestDriver(windowed._grouped._builder.topology, CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record_list(records)
        serde = WindowedSerdes.time_windowed_serde_from(S, size)
        return driver.create_output_topic("out", serde, S).read_records_to_list(), driver.dropped_records


def grouped() -> Any:
    return StreamsBuilder().stream("in", key_serde=S, value_serde=S).group_by_key()


def by_start(out: list[TestRecord[Any, Any]]) -> dict[int, set[tuple[str, int]]]:
    """Kafka's `gatherOutput`: the (value, timestamp) pairs forwarded per window start."""
    gathered: dict[int, set[tuple[str, int]]] = {}
    for record in out:
        gathered.setdefault(record.key.window.start, set()).add((record.value, record.timestamp))
    return gathered


NO_GRACE_INPUT = [("A", "1", 100), ("A", "2", 105), ("A", "3", 106), ("A", "4", 103), ("A", "5", 113), ("A", "6", 110)]


def test_sliding_windows_with_no_grace_keep_the_window_ending_at_stream_time_open() -> None:
    """KStreamSlidingWindowAggregateTest.testNoGracePeriodSmallInput, emitting every update."""
    out, dropped = run(grouped().windowed_by(SlidingWindows.of_time_difference_with_no_grace(50)), NO_GRACE_INPUT, 50)
    assert by_start(out) == {
        50: {("0+1", 100)},
        55: {("0+1+2", 105)},
        56: {("0+1+2+3", 106), ("0+1+2+3+4", 106)},
        63: {("0+1+2+3+4+5", 113), ("0+1+2+3+4+5+6", 113)},
        101: {("0+2", 105), ("0+2+3", 106), ("0+2+3+4", 106), ("0+2+3+4+5", 113), ("0+2+3+4+5+6", 113)},
        104: {("0+2+3", 106), ("0+2+3+5", 113), ("0+2+3+5+6", 113)},
        106: {("0+3", 106), ("0+3+5", 113), ("0+3+5+6", 113)},
        107: {("0+5", 113), ("0+5+6", 113)},
        111: {("0+5", 113)},
    }
    # the order: for each record the windows it updates newest first (Java reads its store
    # backwards), then the previous record's right window, its own left and right windows
    assert [(r.key.window.start, r.value, r.timestamp) for r in out] == [
        (50, "0+1", 100),
        (101, "0+2", 105), (55, "0+1+2", 105),
        (101, "0+2+3", 106), (106, "0+3", 106), (56, "0+1+2+3", 106),
        (101, "0+2+3+4", 106), (56, "0+1+2+3+4", 106), (104, "0+2+3", 106),
        (106, "0+3+5", 113), (104, "0+2+3+5", 113), (101, "0+2+3+4+5", 113), (107, "0+5", 113),
        (63, "0+1+2+3+4+5", 113),
        (107, "0+5+6", 113), (106, "0+3+5+6", 113), (104, "0+2+3+5+6", 113), (101, "0+2+3+4+5+6", 113),
        (63, "0+1+2+3+4+5+6", 113), (111, "0+5", 113),
    ]  # fmt: skip
    assert all(r.key.window.end == r.key.window.start + 50 for r in out)
    # 4@103 finds [55,105] and its own left window [53,103] closed (stream time 106), 6@110 its
    # left window [60,110] (stream time 113): one drop per closed window, as Java counts
    assert dropped == 3


def test_sliding_windows_emit_on_window_close() -> None:
    """The same input with `EmitStrategy.on_window_close()`: windows ending before 113 come out once."""
    windowed = grouped().windowed_by(SlidingWindows.of_time_difference_with_no_grace(50)).emit_strategy(ON_CLOSE)
    out, dropped = run(windowed, NO_GRACE_INPUT, 50)
    assert out == [
        TestRecord(W("A", 50, 100), "0+1", 100),
        TestRecord(W("A", 55, 105), "0+1+2", 105),
        TestRecord(W("A", 56, 106), "0+1+2+3+4", 106),
    ]
    assert dropped == 3


LATE_INPUT = [("k", "100", 200), ("k", "0", 100), ("k", "1", 101), ("k", "2", 102), ("k", "3", 103),
              ("k", "4", 104), ("k", "5", 105), ("k", "6", 15), ("k", "101", 300), ("k", "102", 400)]  # fmt: skip


@pytest.mark.parametrize("emit", [ON_UPDATE, ON_CLOSE])
def test_sliding_windows_count_one_drop_per_expired_window(emit: EmitStrategy) -> None:
    """KStreamSlidingWindowAggregateTest.shouldLogAndMeterWhenSkippingExpiredWindowByGrace."""
    windowed = grouped().windowed_by(SlidingWindows.of_time_difference_and_grace(10, 90)).emit_strategy(emit)
    out, dropped = run(windowed, LATE_INPUT, 10)
    expected = [TestRecord(W("k", 190, 200), "0+100", 200), TestRecord(W("k", 290, 300), "0+101", 300)]
    if emit == ON_UPDATE:
        expected.append(TestRecord(W("k", 390, 400), "0+102", 400))
    assert out == expected
    assert dropped == 7


HOPPING_LATE_INPUT = [("k", "100", 100), ("k", "0", 0), ("k", "1", 1), ("k", "2", 2), ("k", "3", 3), ("k", "4", 4),
                      ("k", "5", 5), ("k", "6", 6), ("k", "105", 105), ("k", "106", 106)]  # fmt: skip


@pytest.mark.parametrize("emit", [ON_UPDATE, ON_CLOSE])
def test_hopping_windows_count_one_drop_per_expired_window(emit: EmitStrategy) -> None:
    """KStreamWindowAggregateTest.shouldLogAndMeterWhenSkippingExpiredWindow: 5 and 6 update [5,15)
    but are dropped for [0,10): 7 drops."""
    windows = TimeWindows.of_size_and_grace(10, 90).advance_by(5)
    materialized = Materialized.as_("store").with_logging_disabled().with_retention(100)
    out, dropped = run(grouped().windowed_by(windows).emit_strategy(emit), HOPPING_LATE_INPUT, 10, materialized)
    if emit == ON_CLOSE:
        assert out == [TestRecord(W("k", 5, 15), "0+5+6", 6)]  # window close time 15 at 105
    else:
        assert out == [
            TestRecord(W("k", 95, 105), "0+100", 100), TestRecord(W("k", 100, 110), "0+100", 100),
            TestRecord(W("k", 5, 15), "0+5", 5), TestRecord(W("k", 5, 15), "0+5+6", 6),
            TestRecord(W("k", 100, 110), "0+100+105", 105), TestRecord(W("k", 105, 115), "0+105", 105),
            TestRecord(W("k", 100, 110), "0+100+105+106", 106), TestRecord(W("k", 105, 115), "0+105+106", 106),
        ]  # fmt: skip
    assert dropped == 7


def test_time_windows_emit_on_close_once_per_window_in_start_then_key_order() -> None:
    """KStreamWindowAggregateTest.shouldEmitFromLastEmitTime (first processor)."""
    windowed = grouped().windowed_by(TimeWindows.of_size_and_grace(10, 5).advance_by(5)).emit_strategy(ON_CLOSE)
    out, _ = run(windowed, [("A", "1", 0), ("B", "2", 5), ("C", "3", 15), ("D", "4", 25)], 10)
    assert out == [
        TestRecord(W("A", 0, 10), "0+1", 0),
        TestRecord(W("B", 0, 10), "0+2", 5),  # at 15: close time 10
        TestRecord(W("B", 5, 15), "0+2", 5),
        TestRecord(W("C", 10, 20), "0+3", 15),  # at 25: close time 20
    ]


def test_time_windows_with_a_large_grace_emit_nothing_on_close() -> None:
    """KStreamWindowAggregateTest.testAggBasic with on_window_close: grace 100, no window closes."""
    windowed = grouped().windowed_by(TimeWindows.of_size_and_grace(10, 100).advance_by(5)).emit_strategy(ON_CLOSE)
    out, dropped = run(windowed, [("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("A", "1", 14), ("B", "1", 3)], 10)
    assert out == [] and dropped == 0


def test_emit_final_results_carry_the_triggering_records_headers() -> None:
    windowed = grouped().windowed_by(TimeWindows.of_size_with_no_grace(10)).emit_strategy(ON_CLOSE)
    windowed.aggregate(_init, _add).to_stream().to("out")
    with TopologyTestDriver(windowed._grouped._builder.topology, CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        source.pipe_input("a", "1", timestamp=3, headers=[("h", b"first")])
        source.pipe_input("b", "2", timestamp=12, headers=[("h", b"closer")])
        out = driver.create_output_topic("out", WindowedSerdes.time_windowed_serde_from(S, 10), S)
        assert out.read_records_to_list() == [TestRecord(W("a", 0, 10), "0+1", 3, (("h", b"closer"),))]


GAP = 5 * 60 * 1000


def test_session_windows_emit_on_close() -> None:
    """KStreamSessionWindowAggregateProcessorTest.shouldHaveMultipleSessionsForSameIdWhenTimestampApartBySessionGap."""
    builder = StreamsBuilder()
    (builder.stream("in", key_serde=S, value_serde=S).group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(GAP)).emit_strategy(ON_CLOSE)
     .count().to_stream().to("out"))  # fmt: skip
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        for value, timestamp in [("first", 0), ("second", GAP + 1), ("second", GAP + 1), ("third", 2 * GAP + 2),
                                 ("third", 2 * GAP + 2), ("third", 2 * GAP + 2)]:  # fmt: skip
            source.pipe_input("mel", value, timestamp=timestamp)
        out = driver.create_output_topic("out", WindowedSerdes.session_windowed_serde_from(S), Serdes.Long())
        assert out.read_records_to_list() == [
            TestRecord(Windowed("mel", SessionWindow(0, 0)), 1, 0),
            TestRecord(Windowed("mel", SessionWindow(GAP + 1, GAP + 1)), 2, GAP + 1),
        ]


def test_emit_strategy_takes_an_emit_strategy() -> None:
    with pytest.raises(TypeError):
        grouped().windowed_by(TimeWindows.of_size_with_no_grace(10)).emit_strategy("close")  # type: ignore[arg-type]
    assert repr(EmitStrategy.on_window_close()) == "EmitStrategy.on_window_close()"
