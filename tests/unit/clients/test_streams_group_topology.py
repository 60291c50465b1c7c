"""The topology a streams group member sends, built from our topologies as Kafka Streams builds it."""

from __future__ import annotations

from typing import Any

from streams_core import (
    JoinWindows,
    Materialized,
    Processor,
    ProcessorContext,
    Record,
    Repartitioned,
    Serdes,
    SessionWindows,
    Stores,
    StreamsBuilder,
    TimeWindows,
    Topology,
)
from streams_core.clients.streams_group_protocol import Subtopology, TopicInfo
from streams_core.runtime.assignment.internal_topic_config import changelog_config
from streams_core.runtime.assignment.streams_group_topology import streams_group_topology
from streams_core.runtime.topology_metadata import TopologyMetadata

S = Serdes.String()

# The internal topic configs a Java Kafka Streams 4.3.1 member sends for a word count (seen through
# StreamsGroupDescribe in tests/integration/test_streams_group_java_parity.py).
JAVA_CHANGELOG_CONFIG = {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"}
JAVA_REPARTITION_CONFIG = {
    "cleanup.policy": "delete",
    "message.timestamp.type": "CreateTime",
    "retention.ms": "-1",
    "segment.bytes": "52428800",
}


def heartbeat_topology(topology: Topology, app: str = "app", **kwargs: Any) -> dict[str, Subtopology]:
    itb = topology.internal_topology_builder
    itb.set_application_id(app)
    built = streams_group_topology(TopologyMetadata(itb, app), **kwargs)
    assert built.epoch == 0
    return {s.subtopology_id: s for s in built.subtopologies}


def test_word_count_has_kafka_streams_subtopologies_and_internal_topics() -> None:
    builder = StreamsBuilder()
    (builder.stream("lines", key_serde=S, value_serde=S)
     .flat_map_values(lambda line: line.split()).group_by(lambda key, word: word)
     .count(Materialized.as_("counts")).to_stream().to("words", value_serde=Serdes.Long()))  # fmt: skip
    subs = heartbeat_topology(builder.build(), replication_factor=3)
    assert subs == {
        "0": Subtopology("0", source_topics=("lines",), repartition_sink_topics=("app-counts-repartition",)),
        "1": Subtopology(
            "1",
            state_changelog_topics=(TopicInfo("app-counts-changelog", 0, 3, JAVA_CHANGELOG_CONFIG),),
            repartition_source_topics=(TopicInfo("app-counts-repartition", 0, 3, JAVA_REPARTITION_CONFIG),),
        ),
    }


def test_a_declared_repartition_count_is_sent_and_others_left_to_the_broker() -> None:
    builder = StreamsBuilder()
    (builder.stream("in", key_serde=S, value_serde=S).select_key(lambda k, v: v)
     .repartition(Repartitioned.as_("wide").with_number_of_partitions(12))
     .group_by(lambda k, v: v).count(Materialized.as_("c").with_logging_disabled()))  # fmt: skip
    subs = heartbeat_topology(builder.build())
    assert [(t.name, t.partitions) for t in subs["1"].repartition_source_topics] == [("app-wide-repartition", 12)]
    assert [(t.name, t.partitions) for t in subs["2"].repartition_source_topics] == [("app-c-repartition", 0)]
    assert subs["1"].repartition_sink_topics == ("app-c-repartition",)
    assert subs["2"].state_changelog_topics == ()  # logging disabled: no changelog


def test_joined_streams_form_a_copartition_group_of_their_subtopology() -> None:
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=S, value_serde=S)
    right = builder.stream("right", key_serde=S, value_serde=S).select_key(lambda k, v: v)
    left.join(right, lambda lv, rv: lv + rv, JoinWindows.of_time_difference_with_no_grace(10)).to("out")
    subs = heartbeat_topology(builder.build())
    (joining,) = [s for s in subs.values() if s.copartition_groups]
    (group,) = joining.copartition_groups
    assert "left" in group and len(group) == 2
    (repartition,) = joining.repartition_source_topics
    assert set(group) == {"left", repartition.name}
    assert joining.source_topics == ("left",)
    assert [s.subtopology_id for s in subs.values() if repartition.name in s.repartition_sink_topics] != []


