"""None keys around joins and repartition topics (KIP-962), after Kafka Streams' rules and tests.

Java puts a filter before every repartition sink that drops None keys, except where a left or
outer join lies downstream (`rewriteRepartitionNodes`); a left stream-table or global join
keeps a record whose key is None, but drops one whose selected global key is None
(KStreamGlobalKTableLeftJoinTest).
"""

from __future__ import annotations

from typing import Any

from streams_core import (
    JoinWindows,
    Serdes,
    StreamsBuilder,
    TestRecord,
    TopologyTestDriver,
)

S, INT = Serdes.String(), Serdes.Integer()
CONFIG = {"application.id": "nulls", "statestore.cache.max.bytes": 0}


def plus(left: Any, right: Any) -> str:
    return f"{left}+{right}"


def global_left_join(records: list[tuple[Any, str, int]]) -> tuple[list[TestRecord[Any, Any]], int]:
    """KStreamGlobalKTableLeftJoinTest's topology: the value's second token is the global table key."""
    builder = StreamsBuilder()
    table = builder.global_table("global", key_serde=S, value_serde=S)

    def key_mapper(key: Any, value: str) -> str | None:
        tokens = value.split(",")
        return tokens[1] if len(tokens) > 1 else None

    builder.stream("stream", key_serde=INT, value_serde=S).left_join(table, key_mapper, plus).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        global_topic = driver.create_input_topic("global", S, S)
        for i in range(4):
            global_topic.pipe_input(f"FKey{i}", f"Y{i}", i)
        stream = driver.create_input_topic("stream", INT, S)
        for key, value, timestamp in records:
            stream.pipe_input(key, value, timestamp)
        return driver.create_output_topic("out", INT, S).read_records_to_list(), driver.dropped_records


def test_global_left_join_drops_records_whose_selected_key_is_none() -> None:
    """shouldNotJoinOnNullKeyMapperValues: four records without a foreign key, no output, four drops."""
    out, dropped = global_left_join([(i, f"XXX{i}", i) for i in range(4)])
    assert out == []
    assert dropped == 4


def test_global_left_join_joins_a_record_with_a_none_key_on_its_selected_key() -> None:
    """shouldJoinOnNullKeyWithNonNullKeyMapperValues."""
    out, dropped = global_left_join([(None if i == 0 else i, f"X{i},FKey{i}", i) for i in range(4)])
    assert out == [TestRecord(None, "X0,FKey0+Y0", 0), TestRecord(1, "X1,FKey1+Y1", 1),
                   TestRecord(2, "X2,FKey2+Y2", 2), TestRecord(3, "X3,FKey3+Y3", 3)]  # fmt: skip
    assert dropped == 0


def rekeyed_join(kind: str) -> tuple[list[TestRecord[Any, Any]], Any]:
    """A stream re-keyed by its value ("none" becomes a None key), joined with "right" after repartitioning."""
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=S, value_serde=S).select_key(lambda k, v: None if v == "none" else v)
    right = builder.stream("right", key_serde=S, value_serde=S)
    getattr(left, kind)(right, plus, JoinWindows.of_time_difference_with_no_grace(10)).to("out")
    topology = builder.build()
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("right", S, S).pipe_input("a", "r", 1)
        source = driver.create_input_topic("left", S, S)
        source.pipe_input("k1", "a", 2)
        source.pipe_input("k2", "none", 3)
        return driver.create_output_topic("out", S, S).read_records_to_list(), topology


def test_left_stream_stream_join_after_a_key_change_keeps_none_keys() -> None:
    out, _ = rekeyed_join("left_join")
    assert out == [TestRecord("a", "a+r", 2), TestRecord(None, "none+None", 3)]


def test_outer_stream_stream_join_after_a_key_change_keeps_none_keys() -> None:
    out, _ = rekeyed_join("outer_join")
    assert out == [TestRecord("a", "a+r", 2), TestRecord(None, "none+None", 3)]


def test_inner_stream_stream_join_after_a_key_change_drops_none_keys_before_the_topic() -> None:
    out, _ = rekeyed_join("join")
    assert out == [TestRecord("a", "a+r", 2)]


def test_left_stream_table_join_after_a_key_change_keeps_none_keys() -> None:
    builder = StreamsBuilder()
    table = builder.table("table", key_serde=S, value_serde=S)
    (builder.stream("left", key_serde=S, value_serde=S).select_key(lambda k, v: None if v == "none" else v)
     .left_join(table, plus).to("out"))  # fmt: skip
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("table", S, S).pipe_input("a", "t", 1)
        source = driver.create_input_topic("left", S, S)
        source.pipe_input("k1", "a", 2)
        source.pipe_input("k2", "none", 3)
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [
            TestRecord("a", "a+t", 2), TestRecord(None, "none+None", 3)]  # fmt: skip


def test_explicit_repartition_drops_none_keys_unless_a_left_join_follows() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", key_serde=S, value_serde=S)
    stream.repartition(name="plain").to("out")
    table = builder.table("table", key_serde=S, value_serde=S)
    stream.repartition(name="for-join").left_join(table, plus).to("joined")
    topology = builder.build()
    description = str(topology.describe())
    assert "Processor: plain-repartition-filter (stores: [])" in description
    assert "Processor: for-join-repartition-filter (stores: [])" in description
    with TopologyTestDriver(topology, CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        source.pipe_input("k", "v", 1)
        source.pipe_input(None, "nokey", 2)
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [TestRecord("k", "v", 1)]
        assert driver.create_output_topic("joined", S, S).read_records_to_list() == [
            TestRecord("k", "v+None", 1), TestRecord(None, "nokey+None", 2)]  # fmt: skip
