"""Windowed aggregations: tumbling, hopping, sliding and session windows, grace, late records, suppress."""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import (
    BufferConfig,
    KeyValue,
    Materialized,
    Serdes,
    SessionWindow,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    StreamsError,
    Suppressed,
    TestRecord,
    TimeWindow,
    TimeWindows,
    TopologyError,
    TopologyTestDriver,
    Windowed,
    WindowedSerdes,
)

S, L = Serdes.String(), Serdes.Long()
CONFIG = {"application.id": "win", "statestore.cache.max.bytes": 0}


def W(key: str, start: int, end: int) -> Windowed[str]:
    return Windowed(key, TimeWindow(start, end))


def SW(key: str, start: int, end: int) -> Windowed[str]:
    return Windowed(key, SessionWindow(start, end))


def grouped(builder: StreamsBuilder) -> Any:
    return builder.stream("in", key_serde=S, value_serde=S).group_by_key()


def run(
    builder: StreamsBuilder, records: list[tuple[Any, ...]], key_serde: Any
) -> tuple[list[TestRecord[Any, Any]], int, Any]:
    driver = TopologyTestDriver(builder.build(), CONFIG)
    driver.create_input_topic("in", S, S).pipe_record_list(records)
    return driver.create_output_topic("out", key_serde, L).read_records_to_list(), driver.dropped_records, driver


def test_tumbling_windows_with_out_of_order_records_boundaries_and_late_records() -> None:
    builder = StreamsBuilder()
    (grouped(builder).windowed_by(TimeWindows.of_size_and_grace(10, 5)).count(Materialized.as_("per-10"))
     .to_stream().to("out"))  # fmt: skip
    serde = WindowedSerdes.time_windowed_serde_from(S, 10)
    out, dropped, driver = run(builder, [
        ("a", "x", 1), ("a", "x", 9),
        ("a", "x", 10),   # the window end is exclusive: a new window
        ("a", "x", 3),    # out of order, within grace (stream time 10, window [0,10) closes at 15)
        ("a", "x", 16),   # stream time 16: window [0,10) is closed
        ("a", "x", 4),    # late: dropped
    ], serde)  # fmt: skip
    with driver:
        assert out == [
            TestRecord(W("a", 0, 10), 1, 1), TestRecord(W("a", 0, 10), 2, 9), TestRecord(W("a", 10, 20), 1, 10),
            TestRecord(W("a", 0, 10), 3, 9), TestRecord(W("a", 10, 20), 2, 16),
        ]  # fmt: skip
        assert dropped == 1
        store = driver.get_window_store("per-10")
        assert list(store.fetch("a", 0, 20)) == [KeyValue(0, 3), KeyValue(10, 2)]
        assert store.fetch("a", 10) == 2
        assert list(store.fetch_all(0, 100)) == [KeyValue(W("a", 0, 10), 3), KeyValue(W("a", 10, 20), 2)]


def test_hopping_windows_update_every_window_of_a_record() -> None:
    builder = StreamsBuilder()
    (grouped(builder).windowed_by(TimeWindows.of_size_with_no_grace(10).advance_by(5)).count()
     .to_stream().to("out"))  # fmt: skip
    out, dropped, driver = run(builder, [
        ("a", "x", 7), ("a", "x", 12),
        ("a", "x", 3),    # its only window [0,10) closed at stream time 12: late
        ("a", "x", 9),    # [0,10) is closed (one drop, as Java counts per window) but [5,15) is open
    ], WindowedSerdes.time_windowed_serde_from(S, 10))  # fmt: skip
    driver.close()
    assert out == [
        TestRecord(W("a", 0, 10), 1, 7), TestRecord(W("a", 5, 15), 1, 7),
        TestRecord(W("a", 5, 15), 2, 12), TestRecord(W("a", 10, 20), 1, 12),
        TestRecord(W("a", 5, 15), 3, 12),
    ]  # fmt: skip
    assert dropped == 2


def test_windowed_reduce_and_aggregate() -> None:
    builder = StreamsBuilder()
    windowed = grouped(builder).windowed_by(TimeWindows.of_size_with_no_grace(100))
    windowed.reduce(lambda a, b: a + b).to_stream().to("joined")
    windowed.aggregate(lambda: 0, lambda k, v, agg: agg + len(v), Materialized.with_(S, L)).to_stream().to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record_list([("a", "x", 1), ("a", "yy", 2), ("a", "z", 150)])
        serde = WindowedSerdes.time_windowed_serde_from(S, 100)
        assert driver.create_output_topic("joined", serde, S).read_key_values_to_list() == [
            (W("a", 0, 100), "x"), (W("a", 0, 100), "xyy"), (W("a", 100, 200), "z")]  # fmt: skip
        assert driver.create_output_topic("out", serde, L).read_key_values_to_list() == [
            (W("a", 0, 100), 1), (W("a", 0, 100), 3), (W("a", 100, 200), 1)]  # fmt: skip