class _Writer(Processor[str, str, None, None]):
    def init(self, context: ProcessorContext[None, None]) -> None:
        self.store = context.get_state_store("read-only")

    def process(self, record: Record[str, str]) -> None:
        self.store.put(record.key, record.value)


def test_a_store_whose_changelog_is_its_source_topic_lists_that_topic_as_its_changelog() -> None:
    """As Java 4.3.1's `InternalTopologyBuilder` (a store connected to its source topic): the broker creates no
    topic for it but counts the sub-topology stateful, so its tasks get standbys (a read-only store's logging is
    disabled: no log config)."""
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("read-only"), S, S)
    topology = Topology().add_read_only_state_store(store, "source", "facts", "writer", _Writer)
    changelog = TopicInfo("facts", 0, -1, changelog_config(store, {}, 0))
    assert heartbeat_topology(topology) == {"0": Subtopology("0", source_topics=("facts",), state_changelog_topics=(changelog,))}


def test_an_optimized_source_table_lists_its_source_topic_as_its_changelog() -> None:
    builder = StreamsBuilder()
    builder.table("prices", Materialized.as_("prices-store").with_key_serde(S).with_value_serde(S))
    topology = builder.build({"topology.optimization": "all"})
    (sub,) = heartbeat_topology(topology).values()
    assert [t.name for t in sub.state_changelog_topics] == ["prices"]
    assert sub.state_changelog_topics[0].configs["cleanup.policy"] == "compact"


def changelog_configs(topology: Topology, **kwargs: Any) -> dict[str, dict[str, str]]:
    """Store changelog topic (without the application prefix) -> the configs sent for it."""
    return {
        t.name.removeprefix("app-"): dict(t.configs)
        for sub in heartbeat_topology(topology, **kwargs).values()
        for t in sub.state_changelog_topics
    }


def test_window_session_and_versioned_changelogs_carry_kafka_streams_retention_configs() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", key_serde=S, value_serde=S)
    stream.group_by_key().windowed_by(TimeWindows.of_size_and_grace(60_000, 10_000)).count(Materialized.as_("w"))
    stream.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5_000)).count(Materialized.as_("s"))
    builder.table("t", Materialized.as_(Stores.persistent_versioned_key_value_store("v", 3_600_000)), key_serde=S, value_serde=S)
    day = 86_400_000
    windowed = {"cleanup.policy": "compact,delete", "message.timestamp.type": "CreateTime"}
    assert changelog_configs(builder.build()) == {
        "w-changelog": {**windowed, "retention.ms": str(70_000 + day)},  # size + grace + the additional retention
        "s-changelog": {**windowed, "retention.ms": str(5_000 + day)},
        "v-changelog": {**JAVA_CHANGELOG_CONFIG, "min.compaction.lag.ms": str(3_600_000 + day)},
    }
    assert changelog_configs(builder.build(), window_additional_retention_ms=0)["w-changelog"]["retention.ms"] == "70000"


def test_a_store_log_config_wins_over_the_defaults_and_the_computed_retention() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", key_serde=S, value_serde=S)
    logged = Materialized.as_("w").with_logging_enabled({"retention.ms": "5", "cleanup.policy": "delete"})
    stream.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(1_000)).count(logged)
    versioned = Stores.persistent_versioned_key_value_store("v", 1_000)
    builder.table(
        "t", Materialized.as_(versioned).with_logging_enabled({"min.compaction.lag.ms": "7"}), key_serde=S, value_serde=S
    )
    configs = changelog_configs(builder.build())
    assert configs["w-changelog"] == {"cleanup.policy": "delete", "message.timestamp.type": "CreateTime", "retention.ms": "5"}
    assert configs["v-changelog"]["min.compaction.lag.ms"] == "7"


