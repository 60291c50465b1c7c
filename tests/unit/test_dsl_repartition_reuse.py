"""Repartition topics reused as Kafka Streams reuses them, with its describe() output.

Java's topology strings are from KStreamKStreamJoinTest / KStreamKTableJoinTest
(shouldReuseRepartitionTopicWithGeneratedName) and TopologyTest (table group-by counts).
"""

from __future__ import annotations

from streams_core import (
    Consumed,
    Grouped,
    JoinWindows,
    Materialized,
    Serdes,
    StreamsBuilder,
    TestRecord,
    TopologyTestDriver,
)

S = Serdes.String()
CONFIG = {"application.id": "reuse", "statestore.cache.max.bytes": 0}

KSTREAM_KSTREAM_TWICE = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n'
    '      --> KSTREAM-MAP-0000000003\n'
    '    Processor: KSTREAM-MAP-0000000003 (stores: [])\n'
    '      --> KSTREAM-FILTER-0000000005\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: KSTREAM-FILTER-0000000005 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000004\n'
    '      <-- KSTREAM-MAP-0000000003\n'
    '    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-MAP-0000000003-repartition)\n'
    '      <-- KSTREAM-FILTER-0000000005\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-MAP-0000000003-repartition])\n'
    '      --> KSTREAM-WINDOWED-0000000007, KSTREAM-WINDOWED-0000000016\n'
    '    Source: KSTREAM-SOURCE-0000000001 (topics: [topic2])\n'
    '      --> KSTREAM-WINDOWED-0000000008\n'
    '    Source: KSTREAM-SOURCE-0000000002 (topics: [topic3])\n'
    '      --> KSTREAM-WINDOWED-0000000017\n'
    '    Processor: KSTREAM-WINDOWED-0000000007 (stores: [KSTREAM-JOINTHIS-0000000009-store])\n'
    '      --> KSTREAM-JOINTHIS-0000000009\n'
    '      <-- KSTREAM-SOURCE-0000000006\n'
    '    Processor: KSTREAM-WINDOWED-0000000008 (stores: [KSTREAM-JOINOTHER-0000000010-store])\n'
    '      --> KSTREAM-JOINOTHER-0000000010\n'
    '      <-- KSTREAM-SOURCE-0000000001\n'
    '    Processor: KSTREAM-WINDOWED-0000000016 (stores: [KSTREAM-JOINTHIS-0000000018-store])\n'
    '      --> KSTREAM-JOINTHIS-0000000018\n'
    '      <-- KSTREAM-SOURCE-0000000006\n'
    '    Processor: KSTREAM-WINDOWED-0000000017 (stores: [KSTREAM-JOINOTHER-0000000019-store])\n'
    '      --> KSTREAM-JOINOTHER-0000000019\n'
    '      <-- KSTREAM-SOURCE-0000000002\n'
    '    Processor: KSTREAM-JOINOTHER-0000000010 (stores: [KSTREAM-JOINTHIS-0000000009-store])\n'
    '      --> KSTREAM-MERGE-0000000011\n'
    '      <-- KSTREAM-WINDOWED-0000000008\n'
    '    Processor: KSTREAM-JOINOTHER-0000000019 (stores: [KSTREAM-JOINTHIS-0000000018-store])\n'
    '      --> KSTREAM-MERGE-0000000020\n'
    '      <-- KSTREAM-WINDOWED-0000000017\n'
    '    Processor: KSTREAM-JOINTHIS-0000000009 (stores: [KSTREAM-JOINOTHER-0000000010-store])\n'
    '      --> KSTREAM-MERGE-0000000011\n'
    '      <-- KSTREAM-WINDOWED-0000000007\n'
    '    Processor: KSTREAM-JOINTHIS-0000000018 (stores: [KSTREAM-JOINOTHER-0000000019-store])\n'
    '      --> KSTREAM-MERGE-0000000020\n'
    '      <-- KSTREAM-WINDOWED-0000000016\n'
    '    Processor: KSTREAM-MERGE-0000000011 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000012\n'
    '      <-- KSTREAM-JOINTHIS-0000000009, KSTREAM-JOINOTHER-0000000010\n'
    '    Processor: KSTREAM-MERGE-0000000020 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000021\n'
    '      <-- KSTREAM-JOINTHIS-0000000018, KSTREAM-JOINOTHER-0000000019\n'
    '    Sink: KSTREAM-SINK-0000000012 (topic: out-one)\n'
    '      <-- KSTREAM-MERGE-0000000011\n'
    '    Sink: KSTREAM-SINK-0000000021 (topic: out-to)\n'
    '      <-- KSTREAM-MERGE-0000000020\n'
    '\n'
)

