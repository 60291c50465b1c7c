"""Grouping and aggregation of streams: count, reduce, aggregate, repartitioning, stores, caching."""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import (
    Grouped,
    KeyValue,
    Materialized,
    Serdes,
    Stores,
    StreamsBuilder,
    TestRecord,
    TopologyTestDriver,
)

S, L, J = Serdes.String(), Serdes.Long(), Serdes.Json()
CONFIG = {"application.id": "agg", "statestore.cache.max.bytes": 0}


def words(builder: StreamsBuilder) -> Any:
    return builder.stream("in", key_serde=S, value_serde=S)


def test_group_by_key_count_forwards_every_update_with_the_latest_timestamp() -> None:
    builder = StreamsBuilder()
    words(builder).group_by_key().count(Materialized.as_("counts")).to_stream().to("out", value_serde=L)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record_list(
            [("a", "x", 10), ("b", "x", 11), ("a", "y", 5), ("a", "z", 12)])  # fmt: skip
        assert driver.create_output_topic("out", S, L).read_records_to_list() == [
            TestRecord("a", 1, 10), TestRecord("b", 1, 11), TestRecord("a", 2, 10), TestRecord("a", 3, 12)]  # fmt: skip
        store = driver.get_key_value_store("counts")
        assert store.get("a") == 3 and store.get("zz") is None
        assert list(store.all()) == [KeyValue("a", 3), KeyValue("b", 1)]
        assert store.get_with_timestamp("a") == (3, 12)
    assert len(builder.build().internal_topology_builder.node_groups()) == 1


def test_records_with_none_key_or_value_are_dropped_and_counted() -> None:
    builder = StreamsBuilder()
    words(builder).group_by_key().count().to_stream().to("out", value_serde=L)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        source.pipe_record_list([(None, "x", 1), ("a", None, 2), ("a", "x", 3)])
        assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [("a", 1)]
        assert driver.dropped_records == 2


def test_group_by_repartitions_through_a_topic_named_after_the_store() -> None:
    builder = StreamsBuilder()
    (words(builder).group_by(lambda k, v: v).count(Materialized.as_("by-value"))
     .to_stream().to("out", value_serde=L))  # fmt: skip
    topology = builder.build()
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record_list([("k1", "x", 1), ("k2", "x", 2), (None, "y", 3)])
        assert driver.create_output_topic("agg-by-value-repartition", S, S).read_records_to_list() == [
            TestRecord("x", "x", 1), TestRecord("x", "x", 2), TestRecord("y", "y", 3)]  # fmt: skip
        assert driver.create_output_topic("out", S, L).read_records_to_list() == [
            TestRecord("x", 1, 1), TestRecord("x", 2, 2), TestRecord("y", 1, 3)]  # fmt: skip
    itb = topology.internal_topology_builder
    assert itb.internal_topics == {"agg-by-value-repartition"}
    assert sorted(itb.node_groups()) == [0, 1]


def test_repartitioning_after_select_key_drops_none_keys_and_regroups() -> None:
    builder = StreamsBuilder()
    (words(builder).select_key(lambda k, v: v.split(":")[0] or None).group_by_key(Grouped.as_("users"))
     .reduce(lambda agg, v: agg + "," + v.split(":")[1]).to_stream().to("out"))  # fmt: skip
    topology = builder.build()
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record_list(
            [("1", "ann:a", 1), ("2", "bob:b", 2), ("3", ":none", 3), ("4", "ann:c", 4)])  # fmt: skip
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [
            ("ann", "ann:a"), ("bob", "bob:b"), ("ann", "ann:a,c")]  # fmt: skip
        assert driver.create_output_topic("agg-users-repartition", S, S).get_queue_size() == 3
    text = str(topology.describe())
    assert "Processor: users-repartition-filter (stores: [])" in text
    assert "Source: users-repartition-source (topics: [users-repartition])" in text


def test_group_by_key_without_key_change_does_not_repartition() -> None:
    builder = StreamsBuilder()
    words(builder).filter(lambda k, v: True).map_values(str.upper).group_by_key().count()
    assert builder.build().internal_topology_builder.internal_topics == frozenset()