def test_topic_prefixed_settings_go_between_the_library_defaults_and_a_stores_log_config() -> None:
    """As Java's `*TopicConfig.properties(defaultTopicConfigs, ...)`: library < `topic.` < store log config; the
    computed retention and compaction lag are kept over a `topic.` setting, dropped for a log config's own."""
    builder = StreamsBuilder()
    stream = builder.stream("in", key_serde=S, value_serde=S)
    stream.group_by(lambda k, v: v).count(Materialized.as_("c").with_logging_enabled({"segment.ms": "9"}))
    stream.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(1_000)).count(Materialized.as_("w"))
    builder.table("t", Materialized.as_(Stores.persistent_versioned_key_value_store("v", 1_000)), key_serde=S, value_serde=S)
    defaults = {"segment.ms": "1", "retention.ms": "2", "min.compaction.lag.ms": "3"}
    built = heartbeat_topology(builder.build(), topic_defaults=defaults)
    configs = {t.name.removeprefix("app-"): dict(t.configs) for sub in built.values() for t in sub.state_changelog_topics}
    assert configs["c-changelog"] == {**JAVA_CHANGELOG_CONFIG, **defaults, "segment.ms": "9"}
    assert configs["w-changelog"]["retention.ms"] == str(1_000 + 86_400_000) and configs["w-changelog"]["segment.ms"] == "1"
    assert configs["v-changelog"]["min.compaction.lag.ms"] == str(1_000 + 86_400_000)
    (repartition,) = [t for sub in built.values() for t in sub.repartition_source_topics]
    assert dict(repartition.configs) == {**JAVA_REPARTITION_CONFIG, **defaults}


def test_a_retention_past_a_java_long_saturates_as_kafka_streams_computes_it() -> None:
    class Windowed:
        retention_period = 2**63 - 10

    assert changelog_config(Windowed(), {}, 86_400_000)["retention.ms"] == str(2**63 - 1)


def test_join_window_store_changelogs_are_delete_only_as_in_kafka_streams() -> None:
    builder = StreamsBuilder()
    left, right = builder.stream("l", key_serde=S, value_serde=S), builder.stream("r", key_serde=S, value_serde=S)
    left.join(right, lambda lv, rv: lv + rv, JoinWindows.of_time_difference_with_no_grace(1_000)).to("out")
    configs = changelog_configs(builder.build())
    assert configs and all(c["cleanup.policy"] == "delete" for c in configs.values()), configs


def test_copartition_groups_sharing_a_topic_are_merged_and_listed_in_javas_order() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("orders", key_serde=S, value_serde=S)
    customers = builder.table("customers", key_serde=S, value_serde=S)
    payments = builder.table("payments", key_serde=S, value_serde=S)
    stream.join(customers, lambda o, c: o + c).join(payments, lambda o, p: o + p).to("out")
    itb = builder.build().internal_topology_builder
    assert len(itb.copartition_groups()) == 2  # {orders, customers} and {orders, payments}
    (sub,) = heartbeat_topology(builder.build()).values()
    # InternalTopologyBuilder.copartitionGroups merges them; a Java HashSet's order (test_streams_group_java_order.py)
    assert sub.copartition_groups == (("payments", "orders", "customers"),)


def test_topics_of_one_hash_bucket_keep_javas_insertion_order() -> None:
    # "aleft0" and "zright9" share a bucket of a 16-bucket HashSet: their order is the order Java added them in,
    # the join's source nodes in HashSet order (KSTREAM-SOURCE-0000000001 first). Java 4.3.1's
    # InternalTopologyBuilder.copartitionGroups() printed [[zright9, aleft0]] and, sides swapped, [[aleft0, zright9]].
    for left, right, expected in (("aleft0", "zright9", ("zright9", "aleft0")), ("zright9", "aleft0", ("aleft0", "zright9"))):
        builder = StreamsBuilder()
        lefts, rights = builder.stream(left, key_serde=S, value_serde=S), builder.stream(right, key_serde=S, value_serde=S)
        lefts.join(rights, lambda lv, rv: lv + rv, JoinWindows.of_time_difference_with_no_grace(1_000)).to("out")
        (sub,) = heartbeat_topology(builder.build()).values()
        assert sub.copartition_groups == (expected,)