KSTREAM_KTABLE_TWICE = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n'
    '      --> KSTREAM-MAP-0000000007\n'
    '    Processor: KSTREAM-MAP-0000000007 (stores: [])\n'
    '      --> KSTREAM-FILTER-0000000009\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: KSTREAM-FILTER-0000000009 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000008\n'
    '      <-- KSTREAM-MAP-0000000007\n'
    '    Sink: KSTREAM-SINK-0000000008 (topic: KSTREAM-MAP-0000000007-repartition)\n'
    '      <-- KSTREAM-FILTER-0000000009\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: KSTREAM-SOURCE-0000000010 (topics: [KSTREAM-MAP-0000000007-repartition])\n'
    '      --> KSTREAM-JOIN-0000000011, KSTREAM-JOIN-0000000016\n'
    '    Processor: KSTREAM-JOIN-0000000011 (stores: [topic2-STATE-STORE-0000000001])\n'
    '      --> KSTREAM-SINK-0000000012\n'
    '      <-- KSTREAM-SOURCE-0000000010\n'
    '    Processor: KSTREAM-JOIN-0000000016 (stores: [topic3-STATE-STORE-0000000004])\n'
    '      --> KSTREAM-SINK-0000000017\n'
    '      <-- KSTREAM-SOURCE-0000000010\n'
    '    Source: KSTREAM-SOURCE-0000000002 (topics: [topic2])\n'
    '      --> KTABLE-SOURCE-0000000003\n'
    '    Source: KSTREAM-SOURCE-0000000005 (topics: [topic3])\n'
    '      --> KTABLE-SOURCE-0000000006\n'
    '    Sink: KSTREAM-SINK-0000000012 (topic: out-one)\n'
    '      <-- KSTREAM-JOIN-0000000011\n'
    '    Sink: KSTREAM-SINK-0000000017 (topic: out-two)\n'
    '      <-- KSTREAM-JOIN-0000000016\n'
    '    Processor: KTABLE-SOURCE-0000000003 (stores: [topic2-STATE-STORE-0000000001])\n'
    '      --> none\n'
    '      <-- KSTREAM-SOURCE-0000000002\n'
    '    Processor: KTABLE-SOURCE-0000000006 (stores: [topic3-STATE-STORE-0000000004])\n'
    '      --> none\n'
    '      <-- KSTREAM-SOURCE-0000000005\n'
    '\n'
)


def concat(left: str, right: str) -> str:
    return left + right


def test_a_key_changed_stream_joined_with_two_streams_shares_one_repartition_topic() -> None:
    """KStreamKStreamJoinTest.shouldReuseRepartitionTopicWithGeneratedName, its text exactly (the
    merges list KSTREAM-JOINTHIS before KSTREAM-JOINOTHER, as Java's describe orders them)."""
    builder = StreamsBuilder()
    stream1 = builder.stream("topic", Consumed.with_(S, S))
    stream2 = builder.stream("topic2", Consumed.with_(S, S))
    stream3 = builder.stream("topic3", Consumed.with_(S, S))
    new_stream = stream1.map(lambda k, v: (v, k))
    new_stream.join(stream2, concat, JoinWindows.of_time_difference_with_no_grace(100)).to("out-one")
    new_stream.join(stream3, concat, JoinWindows.of_time_difference_with_no_grace(100)).to("out-to")
    topology = builder.build()
    assert str(topology.describe()) == KSTREAM_KSTREAM_TWICE
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("topic2", S, S).pipe_input("a", "2", 1)
        driver.create_input_topic("topic3", S, S).pipe_input("a", "3", 1)
        driver.create_input_topic("topic", S, S).pipe_input("k", "a", 2)
        assert driver.create_output_topic("out-one", S, S).read_records_to_list() == [TestRecord("a", "k2", 2)]
        assert driver.create_output_topic("out-to", S, S).read_records_to_list() == [TestRecord("a", "k3", 2)]


