"""KTable operators: sources with updates and tombstones, filter, map_values, to_stream, group_by aggregations."""

from __future__ import annotations

from typing import Any

from streams_core import (
    Grouped,
    KeyValue,
    Materialized,
    Serdes,
    StreamsBuilder,
    TestRecord,
    TopologyTestDriver,
)

S, L = Serdes.String(), Serdes.Long()
CONFIG = {"application.id": "ktab", "statestore.cache.max.bytes": 0}
UPDATES = [("a", 1, 1), ("b", 2, 2), ("a", 3, 3), ("a", None, 4), ("c", None, 5)]


def table(builder: StreamsBuilder, materialized: Materialized | None = None) -> Any:
    return builder.table("t", materialized, key_serde=S, value_serde=L)


def run(
    builder: StreamsBuilder, records: list[tuple[Any, ...]] = UPDATES, value_serde: Any = L
) -> tuple[list[Any], Any]:
    driver = TopologyTestDriver(builder.build(), CONFIG)
    driver.create_input_topic("t", S, L).pipe_record_list(records)
    return driver.create_output_topic("out", S, value_serde).read_records_to_list(), driver


def test_table_source_upserts_deletes_and_forwards_tombstones() -> None:
    builder = StreamsBuilder()
    table(builder, Materialized.as_("tbl")).to_stream().to("out")
    out, driver = run(builder)
    with driver:
        # the delete of "c", a key it never held, is forwarded too: Java's KTableSource without a cache
        assert out == [TestRecord("a", 1, 1), TestRecord("b", 2, 2), TestRecord("a", 3, 3), TestRecord("a", None, 4),
                       TestRecord("c", None, 5)]  # fmt: skip
        store = driver.get_key_value_store("tbl")
        assert list(store.all()) == [KeyValue("b", 2)]
        assert store.get_with_timestamp("b") == (2, 2)
    assert "Processor: KTABLE-SOURCE-0000000001 (stores: [tbl])" in str(builder.build().describe())


def test_an_unnamed_table_has_a_store_only_when_something_needs_it() -> None:
    """As Java (checked against Kafka 4.3.1's describe()): `table(...).to_stream()` keeps no store; a
    join or group_by materialises the table, in a store named after the topic."""
    builder = StreamsBuilder()
    table(builder).to_stream().to("out")
    assert "Processor: KTABLE-SOURCE-0000000002 (stores: [])" in str(builder.build().describe())
    builder = StreamsBuilder()
    table(builder).group_by(lambda k, v: (k, v)).count()
    assert "Processor: KTABLE-SOURCE-0000000002 (stores: [t-STATE-STORE-0000000000])" in str(builder.build().describe())


def test_filter_of_an_unmaterialized_table_forwards_a_tombstone_per_rejected_record() -> None:
    """As Java's KTableFilter without old values: every rejected update becomes (key, None)."""
    builder = StreamsBuilder()
    t = table(builder)
    t.filter(lambda k, v: v > 1, materialized=Materialized.as_("big")).to_stream().to("out")
    t.filter_not(lambda k, v: v > 1).to_stream().to("small")
    out, driver = run(builder)
    with driver:
        # the unmaterialised source forwards the delete of "c" (never seen) too, as Java's
        assert out == [TestRecord("a", None, 1), TestRecord("b", 2, 2), TestRecord("a", 3, 3),
                       TestRecord("a", None, 4), TestRecord("c", None, 5)]  # fmt: skip
        assert driver.create_output_topic("small", S, L).read_records_to_list() == [
            TestRecord("a", 1, 1), TestRecord("b", None, 2), TestRecord("a", None, 3), TestRecord("a", None, 4),
            TestRecord("c", None, 5)]  # fmt: skip
        assert list(driver.get_key_value_store("big").all()) == [KeyValue("b", 2)]


def test_filter_of_a_materialized_table_drops_updates_invisible_before_and_after() -> None:
    """Upstream materialised: the filter sends old values and skips (None, None) changes (Java's rule)."""
    builder = StreamsBuilder()
    t = table(builder, Materialized.as_("t-store"))
    t.filter(lambda k, v: v > 1).to_stream().to("out")
    t.filter_not(lambda k, v: v > 1).to_stream().to("small")
    out, driver = run(builder)
    with driver:
        assert out == [TestRecord("b", 2, 2), TestRecord("a", 3, 3), TestRecord("a", None, 4)]
        assert driver.create_output_topic("small", S, L).read_records_to_list() == [
            TestRecord("a", 1, 1), TestRecord("a", None, 3)]  # fmt: skip