def test_window_store_retention_must_cover_size_and_grace() -> None:
    windowed = grouped(StreamsBuilder()).windowed_by(TimeWindows.of_size_and_grace(10, 5))
    with pytest.raises(ValueError, match="retention period"):
        windowed.count(Materialized.as_("short").with_retention(12))
    builder = StreamsBuilder()
    windowed = grouped(builder).windowed_by(TimeWindows.of_size_and_grace(10, 5))
    windowed.count(Materialized.as_("long").with_retention(1000))
    assert builder.build().internal_topology_builder.store_builder("long").retention_period == 1000


def test_window_specifications_are_validated() -> None:
    with pytest.raises(ValueError, match="advance"):
        TimeWindows.of_size_with_no_grace(10).advance_by(11)
    with pytest.raises(ValueError, match="window size"):
        TimeWindows.of_size_with_no_grace(0)
    with pytest.raises(TypeError):
        TimeWindows.of_size_and_grace(10, "5")  # type: ignore[arg-type]
    assert list(TimeWindows.of_size_with_no_grace(10).advance_by(5).windows_for(12)) == [5, 10]


def test_sliding_windows_follow_kafka_streams() -> None:
    builder = StreamsBuilder()
    (grouped(builder).windowed_by(SlidingWindows.of_time_difference_and_grace(10, 5))
     .count(Materialized.as_("sliding")).to_stream().to("out"))  # fmt: skip
    out, dropped, driver = run(builder, [
        ("a", "x", 5),    # early record: window [0,10]
        ("a", "x", 12),   # right window of 5 ([6,16]) and left window [2,12]
        ("a", "x", 8),    # out of order: updates [2,12], [6,16], creates its right window [9,19], updates [0,10]
        ("a", "x", 30),   # alone: [20,30]
        ("a", "x", 3),    # late
    ], WindowedSerdes.time_windowed_serde_from(S, 10))  # fmt: skip
    with driver:
        assert out == [
            TestRecord(W("a", 0, 10), 1, 5),
            TestRecord(W("a", 6, 16), 1, 12), TestRecord(W("a", 2, 12), 2, 12),
            TestRecord(W("a", 2, 12), 3, 12), TestRecord(W("a", 6, 16), 2, 12), TestRecord(W("a", 9, 19), 1, 12),
            TestRecord(W("a", 0, 10), 2, 8),
            TestRecord(W("a", 20, 30), 1, 30),
        ]  # fmt: skip
        assert dropped == 1
        assert list(driver.get_window_store("sliding").fetch("a", 0, 40)) == [
            KeyValue(0, 2), KeyValue(2, 3), KeyValue(6, 2), KeyValue(9, 1), KeyValue(20, 1)]  # fmt: skip


def test_session_windows_merge_retract_and_drop_late_records() -> None:
    builder = StreamsBuilder()
    (grouped(builder).windowed_by(SessionWindows.with_inactivity_gap(10)).count(Materialized.as_("sessions"))
     .to_stream().to("out"))  # fmt: skip
    out, dropped, driver = run(builder, [
        ("a", "x", 0), ("a", "x", 5), ("a", "x", 30),
        ("a", "x", 18),   # a new session ending before stream time - gap: late
        ("a", "x", 21),   # extends [30,30] back to [21,30]
        ("a", "x", 15),   # extends [21,30]; [0,5] is closed (and past the store's retention of gap + grace)
    ], WindowedSerdes.session_windowed_serde_from(S))  # fmt: skip
    with driver:
        assert out == [
            TestRecord(SW("a", 0, 0), 1, 0),
            TestRecord(SW("a", 0, 0), None, 0), TestRecord(SW("a", 0, 5), 2, 5),
            TestRecord(SW("a", 30, 30), 1, 30),
            TestRecord(SW("a", 30, 30), None, 30), TestRecord(SW("a", 21, 30), 2, 30),
            TestRecord(SW("a", 21, 30), None, 30), TestRecord(SW("a", 15, 30), 3, 30),
        ]  # fmt: skip
        assert dropped == 1
        assert list(driver.get_session_store("sessions").fetch("a")) == [KeyValue(SW("a", 15, 30), 3)]


def test_sessions_bridged_by_a_record_merge_into_one() -> None:
    builder = StreamsBuilder()
    (grouped(builder).windowed_by(SessionWindows.with_inactivity_gap(10).grace(30)).count()
     .to_stream().to("out"))  # fmt: skip
    out, dropped, driver = run(builder, [("a", "x", 0), ("a", "x", 20), ("a", "x", 10)],
                               WindowedSerdes.session_windowed_serde_from(S))  # fmt: skip
    driver.close()
    assert out == [
        TestRecord(SW("a", 0, 0), 1, 0), TestRecord(SW("a", 20, 20), 1, 20),
        TestRecord(SW("a", 0, 0), None, 0), TestRecord(SW("a", 20, 20), None, 20), TestRecord(SW("a", 0, 20), 3, 20),
    ]  # fmt: skip
    assert dropped == 0


