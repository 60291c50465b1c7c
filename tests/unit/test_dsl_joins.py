"""KStream joins: windowed stream-stream (inner, left, outer), stream-table, stream-global table."""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import (
    Joined,
    JoinWindows,
    KeyValue,
    Serdes,
    Stores,
    StreamJoined,
    StreamsBuilder,
    TestRecord,
    TopologyError,
    TopologyTestDriver,
)

S = Serdes.String()
CONFIG = {"application.id": "join", "statestore.cache.max.bytes": 0}


def plus(left: Any, right: Any) -> str:
    return f"{left}+{right}"


def stream_join(kind: str, windows: JoinWindows, records: list[tuple[str, Any, Any, int]],
                stream_joined: StreamJoined | None = None) -> list[TestRecord[Any, Any]]:  # fmt: skip
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=S, value_serde=S)
    right = builder.stream("right", key_serde=S, value_serde=S)
    getattr(left, kind)(right, plus, windows, stream_joined).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topics = {"L": driver.create_input_topic("left", S, S), "R": driver.create_input_topic("right", S, S)}
        for side, key, value, timestamp in records:
            topics[side].pipe_input(key, value, timestamp)
        return driver.create_output_topic("out", S, S).read_records_to_list()


WINDOWS = JoinWindows.of_time_difference_and_grace(10, 5)


def test_inner_join_matches_both_sides_within_the_window() -> None:
    out = stream_join("join", WINDOWS, [
        ("L", "a", "l1", 100),
        ("R", "a", "r1", 105),   # joins l1 (|105-100| <= 10)
        ("R", "a", "r2", 111),   # 11 ms after l1: no match
        ("L", "a", "l2", 115),   # joins r1 and r2 (right records in [105, 125])
        ("R", "a", "r3", 90),    # out of order: left records in [80, 100]: l1
        ("R", "b", "r4", 100),   # another key: nothing
    ])  # fmt: skip
    assert out == [TestRecord("a", "l1+r1", 105), TestRecord("a", "l2+r1", 115), TestRecord("a", "l2+r2", 115),
                   TestRecord("a", "l1+r3", 100)]  # fmt: skip


def test_window_boundaries_are_inclusive() -> None:
    out = stream_join("join", JoinWindows.of_time_difference_with_no_grace(10), [
        ("L", "a", "l", 100), ("R", "a", "early", 89), ("R", "a", "first", 90), ("R", "a", "last", 110),
        ("R", "a", "late", 111),
    ])  # fmt: skip
    assert [r.value for r in out] == ["l+first", "l+last"]


def test_asymmetric_windows_before_and_after() -> None:
    only_earlier_right = JoinWindows.of_time_difference_and_grace(0, 5).before(10)
    out = stream_join("join", only_earlier_right, [
        ("L", "a", "l", 100),
        ("R", "a", "r-before", 95),   # right 5 ms before the left record: joins
        ("R", "a", "r-after", 105),   # right after the left record: no
    ])  # fmt: skip
    assert out == [TestRecord("a", "l+r-before", 100)]


def test_left_join_emits_unmatched_records_once_their_window_closes() -> None:
    out = stream_join("left_join", WINDOWS, [
        ("L", "a", "l1", 100),
        ("R", "a", "r1", 105),   # match: l1 is not emitted alone
        ("L", "b", "l2", 106),   # waits for a partner until 106 + 10 + 5
        ("L", "a", "l3", 130),   # stream time 130: l2's window closed
        ("R", "z", "r", 150),    # stream time 150: l3's window closed; right records never emit alone
    ])  # fmt: skip
    assert out == [TestRecord("a", "l1+r1", 105), TestRecord("b", "l2+None", 106), TestRecord("a", "l3+None", 130)]