def test_map_values_maps_new_and_old_and_keeps_deletes() -> None:
    builder = StreamsBuilder()
    table(builder).map_values(lambda v: v * 10, materialized=Materialized.as_("tens")).to_stream().to("out")
    out, driver = run(builder)
    with driver:
        assert out == [TestRecord("a", 10, 1), TestRecord("b", 20, 2), TestRecord("a", 30, 3), TestRecord("a", None, 4),
                       TestRecord("c", None, 5)]  # fmt: skip
        assert list(driver.get_key_value_store("tens").all()) == [KeyValue("b", 20)]


def test_to_stream_with_a_key_mapper() -> None:
    builder = StreamsBuilder()
    table(builder).map_values(lambda k, v: f"{k}={v}").to_stream(lambda k, v: k.upper()).to("out", value_serde=S)
    out, driver = run(builder, UPDATES[:2], S)
    driver.close()
    assert out == [TestRecord("A", "a=1", 1), TestRecord("B", "b=2", 2)]


def test_stream_to_table() -> None:
    builder = StreamsBuilder()
    (builder.stream("t", key_serde=S, value_serde=L).to_table(materialized=Materialized.as_("latest"))
     .to_stream().to("out"))  # fmt: skip
    out, driver = run(builder)
    with driver:
        assert [r.value for r in out] == [1, 2, 3, None, None]
        assert list(driver.get_key_value_store("latest").all()) == [KeyValue("b", 2)]


def test_to_table_after_select_key_repartitions() -> None:
    builder = StreamsBuilder()
    (builder.stream("t", key_serde=S, value_serde=L).select_key(lambda k, v: k.upper())
     .to_table(named="upper").to_stream().to("out"))  # fmt: skip
    out, driver = run(builder, UPDATES[:3])
    driver.close()
    assert out == [TestRecord("A", 1, 1), TestRecord("B", 2, 2), TestRecord("A", 3, 3)]
    assert builder.build().internal_topology_builder.internal_topics == {"ktab-upper-repartition"}


USERS = [("alice", "eu", 1), ("bob", "eu", 2), ("alice", "us", 3), ("carol", "us", 4), ("bob", None, 5),
         ("alice", "us", 6)]  # fmt: skip


def test_group_by_count_subtracts_from_the_old_group() -> None:
    builder = StreamsBuilder()
    (builder.table("t", key_serde=S, value_serde=S).group_by(lambda k, v: (v, k))
     .count(Materialized.as_("per-region")).to_stream().to("out"))  # fmt: skip
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("t", S, S).pipe_record_list(USERS)
        assert driver.create_output_topic("out", S, L).read_records_to_list() == [
            TestRecord("eu", 1, 1), TestRecord("eu", 2, 2), TestRecord("eu", 1, 3), TestRecord("us", 1, 3),
            TestRecord("us", 2, 4), TestRecord("eu", 0, 5), TestRecord("us", 2, 6),
        ]  # fmt: skip
        assert list(driver.get_key_value_store("per-region").all()) == [KeyValue("eu", 0), KeyValue("us", 2)]
        assert driver.create_output_topic("ktab-per-region-repartition", S, S).get_queue_size() == 7


def test_group_by_reduce_and_aggregate_with_subtractors() -> None:
    builder = StreamsBuilder()
    prices = builder.table("t", key_serde=S, value_serde=L)
    by_category = prices.group_by(lambda item, price: (item.split("/")[0], price), Grouped.with_(S, L).with_name("cat"))
    by_category.reduce(lambda a, b: a + b, lambda a, b: a - b, Materialized.as_("sum")).to_stream().to("out")
    (prices.group_by(lambda item, price: (item.split("/")[0], price), key_serde=S, value_serde=L)
     .aggregate(lambda: 0, lambda k, v, agg: agg + 1, lambda k, v, agg: agg - 1,
                Materialized.as_("n").with_value_serde(L))
     .to_stream().to("n-out", value_serde=L))  # fmt: skip
    items = [("fruit/apple", 3, 1), ("fruit/pear", 5, 2), ("veg/leek", 2, 3), ("fruit/apple", 4, 4),
             ("fruit/pear", None, 5), ("fruit/apple", None, 6)]  # fmt: skip
    out, driver = run(builder, items)
    with driver:
        assert out == [
            TestRecord("fruit", 3, 1), TestRecord("fruit", 8, 2), TestRecord("veg", 2, 3), TestRecord("fruit", 9, 4),
            TestRecord("fruit", 4, 5), TestRecord("fruit", 0, 6),
        ]  # fmt: skip
        assert driver.create_output_topic("n-out", S, L).read_values_to_list() == [1, 2, 1, 2, 1, 0]
        assert driver.get_key_value_store("sum").get("fruit") == 0
        assert driver.get_key_value_store("n").get("fruit") == 0
    # Java names the sink after the aggregation (unnamed here), not after the grouping
    assert "Sink: KSTREAM-SINK-0000000004 (topic: cat-repartition)" in str(builder.build().describe())
