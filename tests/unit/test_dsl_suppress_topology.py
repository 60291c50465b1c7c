"""The suppression buffer is a store named as Kafka Streams names it, and `describe()` shows it
(Kafka's SuppressTopologyTest, its four expected descriptions verbatim); the grace buffer of a
versioned stream-table join is `<join name>-Buffer`."""

from __future__ import annotations

from streams_core import (
    BufferConfig,
    Grouped,
    Joined,
    Materialized,
    Serdes,
    SessionWindows,
    Stores,
    StreamsBuilder,
    Suppressed,
)

S = Serdes.String()

NAMED_FINAL_TOPOLOGY = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [input])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> counts-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: counts-repartition-filter (stores: [])
      --> counts-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: counts-repartition-sink (topic: counts-repartition)
      <-- counts-repartition-filter

  Sub-topology: 1
    Source: counts-repartition-source (topics: [counts-repartition])
      --> KSTREAM-AGGREGATE-0000000002
    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [counts])
      --> myname
      <-- counts-repartition-source
    Processor: myname (stores: [myname-store])
      --> KTABLE-TOSTREAM-0000000006
      <-- KSTREAM-AGGREGATE-0000000002
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-MAP-0000000007
      <-- myname
    Processor: KSTREAM-MAP-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KTABLE-TOSTREAM-0000000006
    Sink: KSTREAM-SINK-0000000008 (topic: output-suppressed)
      <-- KSTREAM-MAP-0000000007

"""

ANONYMOUS_FINAL_TOPOLOGY = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [input])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> counts-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: counts-repartition-filter (stores: [])
      --> counts-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: counts-repartition-sink (topic: counts-repartition)
      <-- counts-repartition-filter

  Sub-topology: 1
    Source: counts-repartition-source (topics: [counts-repartition])
      --> KSTREAM-AGGREGATE-0000000002
    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [counts])
      --> KTABLE-SUPPRESS-0000000006
      <-- counts-repartition-source
    Processor: KTABLE-SUPPRESS-0000000006 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000007])
      --> KTABLE-TOSTREAM-0000000008
      <-- KSTREAM-AGGREGATE-0000000002
    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])
      --> KSTREAM-MAP-0000000009
      <-- KTABLE-SUPPRESS-0000000006
    Processor: KSTREAM-MAP-0000000009 (stores: [])
      --> KSTREAM-SINK-0000000010
      <-- KTABLE-TOSTREAM-0000000008
    Sink: KSTREAM-SINK-0000000010 (topic: output-suppressed)
      <-- KSTREAM-MAP-0000000009

"""

NAMED_INTERMEDIATE_TOPOLOGY = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [input])
      --> KSTREAM-AGGREGATE-0000000002
    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])
      --> asdf
      <-- KSTREAM-SOURCE-0000000000
    Processor: asdf (stores: [asdf-store])
      --> KTABLE-TOSTREAM-0000000003
      <-- KSTREAM-AGGREGATE-0000000002
    Processor: KTABLE-TOSTREAM-0000000003 (stores: [])
      --> KSTREAM-SINK-0000000004
      <-- asdf
    Sink: KSTREAM-SINK-0000000004 (topic: output)
      <-- KTABLE-TOSTREAM-0000000003

"""

ANONYMOUS_INTERMEDIATE_TOPOLOGY = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [input])
      --> KSTREAM-AGGREGATE-0000000002
    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])
      --> KTABLE-SUPPRESS-0000000003
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-SUPPRESS-0000000003 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000004])
      --> KTABLE-TOSTREAM-0000000005
      <-- KSTREAM-AGGREGATE-0000000002
    Processor: KTABLE-TOSTREAM-0000000005 (stores: [])
      --> KSTREAM-SINK-0000000006
      <-- KTABLE-SUPPRESS-0000000003
    Sink: KSTREAM-SINK-0000000006 (topic: output)
      <-- KTABLE-TOSTREAM-0000000005

"""


def final_results(name: str | None) -> str:
    builder = StreamsBuilder()
    suppressed = Suppressed.until_window_closes(BufferConfig.unbounded())
    (builder.stream("input", key_serde=S, value_serde=S)
     .group_by(lambda key, value: key, Grouped.with_(S, S))
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 5))
     .count(Materialized.as_("counts").with_caching_disabled())
     .suppress(suppressed.with_name(name) if name else suppressed)
     .to_stream()
     .map(lambda windowed, count: (str(windowed), count))
     .to("output-suppressed", key_serde=S, value_serde=Serdes.Long()))  # fmt: skip
    return str(builder.build().describe())


def intermediate(name: str | None) -> str:
    builder = StreamsBuilder()
    suppressed = Suppressed.until_time_limit(1000, BufferConfig.unbounded())
    (builder.stream("input", key_serde=S, value_serde=S)
     .group_by_key()
     .count()
     .suppress(suppressed.with_name(name) if name else suppressed)
     .to_stream()
     .to("output", key_serde=S, value_serde=Serdes.Long()))  # fmt: skip
    return str(builder.build().describe())


def test_an_anonymous_final_suppression_numbers_its_node_and_store() -> None:
    assert final_results(None) == ANONYMOUS_FINAL_TOPOLOGY


def test_a_named_final_suppression_names_its_store_after_it() -> None:
    assert final_results("myname") == NAMED_FINAL_TOPOLOGY


def test_an_anonymous_suppression_numbers_its_node_and_store() -> None:
    assert intermediate(None) == ANONYMOUS_INTERMEDIATE_TOPOLOGY


def test_a_named_suppression_names_its_store_after_it() -> None:
    assert intermediate("asdf") == NAMED_INTERMEDIATE_TOPOLOGY


def test_the_join_grace_buffer_is_a_logged_store_named_after_the_join() -> None:
    builder = StreamsBuilder()
    table = builder.table("t", key_serde=S, value_serde=S,
                          materialized=Materialized.as_(Stores.persistent_versioned_key_value_store("v", 100)))  # fmt: skip
    builder.stream("s", key_serde=S, value_serde=S).join(table, lambda a, b: a, Joined.with_(S, S, S, "j", 10)).to("o")
    topology = builder.build()
    assert "Processor: j (stores: [j-Buffer, v])" in str(topology.describe())
    assert topology.internal_topology_builder.store_builder("j-Buffer").logging_enabled