def test_left_join_record_matched_within_grace_is_not_emitted_alone() -> None:
    out = stream_join("left_join", WINDOWS, [
        ("L", "a", "l1", 100),
        ("L", "x", "x", 112),    # stream time 112: l1 could still meet a right record up to 110 (grace 5)
        ("R", "a", "r1", 109),   # out of order within grace: joins
        ("L", "x", "y", 200),    # stream time 200: x's window closed; y waits
    ])  # fmt: skip
    assert out == [TestRecord("a", "l1+r1", 109), TestRecord("x", "x+None", 112)]


def test_outer_join_emits_unmatched_records_of_both_sides_in_time_order() -> None:
    out = stream_join("outer_join", WINDOWS, [
        ("L", "a", "l1", 100),
        ("R", "b", "r1", 101),
        ("R", "a", "r2", 108),   # joins l1
        ("L", "c", "l2", 200),   # stream time 200: r1 emitted alone
    ])  # fmt: skip
    assert out == [TestRecord("a", "l1+r2", 108), TestRecord("b", "None+r1", 101)]


def test_late_and_null_key_records() -> None:
    out = stream_join("left_join", WINDOWS, [
        ("L", "a", "l1", 200),
        ("L", "x", "old", 100),   # far behind stream time: emitted at once with None
        ("L", None, "nokey", 201),   # KIP-962: a left join emits a None key at once
        ("R", "a", None, 201),    # a None value is dropped
    ])  # fmt: skip
    assert out == [TestRecord("x", "old+None", 100), TestRecord(None, "nokey+None", 201)]