def test_a_key_changed_stream_joined_with_two_tables_shares_one_repartition_topic() -> None:
    """KStreamKTableJoinTest.shouldReuseRepartitionTopicWithGeneratedName, its text exactly."""
    builder = StreamsBuilder()
    stream_a = builder.stream("topic", Consumed.with_(S, S))
    table_b = builder.table("topic2", Consumed.with_(S, S))
    table_c = builder.table("topic3", Consumed.with_(S, S))
    rekeyed = stream_a.map(lambda k, v: (v, k))
    rekeyed.join(table_b, concat).to("out-one")
    rekeyed.join(table_c, concat).to("out-two")
    topology = builder.build()
    assert str(topology.describe()) == KSTREAM_KTABLE_TWICE
    itb = topology.internal_topology_builder
    itb.set_application_id("reuse")
    assert itb.internal_topics == {"reuse-KSTREAM-MAP-0000000007-repartition"}


def test_a_named_grouped_stream_shares_its_repartition_topic_between_aggregations() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(S, S)).select_key(lambda k, v: v).group_by_key(Grouped.as_("by-value"))
    grouped.count(Materialized.as_("count")).to_stream().to("counts", value_serde=Serdes.Long())
    grouped.reduce(concat, Materialized.as_("concat")).to_stream().to("concats")
    topology = builder.build()
    itb = topology.internal_topology_builder
    itb.set_application_id("reuse")
    assert itb.internal_topics == {"reuse-by-value-repartition"}
    with TopologyTestDriver(topology, CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        source.pipe_input("k1", "a", 1)
        source.pipe_input("k2", "a", 2)
        assert driver.create_output_topic("counts", S, Serdes.Long()).read_records_to_list() == [
            TestRecord("a", 1, 1), TestRecord("a", 2, 2)]  # fmt: skip
        assert driver.create_output_topic("concats", S, S).read_records_to_list() == [
            TestRecord("a", "a", 1), TestRecord("a", "aa", 2)]  # fmt: skip


def test_an_unnamed_grouped_stream_gets_one_topic_per_aggregation() -> None:
    """Java's RepartitionTopicNamingTest.shouldNotReuseRepartitionNodeWithUnnamedRepartitionTopics."""
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed.with_(S, S)).select_key(lambda k, v: v).group_by_key()
    grouped.count(Materialized.as_("count-one"))
    grouped.count(Materialized.as_("count-two"))
    itb = builder.build().internal_topology_builder
    itb.set_application_id("reuse")
    assert itb.internal_topics == {"reuse-count-one-repartition", "reuse-count-two-repartition"}


def test_a_named_grouped_table_shares_its_repartition_topic_between_aggregations() -> None:
    builder = StreamsBuilder()
    grouped = builder.table("t", Consumed.with_(S, S)).group_by(lambda k, v: (v, v), Grouped.as_("by-value"))
    grouped.count(Materialized.as_("count-a"))
    grouped.count(Materialized.as_("count-b"))
    topology = builder.build()
    itb = topology.internal_topology_builder
    itb.set_application_id("reuse")
    assert itb.internal_topics == {"reuse-by-value-repartition"}
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("t", S, S).pipe_input("k", "x", 1)
        assert driver.get_key_value_store("count-a").get("x") == 1
        assert driver.get_key_value_store("count-b").get("x") == 1


def test_table_group_by_count_has_javas_topology() -> None:
    """TopologyTest.tableZeroArgCountShouldPreserveTopologyStructure."""
    builder = StreamsBuilder()
    builder.table("input-topic").group_by(lambda k, v: (None, None)).count()
    assert str(builder.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic])\n"
        "      --> KTABLE-SOURCE-0000000002\n"
        "    Processor: KTABLE-SOURCE-0000000002 (stores: [input-topic-STATE-STORE-0000000000])\n"
        "      --> KTABLE-SELECT-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: KTABLE-SELECT-0000000003 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KTABLE-SOURCE-0000000002\n"
        "    Sink: KSTREAM-SINK-0000000005 (topic: KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition)\n"
        "      <-- KTABLE-SELECT-0000000003\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000006 (topics: [KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition])\n"
        "      --> KTABLE-AGGREGATE-0000000007\n"
        "    Processor: KTABLE-AGGREGATE-0000000007 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])\n"
        "      --> none\n"
        "      <-- KSTREAM-SOURCE-0000000006\n"
        "\n"
    )
