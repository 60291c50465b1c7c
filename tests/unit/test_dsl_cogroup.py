"""cogroup (KIP-150): inputs, outputs and topologies from Kafka Streams' CogroupedKStreamImplTest and
TimeWindowedCogroupedKStreamImplTest; Java's `MockAggregator.TOSTRING_ADDER` is `agg + "+" + value`."""

from __future__ import annotations

from typing import Any

from streams_core import (
    Consumed,
    Grouped,
    Materialized,
    Named,
    Serdes,
    SessionWindow,
    SessionWindows,
    StreamsBuilder,
    TestRecord,
    TimeWindow,
    TimeWindows,
    TopologyTestDriver,
    Windowed,
    WindowedSerdes,
)

S = Serdes.String()
# as Kafka's StreamsTestUtils.getStreamsConfig(Serdes.String(), Serdes.String())
CONFIG = {"application.id": "cogroup", "statestore.cache.max.bytes": 0, "default.key.serde": S,
          "default.value.serde": S}  # fmt: skip


def concat(key: Any, value: str, aggregate: str) -> str:
    return aggregate + value


def adder(key: Any, value: str, aggregate: str) -> str:
    return f"{aggregate}+{value}"


def remover(key: Any, value: str, aggregate: str) -> str:
    return f"{aggregate}-{value}"


def two_streams() -> tuple[StreamsBuilder, Any, Any]:
    builder = StreamsBuilder()
    return (builder, builder.stream("one", Consumed.with_(S, S)).group_by_key(),
            builder.stream("two", Consumed.with_(S, S)).group_by_key())  # fmt: skip


def run(builder: StreamsBuilder, one: list[tuple[Any, ...]], two: list[tuple[Any, ...]], key_serde: Any = S) -> Any:
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        for topic, records in (("one", one), ("two", two)):
            if records:
                driver.create_input_topic(topic, S, S).pipe_record_list(records)
        return driver.create_output_topic("output", key_serde, S).read_records_to_list(), driver.dropped_records


def test_named_cogroup_names_its_processors_and_store() -> None:
    """shouldNameProcessorsAndStoreBasedOnNamedParameter."""
    builder, grouped_one, grouped_two = two_streams()
    (grouped_one.cogroup(concat).cogroup(grouped_two, concat)
     .aggregate(lambda: "", Named.as_("test"), Materialized.as_("store")).to_stream().to("output"))  # fmt: skip
    assert str(builder.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
        "      --> test-cogroup-agg-0\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n"
        "      --> test-cogroup-agg-1\n"
        "    Processor: test-cogroup-agg-0 (stores: [store])\n"
        "      --> test-cogroup-merge\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: test-cogroup-agg-1 (stores: [store])\n"
        "      --> test-cogroup-merge\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: test-cogroup-merge (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000005\n"
        "      <-- test-cogroup-agg-0, test-cogroup-agg-1\n"
        "    Processor: KTABLE-TOSTREAM-0000000005 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000006\n"
        "      <-- test-cogroup-merge\n"
        "    Sink: KSTREAM-SINK-0000000006 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000005\n\n"
    )


def test_cogroup_repartitions_a_key_changed_stream_under_its_grouped_name() -> None:
    """shouldNameRepartitionTopic."""
    builder = StreamsBuilder()
    stream_one = builder.stream("one", Consumed.with_(S, S))
    stream_two = builder.stream("two", Consumed.with_(S, S))
    grouped_one = stream_one.map(lambda k, v: (v, k)).group_by_key(Grouped.as_("repartition-test"))
    grouped_two = stream_two.group_by_key()
    grouped_one.cogroup(concat).cogroup(grouped_two, concat).aggregate(lambda: "").to_stream().to("output")
    assert str(builder.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
        "      --> KSTREAM-MAP-0000000002\n"
        "    Processor: KSTREAM-MAP-0000000002 (stores: [])\n"
        "      --> repartition-test-repartition-filter\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: repartition-test-repartition-filter (stores: [])\n"
        "      --> repartition-test-repartition-sink\n"
        "      <-- KSTREAM-MAP-0000000002\n"
        "    Sink: repartition-test-repartition-sink (topic: repartition-test-repartition)\n"
        "      <-- repartition-test-repartition-filter\n\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n"
        "      --> COGROUPKSTREAM-AGGREGATE-0000000008\n"
        "    Source: repartition-test-repartition-source (topics: [repartition-test-repartition])\n"
        "      --> COGROUPKSTREAM-AGGREGATE-0000000007\n"
        "    Processor: COGROUPKSTREAM-AGGREGATE-0000000007 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n"
        "      --> COGROUPKSTREAM-MERGE-0000000009\n"
        "      <-- repartition-test-repartition-source\n"
        "    Processor: COGROUPKSTREAM-AGGREGATE-0000000008 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n"
        "      --> COGROUPKSTREAM-MERGE-0000000009\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: COGROUPKSTREAM-MERGE-0000000009 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000010\n"
        "      <-- COGROUPKSTREAM-AGGREGATE-0000000007, COGROUPKSTREAM-AGGREGATE-0000000008\n"
        "    Processor: KTABLE-TOSTREAM-0000000010 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000011\n"
        "      <-- COGROUPKSTREAM-MERGE-0000000009\n"
        "    Sink: KSTREAM-SINK-0000000011 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000010\n\n"
    )