def test_stream_joined_names_processors_and_stores() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForLeftJoinOperationBetweenKStreamAndKStream."""
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=S, value_serde=S)
    right = builder.stream("right", key_serde=S, value_serde=S)
    left.left_join(right, plus, WINDOWS, StreamJoined.with_(S, S, S).with_name("j").with_store_name("j")).to("out")
    text = str(builder.build().describe())
    for line in ("Processor: j-this-windowed (stores: [j-this-join-store])",
                 "Processor: j-other-windowed (stores: [j-outer-other-join-store])",
                 "Processor: j-this-join (stores: [j-outer-other-join-store, j-left-shared-join-store])",
                 "Processor: j-outer-other-join (stores: [j-left-shared-join-store, j-this-join-store])",
                 "Processor: j-merge (stores: [])",
                 "Sink: KSTREAM-SINK-0000000007 (topic: out)"):  # fmt: skip  (indices are burnt for given names)
        assert line in text


JAVA_LEFT_JOIN = (
    "Topologies:\n"
    "   Sub-topology: 0\n"
    "    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic1])\n"
    "      --> KSTREAM-WINDOWED-0000000002\n"
    "    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic2])\n"
    "      --> KSTREAM-WINDOWED-0000000003\n"
    "    Processor: KSTREAM-WINDOWED-0000000002 (stores: [{this}])\n"
    "      --> KSTREAM-JOINTHIS-0000000004\n"
    "      <-- KSTREAM-SOURCE-0000000000\n"
    "    Processor: KSTREAM-WINDOWED-0000000003 (stores: [{other}])\n"
    "      --> KSTREAM-OUTEROTHER-0000000005\n"
    "      <-- KSTREAM-SOURCE-0000000001\n"
    "    Processor: KSTREAM-JOINTHIS-0000000004 (stores: [{other}, {shared}])\n"
    "      --> KSTREAM-MERGE-0000000006\n"
    "      <-- KSTREAM-WINDOWED-0000000002\n"
    "    Processor: KSTREAM-OUTEROTHER-0000000005 (stores: [{this}, {shared}])\n"
    "      --> KSTREAM-MERGE-0000000006\n"
    "      <-- KSTREAM-WINDOWED-0000000003\n"
    "    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n"
    "      --> none\n"
    "      <-- KSTREAM-JOINTHIS-0000000004, KSTREAM-OUTEROTHER-0000000005\n\n"
)


def left_join_topology(stream_joined: StreamJoined) -> str:
    builder = StreamsBuilder()
    stream1 = builder.stream("input-topic1")
    stream2 = builder.stream("input-topic2")
    stream1.left_join(stream2, plus, JoinWindows.of_time_difference_with_no_grace(100), stream_joined)
    return str(builder.build().describe())


def test_stream_joined_store_name_as_javas_topology_test() -> None:
    """TopologyTest.streamStreamLeftJoinTopologyWithCustomStoresNames."""
    text = left_join_topology(StreamJoined.with_(S, S, S).with_store_name("custom-name"))
    assert text == JAVA_LEFT_JOIN.format(this="custom-name-this-join-store", other="custom-name-outer-other-join-store",
                                         shared="custom-name-left-shared-join-store")  # fmt: skip


def test_stream_joined_store_suppliers_as_javas_topology_test() -> None:
    """TopologyTest.streamStreamLeftJoinTopologyWithCustomStoresSuppliers."""
    this = Stores.in_memory_window_store("in-memory-join-store", 200, 200, True)
    other = Stores.in_memory_window_store("in-memory-join-store-other", 200, 200, True)
    text = left_join_topology(StreamJoined.with_(S, S, S).with_this_store_supplier(this).with_other_store_supplier(other))
    assert text == JAVA_LEFT_JOIN.format(this="in-memory-join-store", other="in-memory-join-store-other",
                                         shared="in-memory-join-store-left-shared-join-store")  # fmt: skip


def test_stream_joined_store_suppliers_hold_the_join_windows() -> None:
    this = Stores.in_memory_window_store("mine", 200, 200, True)
    other = Stores.in_memory_window_store("theirs", 200, 200, True)
    joined = StreamJoined.with_(S, S, S).with_this_store_supplier(this).with_other_store_supplier(other)
    out = stream_join("join", JoinWindows.of_time_difference_with_no_grace(100),
                      [("L", "a", "l1", 100), ("R", "a", "r1", 105)], joined)  # fmt: skip
    assert out == [TestRecord("a", "l1+r1", 105)]
    with pytest.raises(TopologyError, match=MISMATCH):
        left_join_topology(StreamJoined().with_this_store_supplier(Stores.in_memory_window_store("w", 500, 50, True)))
    with pytest.raises(TopologyError, match=NO_DUPLICATES):
        left_join_topology(StreamJoined().with_this_store_supplier(Stores.in_memory_window_store("d", 200, 200, False)))
    with pytest.raises(TopologyError, match="different store names"):
        left_join_topology(StreamJoined().with_this_store_supplier(this).with_other_store_supplier(
            Stores.in_memory_window_store("mine", 200, 200, True)))  # fmt: skip


MISMATCH = "^Window settings mismatch. WindowBytesStoreSupplier settings"
NO_DUPLICATES = "^The StoreSupplier must set retainDuplicates=true, found retainDuplicates=false$"


@pytest.mark.parametrize(
    ("this", "other", "message"),
    [
        ((500, 100, True), (150, 100, True), MISMATCH),  # shouldThrowExceptionThisStoreSupplierRetentionDoNotMatchWindowsSizeAndGrace
        ((150, 150, True), (150, 100, True), MISMATCH),  # ...ThisStoreSupplierWindowSizeDoesNotMatchJoinWindowsWindowSize
        ((150, 100, False), (150, 100, True), NO_DUPLICATES),  # shouldThrowExceptionWhenThisJoinStoreSetsRetainDuplicatesFalse
        ((150, 100, True), (500, 100, True), MISMATCH),  # ...OtherStoreSupplierRetentionDoNotMatchWindowsSizeAndGrace
        ((150, 100, True), (150, 150, True), MISMATCH),  # ...OtherStoreSupplierWindowSizeDoesNotMatchJoinWindowsWindowSize
        ((150, 100, True), (150, 100, False), NO_DUPLICATES),  # shouldThrowExceptionWhenOtherJoinStoreSetsRetainDuplicatesFalse
        ((150, 100, True), (150, 100, True), None),  # the settings match (retention = size 100 + grace 50)
    ],
)
def test_join_store_suppliers_must_match_the_join_windows_exactly(
    this: tuple[int, int, bool], other: tuple[int, int, bool], message: str | None
) -> None:
    """KStreamKStreamJoinTest's store supplier checks (joinWindows 50 ms before and after, grace 50):
    a retention longer than size + grace is rejected too, as Java's assertWindowSettings does."""
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=S, value_serde=Serdes.Integer())
    right = builder.stream("right", key_serde=S, value_serde=Serdes.Integer())
    joined = (StreamJoined.with_(S, Serdes.Integer(), Serdes.Integer())
              .with_this_store_supplier(Stores.in_memory_window_store("in-memory-join-store", *this))
              .with_other_store_supplier(Stores.in_memory_window_store("in-memory-join-store-other", *other)))  # fmt: skip
    windows = JoinWindows.of_time_difference_and_grace(50, 50)
    if message is None:
        left.join(right, lambda a, b: a + b, windows, joined)
        builder.build()
    else:
        with pytest.raises(TopologyError, match=message):
            left.join(right, lambda a, b: a + b, windows, joined)


