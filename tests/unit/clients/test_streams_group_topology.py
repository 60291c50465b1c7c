"""The topology a streams group member sends, built from our topologies as Kafka Streams builds it."""

from __future__ import annotations

from streams_core import (
    JoinWindows,
    Materialized,
    Processor,
    ProcessorContext,
    Record,
    Repartitioned,
    Serdes,
    Stores,
    StreamsBuilder,
    Topology,
)
from streams_core.clients.streams_group_protocol import Subtopology, TopicInfo
from streams_core.clients.streams_group_topology import streams_group_topology
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


def heartbeat_topology(topology: Topology, app: str = "app", **kwargs: int) -> dict[str, Subtopology]:
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
    assert group == {"left", repartition.name}
    assert joining.source_topics == ("left",)
    assert [s.subtopology_id for s in subs.values() if repartition.name in s.repartition_sink_topics] != []


class _Writer(Processor[str, str, None, None]):
    def init(self, context: ProcessorContext[None, None]) -> None:
        self.store = context.get_state_store("read-only")

    def process(self, record: Record[str, str]) -> None:
        self.store.put(record.key, record.value)


def test_a_store_whose_changelog_is_its_source_topic_has_no_changelog_to_create() -> None:
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("read-only"), S, S)
    topology = Topology().add_read_only_state_store(store, "source", "facts", "writer", _Writer)
    assert heartbeat_topology(topology) == {"0": Subtopology("0", source_topics=("facts",))}