def test_cogroup_two_streams_with_shared_keys() -> None:
    """shouldCogroupAndAggregateTwoKStreamsWithSharedKeys."""
    builder, grouped_one, grouped_two = two_streams()
    grouped_one.cogroup(concat).cogroup(grouped_two, concat).aggregate(lambda: "").to_stream().to("output")
    out, _ = run(builder, [("k1", "A", 0), ("k2", "A", 1), ("k1", "A", 10), ("k2", "A", 100)],
                 [("k2", "B", 100), ("k2", "B", 200), ("k1", "B", 1), ("k2", "B", 500), ("k1", "B", 500),
                  ("k2", "B", 500), ("k3", "B", 500), ("k2", "B", 100)])  # fmt: skip
    assert out == [
        TestRecord("k1", "A", 0), TestRecord("k2", "A", 1), TestRecord("k1", "AA", 10), TestRecord("k2", "AA", 100),
        TestRecord("k2", "AAB", 100), TestRecord("k2", "AABB", 200), TestRecord("k1", "AAB", 10),
        TestRecord("k2", "AABBB", 500), TestRecord("k1", "AABB", 500), TestRecord("k2", "AABBBB", 500),
        TestRecord("k3", "B", 500), TestRecord("k2", "AABBBBB", 500),
    ]  # fmt: skip


def test_cogroup_skips_none_values() -> None:
    """testCogroupHandleNullValues (the skipped record is counted as dropped)."""
    builder = StreamsBuilder()
    builder.stream("one", Consumed.with_(S, S)).group_by_key().cogroup(concat).aggregate(lambda: "").to_stream().to(
        "output")  # fmt: skip
    out, dropped = run(builder, [("k1", "A", 0), ("k2", "B", 0), ("k2", None, 0), ("k2", "B", 0), ("k1", "A", 0)], [])
    assert out == [TestRecord("k1", "A", 0), TestRecord("k2", "B", 0), TestRecord("k2", "BB", 0),
                   TestRecord("k1", "AA", 0)]  # fmt: skip
    assert dropped == 1


def test_cogroup_mixes_aggregators_in_one_store() -> None:
    """testCogroupKeyMixedAggregators."""
    builder, grouped_one, grouped_two = two_streams()
    table = grouped_one.cogroup(remover).cogroup(grouped_two, adder).aggregate(
        lambda: "0", Materialized.as_("store1").with_value_serde(S))
    table.to_stream().to("output")
    assert table.queryable_store_name == "store1"
    out, _ = run(builder, [("k1", "1", 0), ("k2", "1", 1), ("k1", "1", 10), ("k2", "1", 100)],
                 [("k1", "2", 500), ("k2", "2", 500), ("k1", "2", 500), ("k2", "2", 100)])  # fmt: skip
    assert out == [
        TestRecord("k1", "0-1", 0), TestRecord("k2", "0-1", 1), TestRecord("k1", "0-1-1", 10),
        TestRecord("k2", "0-1-1", 100), TestRecord("k1", "0-1-1+2", 500), TestRecord("k2", "0-1-1+2", 500),
        TestRecord("k1", "0-1-1+2+2", 500), TestRecord("k2", "0-1-1+2+2", 500),
    ]  # fmt: skip


def test_time_windowed_cogroup_mixes_aggregators() -> None:
    """TimeWindowedCogroupedKStreamImplTest.timeWindowMixAggregatorsTest (window size 500)."""
    builder, grouped_one, grouped_two = two_streams()
    (grouped_one.cogroup(adder).cogroup(grouped_two, remover).windowed_by(TimeWindows.of_size_with_no_grace(500))
     .aggregate(lambda: "0", Materialized.with_(S, S)).to_stream().to("output"))  # fmt: skip
    out, _ = run(builder, [("k1", "A", 0), ("k2", "A", 0), ("k2", "A", 1), ("k1", "A", 2)],
                 [("k1", "B", 3), ("k2", "B", 3), ("k2", "B", 4), ("k1", "B", 4)],
                 WindowedSerdes.time_windowed_serde_from(S, 500))  # fmt: skip

    def w(key: str) -> Windowed[str]:
        return Windowed(key, TimeWindow(0, 500))

    assert out == [
        TestRecord(w("k1"), "0+A", 0), TestRecord(w("k2"), "0+A", 0), TestRecord(w("k2"), "0+A+A", 1),
        TestRecord(w("k1"), "0+A+A", 2), TestRecord(w("k1"), "0+A+A-B", 3), TestRecord(w("k2"), "0+A+A-B", 3),
        TestRecord(w("k2"), "0+A+A-B-B", 4), TestRecord(w("k1"), "0+A+A-B-B", 4),
    ]  # fmt: skip


def test_session_windowed_cogroup_merges_sessions() -> None:
    builder, grouped_one, grouped_two = two_streams()
    (grouped_one.cogroup(adder).cogroup(grouped_two, remover).windowed_by(SessionWindows.of_inactivity_gap_and_grace(20, 30))
     .aggregate(lambda: "0", lambda key, one, two: one + two[1:], Materialized.with_(S, S))
     .to_stream().to("output"))  # fmt: skip
    out, _ = run(builder, [("k", "A", 0), ("k", "A", 30)], [("k", "B", 15)],
                 WindowedSerdes.session_windowed_serde_from(S))  # fmt: skip

    def sw(start: int, end: int) -> Windowed[str]:
        return Windowed("k", SessionWindow(start, end))

    # topic "one" is piped first: A@0, A@30, then B@15 bridges both sessions into [0, 30]
    assert out == [
        TestRecord(sw(0, 0), "0+A", 0), TestRecord(sw(30, 30), "0+A", 30),
        TestRecord(sw(0, 0), None, 0), TestRecord(sw(30, 30), None, 30), TestRecord(sw(0, 30), "0+A+A-B", 30),
    ]  # fmt: skip