def test_generated_join_names_follow_kafka_streams() -> None:
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=S, value_serde=S)
    right = builder.stream("right", key_serde=S, value_serde=S)
    left.join(right, plus, WINDOWS).to("out")
    text = str(builder.build().describe())
    assert "Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-JOINTHIS-0000000004-store])" in text
    assert "Processor: KSTREAM-JOINTHIS-0000000004 (stores: [KSTREAM-JOINOTHER-0000000005-store])" in text
    assert "Processor: KSTREAM-MERGE-0000000006 (stores: [])" in text
    assert builder.build().internal_topology_builder.copartition_groups() == [frozenset({"left", "right"})]


def test_join_after_select_key_repartitions_the_key_changed_side() -> None:
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=S, value_serde=S).select_key(lambda k, v: v.split(":")[0])
    right = builder.stream("right", key_serde=S, value_serde=S)
    left.join(right, lambda key, lv, rv: f"{key}:{lv}+{rv}", WINDOWS).to("out")
    topology = builder.build()
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("right", S, S).pipe_input("a", "r", 10)
        driver.create_input_topic("left", S, S).pipe_input("k", "a:l", 12)
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [TestRecord("a", "a:a:l+r", 12)]
    itb = topology.internal_topology_builder
    assert itb.internal_topics == {"join-KSTREAM-KEY-SELECT-0000000001-repartition"}
    assert itb.copartition_groups() == [frozenset({"join-KSTREAM-KEY-SELECT-0000000001-repartition", "right"})]
    assert itb.internal_topic_partition_counts({"left": 3, "right": 6}) == {
        "join-KSTREAM-KEY-SELECT-0000000001-repartition": 6}  # fmt: skip


def test_stream_table_join_and_left_join_see_table_updates_and_deletes() -> None:
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde=S, value_serde=S)
    customers = builder.table("customers", key_serde=S, value_serde=S)
    orders.join(customers, lambda order, customer: f"{order}@{customer}").to("inner")
    orders.left_join(customers, lambda key, order, customer: f"{key}:{order}@{customer}", Joined.as_("lj")).to("left")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        o, c = driver.create_input_topic("orders", S, S), driver.create_input_topic("customers", S, S)
        c.pipe_input("a", "Ann", 0)
        o.pipe_input("a", "o1", 1)
        o.pipe_input("b", "o2", 2)      # no customer b
        c.pipe_input("a", "Anne", 3)    # a table update produces nothing by itself
        o.pipe_input("a", "o3", 4)
        c.pipe_input("a", None, 5)      # delete
        o.pipe_input("a", "o4", 6)
        assert driver.create_output_topic("inner", S, S).read_records_to_list() == [
            TestRecord("a", "o1@Ann", 1), TestRecord("a", "o3@Anne", 4)]  # fmt: skip
        assert driver.create_output_topic("left", S, S).read_values_to_list() == [
            "a:o1@Ann", "b:o2@None", "a:o3@Anne", "a:o4@None"]  # fmt: skip
    assert "Processor: lj (stores: [customers-STATE-STORE-0000000001])" in str(builder.build().describe())


