"""Headers of left and outer stream-stream join results, as Kafka Streams forwards them."""

from __future__ import annotations

from typing import Any

from streams_core import JoinWindows, Serdes, StreamJoined, StreamsBuilder, TestRecord, TopologyTestDriver

INT, S, L = Serdes.Integer(), Serdes.String(), Serdes.Long()


def to_string_joiner(left: Any, right: Any) -> str:
    """Java's MockValueJoiner.TOSTRING_JOINER: None prints as null."""
    return f"{'null' if left is None else left}+{'null' if right is None else right}"


def h(value: int) -> tuple[tuple[str, bytes], ...]:
    return (("h", bytes([value])),)


def run(kind: str) -> list[list[TestRecord[Any, Any]]]:
    """KStreamKStreamOuterJoinTest.testShouldForwardCurrentHeaders's inputs: what each step emits."""
    builder = StreamsBuilder()
    stream1 = builder.stream("topic1", key_serde=INT, value_serde=S)
    stream2 = builder.stream("topic2", key_serde=INT, value_serde=L)
    windows = JoinWindows.of_time_difference_and_grace(100, 10)
    getattr(stream1, kind)(stream2, to_string_joiner, windows, StreamJoined.with_(INT, S, L)).to("out")
    with TopologyTestDriver(builder.build(), {"application.id": "join-headers"}) as driver:
        topic1, topic2 = driver.create_input_topic("topic1", INT, S), driver.create_input_topic("topic2", INT, L)
        out = driver.create_output_topic("out", INT, S)
        topic1.pipe_input(0, "A0", 0, h(1))
        topic2.pipe_input(1, 10, 0, h(2))
        topic2.pipe_input(3, 100, 211, h(3))  # stream time 211 closes both windows of time 0
        first = out.read_records_to_list()
        topic1.pipe_input(2, "A2", 200, h(4))
        topic2.pipe_input(2, 12, 200, h(5))
        return [first, out.read_records_to_list()]


def test_outer_join_forwards_the_headers_of_the_record_that_closed_the_window() -> None:
    """KStreamKStreamOuterJoinTest.testShouldForwardCurrentHeaders: both unmatched records carry h=3."""
    assert run("outer_join") == [
        [TestRecord(1, "null+10", 0, h(3)), TestRecord(0, "A0+null", 0, h(3))],
        [TestRecord(2, "A2+12", 200, h(5))],
    ]


def test_left_join_forwards_the_headers_of_the_record_that_closed_the_window() -> None:
    """The same inputs through a left join (Java's rule is shared: KStreamKStreamJoin forwards the
    current record with the unmatched key, value and timestamp): only the left record is emitted."""
    assert run("left_join") == [[TestRecord(0, "A0+null", 0, h(3))], [TestRecord(2, "A2+12", 200, h(5))]]
