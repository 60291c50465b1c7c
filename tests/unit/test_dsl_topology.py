"""What the DSL adds to the topology builder: internal topics, co-partitioning, global stores, names, serdes."""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import (
    Consumed,
    JoinWindows,
    Materialized,
    Processor,
    Record,
    Repartitioned,
    Serdes,
    Stores,
    StreamsBuilder,
    StreamsConfig,
    TestRecord,
    Topology,
    TopologyError,
    TopologyTestDriver,
)

S, L, J = Serdes.String(), Serdes.Long(), Serdes.Json()
CONFIG = {"application.id": "topo", "statestore.cache.max.bytes": 0}

WORD_COUNT_DESCRIPTION = """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [streams-plaintext-input])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])
      --> counts-store-repartition-filter
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: counts-store-repartition-filter (stores: [])
      --> counts-store-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000002
    Sink: counts-store-repartition-sink (topic: counts-store-repartition)
      <-- counts-store-repartition-filter

  Sub-topology: 1
    Source: counts-store-repartition-source (topics: [counts-store-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [counts-store])
      --> KTABLE-TOSTREAM-0000000007
      <-- counts-store-repartition-source
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: streams-wordcount-output)
      <-- KTABLE-TOSTREAM-0000000007

"""


def word_count() -> Topology:
    builder = StreamsBuilder()
    (builder.stream("streams-plaintext-input", key_serde=S, value_serde=S)
     .flat_map_values(lambda line: line.lower().split()).group_by(lambda key, word: word)
     .count(Materialized.as_("counts-store")).to_stream().to("streams-wordcount-output", value_serde=L))  # fmt: skip
    return builder.build()


def test_describe_prints_what_kafka_streams_prints_for_its_word_count() -> None:
    assert str(word_count().describe()) == WORD_COUNT_DESCRIPTION


def test_internal_topics_get_the_application_id_when_it_is_set() -> None:
    itb = word_count().internal_topology_builder
    with pytest.raises(TopologyError, match="set_application_id"):
        itb.topic_groups()
    itb.set_application_id("wc")
    assert itb.internal_topics == {"wc-counts-store-repartition"}
    groups = itb.topic_groups()
    assert groups[0].sink_topics == {"wc-counts-store-repartition"}
    assert groups[1].source_topics == {"wc-counts-store-repartition"}
    assert itb.source_topics == {"streams-plaintext-input", "wc-counts-store-repartition"}
    assert itb.subtopology_for_topic("wc-counts-store-repartition") == 1
    assert itb.subtopology_for_topic("counts-store-repartition") == 1
    assert "counts-store-repartition-source (topics: [counts-store-repartition])" in str(itb.describe())
    built = itb.build_subtopology(0, StreamsConfig({"application.id": "wc"}))
    assert [sink.topic for sink in built.sinks] == ["wc-counts-store-repartition"]
    itb.set_application_id("other")
    assert itb.internal_topics == {"other-counts-store-repartition"}


def test_partition_counts_of_chained_repartition_topics() -> None:
    builder = StreamsBuilder()
    (builder.stream("in", key_serde=S, value_serde=S).select_key(lambda k, v: v).repartition(name="first")
     .select_key(lambda k, v: k).repartition(Repartitioned.as_("wide").with_number_of_partitions(12))
     .select_key(lambda k, v: v).group_by_key().count(Materialized.as_("counts")))  # fmt: skip
    itb = builder.build().internal_topology_builder
    itb.set_application_id("app")
    assert itb.internal_topic_partition_counts({"in": 3}) == {
        "app-first-repartition": 3, "app-wide-repartition": 12, "app-counts-repartition": 12}  # fmt: skip
    with pytest.raises(TopologyError, match=r"source topics \['in'\] have no known partition count"):
        itb.internal_topic_partition_counts({})


def test_joined_topics_must_have_equal_partition_counts() -> None:
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=S, value_serde=S)
    right = builder.stream("right", key_serde=S, value_serde=S)
    left.join(right, lambda lv, rv: lv + rv, JoinWindows.of_time_difference_with_no_grace(10)).to("out")
    itb = builder.build().internal_topology_builder
    assert itb.internal_topic_partition_counts({"left": 4, "right": 4}) == {}
    with pytest.raises(TopologyError, match=r"same number of partitions: left \(4\), right \(2\)"):
        itb.internal_topic_partition_counts({"left": 4, "right": 2})


def test_a_declared_repartition_count_conflicting_with_a_join_is_an_error() -> None:
    builder = StreamsBuilder()
    table = builder.table("table", key_serde=S, value_serde=S)
    (builder.stream("in", key_serde=S, value_serde=S).repartition(name="re", number_of_partitions=2)
     .join(table, lambda a, b: a).to("out"))  # fmt: skip
    itb = builder.build().internal_topology_builder
    itb.set_application_id("app")
    with pytest.raises(TopologyError, match="'app-re-repartition' is declared with 2 partitions"):
        itb.internal_topic_partition_counts({"in": 2, "table": 5})