def test_stream_table_joins_with_none_keys_and_values() -> None:
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde=S, value_serde=S)
    customers = builder.table("customers", key_serde=S, value_serde=S)
    orders.join(customers, plus).to("inner")
    orders.left_join(customers, plus).to("left")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        o = driver.create_input_topic("orders", S, S)
        o.pipe_input(None, "no-key", 1)
        o.pipe_input("a", None, 2)
        assert driver.create_output_topic("inner", S, S).read_records_to_list() == []
        assert driver.create_output_topic("left", S, S).read_records_to_list() == [TestRecord(None, "no-key+None", 1)]
        assert driver.dropped_records == 3


def test_stream_table_join_after_select_key_repartitions_the_stream() -> None:
    builder = StreamsBuilder()
    customers = builder.table("customers", key_serde=S, value_serde=S)
    (builder.stream("orders", key_serde=S, value_serde=S).select_key(lambda k, v: v)
     .join(customers, plus).to("out"))  # fmt: skip
    topology = builder.build()
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("customers", S, S).pipe_input("ann", "Ann", 0)
        driver.create_input_topic("orders", S, S).pipe_input("order-1", "ann", 1)
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [KeyValue("ann", "ann+Ann")]
    itb = topology.internal_topology_builder
    assert itb.internal_topics == {"join-KSTREAM-KEY-SELECT-0000000004-repartition"}
    assert itb.copartition_groups() == [frozenset({"join-KSTREAM-KEY-SELECT-0000000004-repartition", "customers"})]


def test_global_table_join_with_a_key_selector() -> None:
    builder = StreamsBuilder()
    products = builder.global_table("products", key_serde=S, value_serde=S)
    orders = builder.stream("orders", key_serde=S, value_serde=S)
    orders.join(products, lambda order_id, product_id: product_id, lambda o, p: f"{o}:{p}").to("out")
    orders.left_join(products, lambda k, v: v, plus).to("left")
    topology = builder.build()
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("products", S, S).pipe_record_list([("p1", "pen", 50), ("p2", "ink", 60)])
        assert driver.stream_time_ms == -1
        o = driver.create_input_topic("orders", S, S)
        o.pipe_input("o1", "p1", 1)
        o.pipe_input("o2", "p3", 2)
        driver.create_input_topic("products", S, S).pipe_input("p1", "pencil", 3)
        o.pipe_input("o3", "p1", 4)
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [
            TestRecord("o1", "p1:pen", 1), TestRecord("o3", "p1:pencil", 4)]  # fmt: skip
        assert driver.create_output_topic("left", S, S).read_values_to_list() == ["p1+pen", "p3+None", "p1+pencil"]
        assert driver.get_key_value_store("products-STATE-STORE-0000000000").get("p2") == "ink"
    text = str(topology.describe())
    assert "Sub-topology: 1 for global store (will not generate tasks)" in text
    assert topology.internal_topology_builder.copartition_groups() == []


def test_join_arguments_are_checked() -> None:
    builder = StreamsBuilder()
    left, right = builder.stream("left"), builder.stream("right")
    with pytest.raises(TopologyError, match="JoinWindows"):
        left.join(right, plus)
    with pytest.raises(TopologyError, match="outer_join takes a KStream"):
        left.outer_join(builder.table("t"), plus, WINDOWS)
    with pytest.raises(TopologyError, match="joins a KStream, a KTable or a GlobalKTable"):
        left.join("right", plus)