def test_session_reduce_and_aggregate_with_merger() -> None:
    builder = StreamsBuilder()
    sessions = grouped(builder).windowed_by(SessionWindows.with_inactivity_gap(10).grace(100))
    sessions.reduce(lambda a, b: a + b).to_stream().to("joined")
    sessions.aggregate(lambda: 0, lambda k, v, agg: agg + len(v), lambda k, a, b: a + b,
                       Materialized.with_(S, L)).to_stream().to("out")  # fmt: skip
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record_list([("b", "x", 0), ("b", "yy", 20), ("b", "z", 10)])
        serde = WindowedSerdes.session_windowed_serde_from(S)
        assert driver.create_output_topic("joined", serde, S).read_key_values_to_list()[-3:] == [
            (SW("b", 0, 0), None), (SW("b", 20, 20), None), (SW("b", 0, 20), "xyyz")]  # fmt: skip
        assert driver.create_output_topic("out", serde, L).read_key_values_to_list()[-1] == (SW("b", 0, 20), 4)


def test_suppress_until_window_closes_emits_one_final_result_per_window() -> None:
    builder = StreamsBuilder()
    (grouped(builder).windowed_by(TimeWindows.of_size_and_grace(10, 5)).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("out"))  # fmt: skip
    out, dropped, driver = run(builder, [
        ("a", "x", 1), ("a", "x", 9), ("b", "x", 4),
        ("a", "x", 12),   # stream time 12: [0,10) still accepts records until 15
        ("a", "x", 3),    # within grace
        ("a", "x", 15),   # [0,10) closes: its final counts go out
        ("a", "x", 16),
        ("a", "x", 30),   # [10,20) closes
        ("a", "x", 2),    # late: dropped, nothing changes
    ], WindowedSerdes.time_windowed_serde_from(S, 10))  # fmt: skip
    driver.close()
    # windows closing together come out in serialized-key order, as Java's buffer sorts them
    assert out == [
        TestRecord(W("a", 0, 10), 3, 9), TestRecord(W("b", 0, 10), 1, 4), TestRecord(W("a", 10, 20), 3, 16),
    ]  # fmt: skip
    assert dropped == 1


def test_suppress_session_results_wait_until_no_record_can_extend_them() -> None:
    builder = StreamsBuilder()
    (grouped(builder).windowed_by(SessionWindows.with_inactivity_gap(10)).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("out"))  # fmt: skip
    serde = WindowedSerdes.session_windowed_serde_from(S)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source, out = driver.create_input_topic("in", S, S), driver.create_output_topic("out", serde, L)
        source.pipe_record_list([("a", "x", 0), ("a", "x", 5), ("b", "x", 7), ("a", "x", 25)])
        assert out.read_records_to_list() == []
        source.pipe_input("a", "x", 30)
        assert out.read_records_to_list() == [TestRecord(SW("a", 0, 5), 2, 5), TestRecord(SW("b", 7, 7), 1, 7)]
        source.pipe_record_list([("a", "x", 35), ("a", "x", 55)])
        assert out.read_records_to_list() == []
        source.pipe_input("a", "x", 57)
        assert out.read_records_to_list() == [TestRecord(SW("a", 25, 35), 3, 35)]


def test_suppress_until_time_limit_and_bounded_buffers() -> None:
    def build(suppressed: Suppressed) -> StreamsBuilder:
        builder = StreamsBuilder()
        grouped(builder).count().suppress(suppressed).to_stream().to("out", value_serde=L)
        return builder

    records = [("a", "x", 0), ("a", "x", 5), ("b", "x", 6), ("c", "x", 16)]
    out, _, driver = run(build(Suppressed.until_time_limit(10, BufferConfig.unbounded())), records, S)
    driver.close()
    assert out == [TestRecord("a", 2, 5), TestRecord("b", 1, 6)]
    out, _, driver = run(build(Suppressed.until_time_limit(100, BufferConfig.max_records(1).emit_early_when_full())),
                         records, S)  # fmt: skip
    driver.close()
    assert out == [TestRecord("a", 2, 5), TestRecord("b", 1, 6)]
    out, _, driver = run(build(Suppressed.until_time_limit(100, BufferConfig.max_bytes(1000))), records, S)
    driver.close()
    assert out == []
    with pytest.raises(StreamsError, match=r"suppression buffer .* is full"):
        run(build(Suppressed.until_time_limit(100, BufferConfig.max_records(1))), records, S)


def test_final_results_need_a_windowed_table_and_a_strict_buffer() -> None:
    table = grouped(StreamsBuilder()).count()
    with pytest.raises(TopologyError, match="windowed"):
        table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    with pytest.raises(ValueError, match="strict"):
        Suppressed.until_window_closes(BufferConfig.max_records(5).emit_early_when_full())


def test_windowed_table_keys_carry_their_serde_to_topics() -> None:
    builder = StreamsBuilder()
    grouped(builder).windowed_by(TimeWindows.of_size_with_no_grace(60_000)).count().to_stream().to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_input("hello", "x", 61_000)
        raw = driver.read_raw_record("out")
        assert raw is not None
        assert (raw.key, raw.value) == (b"hello" + (60_000).to_bytes(8, "big"), (1).to_bytes(8, "big"))