def test_reduce_keeps_the_latest_timestamp_of_out_of_order_records() -> None:
    builder = StreamsBuilder()
    (builder.stream("in", key_serde=S, value_serde=L).group_by_key()
     .reduce(max, Materialized.as_("max")).to_stream().to("out", value_serde=L))  # fmt: skip
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, L).pipe_record_list([("a", 5, 100), ("a", 9, 50), ("a", 1, 70)])
        assert driver.create_output_topic("out", S, L).read_records_to_list() == [
            TestRecord("a", 5, 100), TestRecord("a", 9, 100), TestRecord("a", 9, 100)]  # fmt: skip


def test_aggregate_with_initializer_and_serdes() -> None:
    builder = StreamsBuilder()
    (words(builder).group_by_key()
     .aggregate(list, lambda k, v, agg: [*agg, v], Materialized.as_("lists").with_value_serde(J))
     .to_stream().to("out", value_serde=J))  # fmt: skip
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record_list([("a", "x"), ("b", "y"), ("a", "z")])
        assert driver.create_output_topic("out", S, J).read_key_values_to_list() == [
            ("a", ["x"]), ("b", ["y"]), ("a", ["x", "z"])]  # fmt: skip
        assert driver.get_key_value_store("lists").get("a") == ["x", "z"]


def test_grouped_serdes_write_the_repartition_topic() -> None:
    builder = StreamsBuilder()
    (builder.stream("in", key_serde=S, value_serde=S).map(lambda k, v: (len(v), len(k)))
     .group_by_key(Grouped.with_(L, L).with_name("lengths")).count()
     .to_stream().to("out", key_serde=L, value_serde=L))  # fmt: skip
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record_list([("ab", "xyz"), ("c", "uvw")])
        assert driver.create_output_topic("agg-lengths-repartition", L, L).read_key_values_to_list() == [(3, 2), (3, 1)]
        assert driver.create_output_topic("out", L, L).read_key_values_to_list() == [(3, 1), (3, 2)]


def test_unnamed_stores_get_stable_generated_names() -> None:
    def build() -> str:
        builder = StreamsBuilder()
        words(builder).group_by(lambda k, v: v).count().to_stream().to("out", value_serde=L)
        return str(builder.build().describe())

    text = build()
    assert text == build()
    assert "Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])" in text
    assert "Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition)" in text
    builder = StreamsBuilder()
    words(builder).group_by_key().count()
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_input("a", "x")
        assert driver.get_key_value_store("KSTREAM-AGGREGATE-STATE-STORE-0000000001").get("a") == 1


def test_in_memory_and_supplied_stores() -> None:
    builder = StreamsBuilder()
    s = words(builder)
    s.group_by_key().count(Materialized.as_("mem").with_in_memory_store())
    s.group_by_key().count(Materialized.as_(Stores.in_memory_key_value_store("supplied")))
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record_list([("a", "x"), ("a", "y")])
        assert driver.get_key_value_store("mem").get("a") == 2
        assert driver.get_key_value_store("supplied").get("a") == 2
        assert driver.get_state_store("mem").persistent is False


@pytest.mark.parametrize(("config", "expected"), [
    ({"application.id": "agg"}, [("k", 3)]),
    (CONFIG, [("k", 1), ("k", 2), ("k", 3)]),
])  # fmt: skip
def test_caching_forwards_one_update_per_key_and_commit(config: dict[str, Any], expected: list[Any]) -> None:
    builder = StreamsBuilder()
    words(builder).flat_map_values(str.split).group_by_key().count().to_stream().to("out", value_serde=L)
    with TopologyTestDriver(builder.build(), config) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "a b c", 4)
        assert driver.create_output_topic("out", S, L).read_key_values_to_list() == expected


def test_materialized_with_caching_disabled_forwards_every_update() -> None:
    builder = StreamsBuilder()
    (words(builder).flat_map_values(str.split).group_by_key()
     .count(Materialized.as_("c").with_caching_disabled()).to_stream().to("out", value_serde=L))  # fmt: skip
    with TopologyTestDriver(builder.build(), {"application.id": "agg"}) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "a b", 4)
        assert driver.create_output_topic("out", S, L).read_records_to_list() == [
            TestRecord("k", 1, 4), TestRecord("k", 2, 4)]  # fmt: skip


def test_stores_are_logged_unless_disabled() -> None:
    builder = StreamsBuilder()
    s = words(builder)
    s.group_by_key().count(Materialized.as_("logged"))
    s.group_by_key().count(Materialized.as_("unlogged").with_logging_disabled())
    itb = builder.build().internal_topology_builder
    assert itb.store_builder("logged").logging_enabled is True
    assert itb.store_builder("unlogged").logging_enabled is False