class CopyToStore(Processor[str, str, None, None]):
    def init(self, context: Any) -> None:
        self.store = context.get_state_store("global-copy")

    def process(self, record: Record[str, str]) -> None:
        self.store.put(record.key, record.value)


class Lookup(Processor[str, str, str, str]):
    def init(self, context: Any) -> None:
        self.context, self.store = context, context.get_state_store("global-copy")

    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_value(self.store.get(record.value)))


def global_topology(logged: bool = False) -> Topology:
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("global-copy"), S, S)
    if not logged:
        store = store.with_logging_disabled()
    return (Topology()
            .add_global_store(store, "G-SOURCE", "reference", "G-UPDATE", CopyToStore, key_serde=S, value_serde=S)
            .add_source("SOURCE", "events", key_serde=S, value_serde=S)
            .add_processor("LOOKUP", Lookup, "SOURCE")
            .connect_processor_and_state_stores("LOOKUP", "global-copy")
            .add_sink("SINK", "out", "LOOKUP", key_serde=S, value_serde=S))  # fmt: skip


def test_processor_api_global_store_in_the_driver() -> None:
    topology = global_topology()
    itb = topology.internal_topology_builder
    assert itb.node_groups() == {0: ("SOURCE", "LOOKUP", "SINK")}
    assert itb.global_topics == {"reference"} and itb.global_state_store_names == ("global-copy",)
    assert itb.topic_groups()[0].state_stores == ()
    assert str(topology.describe()).endswith(
        "  Sub-topology: 1 for global store (will not generate tasks)\n"
        "    Source: G-SOURCE (topics: [reference])\n      --> G-UPDATE\n"
        "    Processor: G-UPDATE (stores: [global-copy])\n      --> none\n      <-- G-SOURCE\n"
    )  # fmt: skip
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("reference", S, S).pipe_input("k1", "one", 100)
        driver.create_input_topic("events", S, S).pipe_input("e", "k1", 5)
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [TestRecord("e", "one", 5)]
        assert driver.get_key_value_store("global-copy").get("k1") == "one"
        assert driver.stream_time_ms == 5


def test_a_global_store_must_not_be_logged() -> None:
    with pytest.raises(TopologyError, match="logging disabled"):
        global_topology(logged=True)


def test_streams_builder_global_store_turns_logging_off() -> None:
    builder = StreamsBuilder()
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("global-copy"), S, S)
    builder.add_global_store(store, "reference", CopyToStore, Consumed.with_(S, S))
    builder.stream("events", key_serde=S, value_serde=S).process(Lookup, "global-copy").to("out", value_serde=S)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("reference", S, S).pipe_input("k1", "one")
        driver.create_input_topic("events", S, S).pipe_input("e", "k1")
        assert driver.create_output_topic("out", S, S).read_values_to_list() == ["one"]
    assert store.logging_enabled is False


def test_upstream_serdes_are_kept_as_a_guess_without_configured_defaults() -> None:
    builder = StreamsBuilder()
    builder.stream("in", key_serde=S, value_serde=S).map_values(str.upper).select_key(lambda k, v: v).to("out")
    with TopologyTestDriver(builder.build(), {"application.id": "guess"}) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v")
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [("V", "V")]


def test_configured_default_serdes_win_over_the_guess() -> None:
    builder = StreamsBuilder()
    builder.stream("in", key_serde=S, value_serde=S).map_values(lambda v: {"value": v}).to("out")
    with TopologyTestDriver(builder.build(), {"application.id": "defaults", "default.value.serde": "json"}) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v")
        assert driver.create_output_topic("out", S, J).read_values_to_list() == [{"value": "v"}]


def test_serialization_errors_name_the_inferred_serde() -> None:
    builder = StreamsBuilder()
    builder.stream("in", key_serde=S, value_serde=S).map_values(len).to("out")
    with TopologyTestDriver(builder.build(), {"application.id": "oops"}) as driver, pytest.raises(
        Exception, match="inferred from upstream"
    ):
        driver.create_input_topic("in", S, S).pipe_input("k", "v")


def test_names_must_fit_in_topic_names() -> None:
    from streams_core import Grouped

    with pytest.raises(ValueError, match="Grouped name"):
        Grouped.as_("no spaces allowed")
    with pytest.raises(ValueError):
        Materialized.as_("bad/name")


def test_apply_config_binds_inferred_serdes_before_any_task_is_built() -> None:
    builder = StreamsBuilder()
    (builder.stream("in", key_serde=S, value_serde=S).select_key(lambda k, v: v).group_by_key()
     .count(Materialized.as_("c")))  # fmt: skip
    itb = builder.build().internal_topology_builder
    key_serde = itb.store_builder("c").key_serde
    itb.apply_config(StreamsConfig({"application.id": "x", "default.key.serde": "long"}))
    assert key_serde.serialize("t", 1) == (1).to_bytes(8, "big")
    itb.apply_config(StreamsConfig({"application.id": "x"}))
    assert key_serde.serialize("t", "a") == b"a"
