"""KTable filter tombstones, the send-old-values chain and `queryable_store_name`, after KTableFilterTest."""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import (
    Consumed,
    Materialized,
    Serdes,
    StreamsBuilder,
    TestRecord,
    TopologyError,
    TopologyTestDriver,
)

S, INT = Serdes.String(), Serdes.Integer()
CONFIG = {"application.id": "filter", "statestore.cache.max.bytes": 0}
INPUT = [("A", 1, 10), ("B", 2, 5), ("C", 3, 8), ("D", 4, 14), ("A", None, 18), ("B", None, 15)]


def even(key: Any, value: int) -> bool:
    return value % 2 == 0


def run(builder: StreamsBuilder, records: list[tuple[Any, ...]], *topics: str, value_serde: Any = INT) -> list[Any]:
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("topic1", S, value_serde).pipe_record_list(records)
        return [driver.create_output_topic(t, S, value_serde).read_records_to_list() for t in topics]


EXPECTED_FILTER = [TestRecord("A", None, 10), TestRecord("B", 2, 5), TestRecord("C", None, 8), TestRecord("D", 4, 14),
                   TestRecord("A", None, 18), TestRecord("B", None, 15)]  # fmt: skip
EXPECTED_FILTER_NOT = [TestRecord("A", 1, 10), TestRecord("B", None, 5), TestRecord("C", 3, 8),
                       TestRecord("D", None, 14), TestRecord("A", None, 18), TestRecord("B", None, 15)]  # fmt: skip


@pytest.mark.parametrize("materialize_filter", [False, True])
def test_filter_and_filter_not_pass_rejections_through_as_tombstones(materialize_filter: bool) -> None:
    """KTableFilterTest.shouldPassThroughWithoutMaterialization / shouldPassThroughOnMaterialization."""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", Consumed.with_(S, INT))
    table2 = table1.filter(even, materialized=Materialized.as_("store2") if materialize_filter else None)
    table3 = table1.filter_not(even)
    assert table1.queryable_store_name is None
    assert table2.queryable_store_name == ("store2" if materialize_filter else None)
    assert table3.queryable_store_name is None
    table2.to_stream().to("out2")
    table3.to_stream().to("out3")
    assert run(builder, INPUT, "out2", "out3") == [EXPECTED_FILTER, EXPECTED_FILTER_NOT]


def test_filter_before_a_group_by_skips_changes_invisible_before_and_after() -> None:
    """KTableFilterTest.shouldSkipNullToRepartitionWithoutMaterialization: the group_by asks for old
    values, so rejected keys never seen before forward nothing (here: no tombstones reach the stream)."""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", Consumed.with_(S, S))
    table2 = table1.filter(lambda key, value: value.lower() == "accept")
    table2.group_by(lambda key, value: (key, value)).reduce(lambda a, v: a + v, lambda a, v: a)
    table1.to_stream().to("out1")
    table2.to_stream().to("out2")
    out1, out2 = run(builder, [("A", "reject", 5), ("B", "reject", 10), ("C", "reject", 20)], "out1", "out2",
                     value_serde=S)  # fmt: skip
    assert out1 == [TestRecord("A", "reject", 5), TestRecord("B", "reject", 10), TestRecord("C", "reject", 20)]
    assert out2 == []


def test_filter_of_a_named_source_sends_old_values_from_the_start() -> None:
    """KTableFilter: 'if upstream is already materialized, enable sending old values'."""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", Consumed.with_(S, INT), Materialized.as_("source-store"))
    assert table1.queryable_store_name == "source-store"
    table1.filter(even).to_stream().to("out2")
    (out2,) = run(builder, INPUT, "out2")
    assert out2 == [TestRecord("B", 2, 5), TestRecord("D", 4, 14), TestRecord("B", None, 15)]


def test_queryable_store_names_are_the_named_stores_only() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("s", key_serde=S, value_serde=INT)
    assert stream.group_by_key().count().queryable_store_name is None
    assert stream.group_by_key().count(Materialized.as_("counts")).queryable_store_name == "counts"
    assert stream.to_table().queryable_store_name is None
    assert stream.to_table(materialized=Materialized.as_("t")).queryable_store_name == "t"
    table = builder.table("topic1", Consumed.with_(S, INT))
    assert table.map_values(lambda v: v, materialized=Materialized.with_(S, INT)).queryable_store_name is None
    assert table.join(table, lambda a, b: a, materialized=Materialized.as_("j")).queryable_store_name == "j"


def test_table_takes_consumed_and_materialized_positionally() -> None:
    builder = StreamsBuilder()
    table = builder.table("topic1", Consumed.with_(S, INT), Materialized.as_("positional"))
    table.to_stream().to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("topic1", S, INT).pipe_input("a", 1, timestamp=3)
        assert driver.get_key_value_store("positional").get("a") == 1
    builder = StreamsBuilder()
    assert builder.table("t", Materialized.as_("m"), Consumed.with_(S, INT)).queryable_store_name == "m"
    with pytest.raises(TopologyError):
        builder.table("t2", Consumed.with_(S, INT), consumed=Consumed.with_(S, INT))
    with pytest.raises(TypeError):
        builder.table("t3", "store")  # type: ignore[arg-type]


def test_unnamed_tables_keep_no_store_as_javas_describe_shows() -> None:
    """Kafka Streams 4.3.1 prints exactly this for the same topology (checked with its describe())."""
    builder = StreamsBuilder()
    builder.table("t", Consumed.with_(S, S)).to_stream().to("out")
    builder.stream("s", Consumed.with_(S, S)).to_table(materialized=Materialized.with_(S, S)).to_stream().to("out2")
    assert str(builder.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [t])\n"
        "      --> KTABLE-SOURCE-0000000002\n"
        "    Processor: KTABLE-SOURCE-0000000002 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: KTABLE-TOSTREAM-0000000003 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KTABLE-SOURCE-0000000002\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: out)\n"
        "      <-- KTABLE-TOSTREAM-0000000003\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000005 (topics: [s])\n"
        "      --> KSTREAM-TOTABLE-0000000006\n"
        "    Processor: KSTREAM-TOTABLE-0000000006 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000008\n"
        "      <-- KSTREAM-SOURCE-0000000005\n"
        "    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000009\n"
        "      <-- KSTREAM-TOTABLE-0000000006\n"
        "    Sink: KSTREAM-SINK-0000000009 (topic: out2)\n"
        "      <-- KTABLE-TOSTREAM-0000000008\n"
        "\n"
    )
