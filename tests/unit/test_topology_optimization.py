"""`topology.optimization`: Kafka Streams' own optimization tests, their inputs, `describe()` texts and outputs.

Each test names the Java test it translates (apache/kafka, streams/src/test/java/org/apache/kafka/
streams/...). The expected texts are in optimization_expected.py.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import pytest

from streams_core import (
    Branched,
    BufferConfig,
    ConfigError,
    Consumed,
    Grouped,
    Joined,
    JoinWindows,
    Materialized,
    Named,
    Processor,
    Produced,
    Serdes,
    Stores,
    StreamJoined,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Topology,
    TopologyTestDriver,
)
from streams_core.common.task_id import TaskId
from streams_core.kstream.kstream import KStream
from streams_core.runtime.topology_metadata import TopologyMetadata
from tests.unit import optimization_expected as expected
from tests.unit.test_describe_order import MERGE_OF_MERGES, named_repartition_topics

S, L, INT = Serdes.String(), Serdes.Long(), Serdes.Integer()
ALL = {"topology.optimization": "all"}
NONE = {"topology.optimization": "none"}
DRIVER_CONFIG = {"application.id": "optimization-test", "default.key.serde": S, "default.value.serde": S,
                 "statestore.cache.max.bytes": 10 * 1024, "commit.interval.ms": 5000}  # fmt: skip


def repartition_sinks(described: str) -> int:
    """The Java tests' `getCountOfRepartitionTopicsFound`: lines matching `Sink: .*-repartition`."""
    return len(re.findall(r"Sink: .*-repartition", described))


# -- RepartitionOptimizingTest -------------------------------------------------------------------


class Collect(Processor[str, str, None, None]):
    """RepartitionOptimizingTest.SimpleProcessor: keeps the values it sees."""

    seen: ClassVar[list[str]] = []

    def process(self, record: Any) -> None:
        Collect.seen.append(record.value)


def repartition_optimizing_topology(props: dict[str, Any]) -> Topology:
    builder = StreamsBuilder()
    source = builder.stream("input", Consumed.with_(S, S).with_name("sourceStream"))
    mapped = source.map(lambda k, v: (k.upper(), v), Named.as_("source-map"))
    (mapped.filter(lambda k, v: k == "B", Named.as_("process-filter"))
        .map_values(lambda v: v.upper(), Named.as_("process-mapValues"))
        .process(Collect, named=Named.as_("process")))  # fmt: skip
    count_store = Materialized.as_(Stores.in_memory_key_value_store("count-store")).with_key_serde(S).with_value_serde(L)
    counts = (mapped.group_by_key(Grouped.as_("count-groupByKey")).count(count_store, Named.as_("count"))
              .to_stream(named=Named.as_("count-toStream")))  # fmt: skip
    counts.to("outputTopic_0", Produced.with_(S, L).with_name("count-to"))
    aggregate_store = Materialized.as_(Stores.in_memory_key_value_store("aggregate-store")).with_key_serde(S).with_value_serde(INT)
    (mapped.group_by_key(Grouped.as_("aggregate-groupByKey"))
        .aggregate(lambda: 0, lambda k, v, total: total + len(v), aggregate_store, Named.as_("aggregate"))
        .to_stream(named=Named.as_("aggregate-toStream"))
        .to("outputTopic_1", Produced.with_(S, INT).with_name("reduce-to")))  # fmt: skip
    (mapped.filter(lambda k, v: True, Named.as_("reduce-filter")).peek(lambda k, v: None, Named.as_("reduce-peek"))
        .group_by_key(Grouped.as_("reduce-groupByKey"))
        .reduce(lambda v1, v2: v1 + ":" + v2, Materialized.as_(Stores.in_memory_key_value_store("reduce-store")),
                Named.as_("reducer"))
        .to_stream(named=Named.as_("reduce-toStream"))
        .to("outputTopic_2", Produced.with_(S, S)))  # fmt: skip
    joined = (StreamJoined.with_(S, S, L).with_name("join")
              .with_this_store_supplier(Stores.in_memory_window_store("join-store", 86_400_000, 10_000, True))
              .with_other_store_supplier(Stores.in_memory_window_store("other-join-store", 86_400_000, 10_000, True)))  # fmt: skip
    (mapped.filter(lambda k, v: k == "A", Named.as_("join-filter"))
        # Java's deprecated JoinWindows.of(5 s): a grace of one day less twice the difference
        .join(counts, lambda v1, v2: f"{v1}:{v2}", JoinWindows.of_time_difference_and_grace(5000, 86_390_000), joined)
        .to("joinedOutputTopic", Produced.as_("join-to")))  # fmt: skip
    return builder.build(props)


@pytest.mark.parametrize(
    ("props", "described", "topics"),
    [(ALL, expected.REPARTITION_OPTIMIZING_OPTIMIZED, 1), (NONE, expected.REPARTITION_OPTIMIZING_UNOPTIMIZED, 4)],
    ids=["optimized", "not-optimized"],
)
def test_repartition_optimizing(props: dict[str, Any], described: str, topics: int) -> None:
    """RepartitionOptimizingTest.shouldSendCorrectRecords_OPTIMIZED / shouldSendCorrectResults_NO_OPTIMIZATION:
    four repartitions below one `map` become one topic; the results are the same."""
    Collect.seen = []
    topology = repartition_optimizing_topology(props)
    with TopologyTestDriver(topology, DRIVER_CONFIG) as driver:
        inputs = driver.create_input_topic("input", S, S)
        counts = driver.create_output_topic("outputTopic_0", S, L)
        aggregates = driver.create_output_topic("outputTopic_1", S, INT)
        reduced = driver.create_output_topic("outputTopic_2", S, S)
        joined = driver.create_output_topic("joinedOutputTopic", S, S)
        inputs.pipe_key_value_list([(key, value) for key in "abc" for value in ("foo", "bar", "baz")])
        text = str(topology.describe())
        assert text == described
        assert repartition_sinks(text) == topics
        assert Collect.seen == ["FOO", "BAR", "BAZ"]
        assert counts.read_key_values_to_map() == {"A": 3, "B": 3, "C": 3}
        assert aggregates.read_key_values_to_map() == {"A": 9, "B": 9, "C": 9}
        assert reduced.read_key_values_to_map() == {k: "foo:bar:baz" for k in "ABC"}
        assert joined.read_key_values_to_map() == {"A": "baz:3"}  # Java's expected list A:foo:3, bar:3, baz:3 as a map


# -- RepartitionWithMergeOptimizingTest ----------------------------------------------------------


def merge_optimizing_topology(props: dict[str, Any]) -> Topology:
    builder = StreamsBuilder()
    a = builder.stream("inputA", Consumed.with_(S, S).with_name("sourceAStream"))
    b = builder.stream("inputB", Consumed.with_(S, S).with_name("sourceBStream"))
    mapped_a = a.map(lambda k, v: (v.split(":")[0], v), Named.as_("mappedAStream"))
    mapped_b = b.map(lambda k, v: (v.split(":")[0], v), Named.as_("mappedBStream"))
    merged = mapped_a.merge(mapped_b, Named.as_("mergedStream"))
    (merged.group_by_key(Grouped.as_("long-groupByKey"))
        .count(Materialized.as_(Stores.in_memory_key_value_store("long-store")), Named.as_("long-count"))
        .to_stream(named=Named.as_("long-toStream"))
        .to("outputTopic_0", Produced.with_(S, L).with_name("long-to")))  # fmt: skip
    (merged.group_by_key(Grouped.as_("string-groupByKey"))
        .count(Materialized.as_(Stores.in_memory_key_value_store("string-store")), Named.as_("string-count"))
        .to_stream(named=Named.as_("string-toStream"))
        .map_values(str, Named.as_("string-mapValues"))
        .to("outputTopic_1", Produced.with_(S, S).with_name("string-to")))  # fmt: skip
    return builder.build(props)


@pytest.mark.parametrize(
    ("props", "described", "topics"),
    [(ALL, expected.MERGE_OPTIMIZING_OPTIMIZED, 1), (NONE, expected.MERGE_OPTIMIZING_UNOPTIMIZED, 2)],
    ids=["optimized", "not-optimized"],
)
def test_repartition_with_merge_optimizing(props: dict[str, Any], described: str, topics: int) -> None:
    """RepartitionWithMergeOptimizingTest: a merge of two key-changed streams takes the key changers' place."""
    topology = merge_optimizing_topology(props)
    with TopologyTestDriver(topology, DRIVER_CONFIG) as driver:
        pairs = [(key, value) for key in "XYZ" for value in ("A:foo", "B:foo", "C:foo")]
        driver.create_input_topic("inputA", S, S).pipe_key_value_list(pairs)
        driver.create_input_topic("inputB", S, S).pipe_key_value_list(pairs)
        text = str(topology.describe())
        assert text == described
        assert repartition_sinks(text) == topics
        assert driver.create_output_topic("outputTopic_0", S, L).read_key_values_to_map() == {"A": 6, "B": 6, "C": 6}
        assert driver.create_output_topic("outputTopic_1", S, S).read_key_values_to_map() == {k: "6" for k in "ABC"}


# -- RepartitionTopicNamingTest ------------------------------------------------------------------


def test_reuses_the_first_repartition_topic_name_when_optimizing() -> None:
    """RepartitionTopicNamingTest.shouldReuseFirstRepartitionTopicNameWhenOptimizing (EXPECTED_OPTIMIZED_TOPOLOGY;
    the unoptimized text is test_describe_order's)."""
    builder = StreamsBuilder()
    named_repartition_topics(builder)
    assert str(builder.build(ALL).describe()) == expected.NAMED_REPARTITION_TOPICS_OPTIMIZED


def test_same_repartition_topic_name_on_one_grouped_stream_is_allowed_when_optimizing() -> None:
    """RepartitionTopicNamingTest.shouldPassWithSameRepartitionTopicNameUsingSameKGroupedStreamOptimized: two
    aggregations of one grouped stream share its repartition topic."""
    builder = StreamsBuilder()
    grouped = builder.stream("topic").select_key(lambda k, v: k).group_by_key(Grouped.as_("grouping"))
    grouped.count().to_stream().to("output-one")
    grouped.reduce(lambda v1, v2: v1 + v2).to_stream().to("output-two")
    text = str(builder.build(ALL).describe())
    assert repartition_sinks(text) == 1
    assert "Sink: grouping-repartition-sink (topic: grouping-repartition)" in text


# -- StreamsGraphTest ----------------------------------------------------------------------------


def test_several_merge_nodes_with_a_common_key_changing_parent() -> None:
    """StreamsGraphTest.shouldOptimizeSeveralMergeNodesWithCommonKeyChangingParent: nothing to merge, nothing moved."""
    builder = StreamsBuilder()
    parent = builder.stream("input_topic", Consumed.with_(INT, INT)).select_key(lambda k, v: k + v)
    children = [parent.map_values(lambda v, n=n: v + n) for n in (1, 2, 3)]
    children[0].merge(children[1]).merge(children[2]).to("output_topic")
    assert str(builder.build(ALL).describe()) == MERGE_OF_MERGES


def changing_values_after_changing_key(props: dict[str, Any]) -> str:
    builder = StreamsBuilder()
    mapped = builder.stream("input").select_key(lambda k, v: k + v)
    mapped.map_values(str.upper).group_by_key().count().to_stream().to("output")
    (mapped.flat_map_values(str.split).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(5000)).count()
        .to_stream().to("windowed-output"))  # fmt: skip
    return str(builder.build(props).describe())


def test_no_optimization_with_value_changing_operators_after_the_key_change() -> None:
    """StreamsGraphTest.shouldNotOptimizeWithValueOrKeyChangingOperatorsAfterInitialKeyChange."""
    optimized, plain = changing_values_after_changing_key(ALL), changing_values_after_changing_key(NONE)
    assert optimized == plain
    assert repartition_sinks(optimized) == 2


def with_repartition_operation(props: dict[str, Any]) -> str:
    builder = StreamsBuilder()
    stream = builder.stream("input").select_key(lambda k, v: k + v)
    stream.repartition().group_by_key().count().to_stream().to("output")
    (stream.repartition().group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(5000)).count()
        .to_stream().to("windowed-output"))  # fmt: skip
    return str(builder.build(props).describe())


def test_no_optimization_of_repartition_operations() -> None:
    """StreamsGraphTest.shouldNotOptimizeWhenRepartitionOperationIsDone: `repartition()`'s topics stay."""
    optimized, plain = with_repartition_operation(ALL), with_repartition_operation(NONE)
    assert optimized == plain
    assert repartition_sinks(optimized) == 2


def test_nested_multiple_key_changing_nodes() -> None:
    """StreamsGraphTest.shouldBeAbleToProcessNestedMultipleKeyChangingNodes: it builds (Java asserts only that);
    the count and the windowed count then read the first grouping's topic."""
    builder = StreamsBuilder()
    changed = builder.stream("inputTopic").select_key(lambda k, v: v[:5])
    (changed.group_by_key(Grouped.as_("count-repartition")).count(Materialized.as_("count-store"))
        .to_stream().to("count-topic", Produced.with_(S, L)))  # fmt: skip
    (changed.group_by_key(Grouped.as_("windowed-repartition")).windowed_by(TimeWindows.of_size_with_no_grace(5000))
        .count(Materialized.as_("windowed-count-store")).to_stream().map(lambda k, v: (k.key, v))
        .to("windowed-count", Produced.with_(S, L)))  # fmt: skip
    text = str(builder.build(ALL).describe())
    assert repartition_sinks(text) == 1
    assert "Source: count-repartition-source (topics: [count-repartition])" in text


class Forward(Processor[str, str, str, str]):
    """StreamsGraphTest's processor: forwards what it gets."""

    def init(self, context: Any) -> None:
        self._context = context

    def process(self, record: Any) -> None:
        self._context.forward(record)


def test_no_error_with_merge_nodes() -> None:
    """StreamsGraphTest.shouldNotThrowNPEWithMergeNodes (KAFKA-9739): expectedComplexMergeOptimizeTopology."""
    builder = StreamsBuilder()

    def initializer() -> str:
        return ""

    def aggregator(key: str, value: str, aggregate: str) -> str:
        return aggregate + str(len(value))

    retry = (builder.stream("retryTopic", Consumed.with_(S, S)).process(Forward)
             .group_by_key(Grouped.with_(S, S)).aggregate(initializer, aggregator, Materialized.with_(S, S))
             .suppress(Suppressed.until_time_limit(500_000, BufferConfig.max_bytes(64_000_000)))
             .to_stream().flat_map(lambda k, v: []))  # fmt: skip
    ids = (builder.stream("id-table-topic", Consumed.with_(S, S)).flat_map(lambda k, v: []).peek(lambda k, v: None)
           .group_by_key(Grouped.with_(S, S)).aggregate(initializer, aggregator, Materialized.with_(S, S)))  # fmt: skip

    joined = (builder.stream("internal-topic-command", Consumed.with_(S, S)).peek(lambda k, v: None)
              .map_values(lambda k, v: v).merge(retry)
              .left_join(ids, lambda v1, v2: f"{v1}{v2}", Joined.with_(S, S, S)))  # fmt: skip

    def default(stream: KStream[str, str]) -> None:
        (stream.filter(lambda k, v: v is not None).peek(lambda k, v: None).map_values(lambda k, v: v)
            .to("dlq-topic", Produced.with_(S, S)))  # fmt: skip
        stream.map(lambda k, v: (k, v)).to("retryTopic", Produced.with_(S, S))

    (joined.split()
        .branch(lambda k, v: v == "some-value", Branched.with_consumer(
            lambda ks: ks.map(lambda k, v: (k, v)).peek(lambda k, v: None).to("external-command", Produced.with_(S, S))))
        .default_branch(Branched.with_consumer(default)))  # fmt: skip
    assert str(builder.build(ALL).describe()) == expected.COMPLEX_MERGE_OPTIMIZED


# -- StreamsBuilderTest: a table's source topic as its changelog -----------------------------------


def metadata(topology: Topology) -> TopologyMetadata:
    topology.internal_topology_builder.set_application_id("appId")
    return TopologyMetadata(topology.internal_topology_builder, "appId")


def test_reuses_the_source_topic_as_changelog_with_optimization() -> None:
    """StreamsBuilderTest.shouldReuseSourceTopicAsChangelogsWithOptimization20: store -> topic, logging off,
    no changelog topic to create."""
    builder = StreamsBuilder()
    builder.table("topic", Materialized.as_("store"))
    topology = builder.build(ALL)
    itb = topology.internal_topology_builder
    assert itb.source_store_topics == {"store": "topic"}
    assert itb.state_store_names == ("store",)
    assert itb.store_builder("store").logging_enabled is False
    found = metadata(topology)
    assert {s: (c.topic, c.source_topic) for s, c in found.changelogs.items()} == {"store": ("topic", True)}
    assert found.created_changelogs == []


def test_does_not_reuse_the_source_topic_by_default() -> None:
    """StreamsBuilderTest.shouldNotReuseSourceTopicAsChangelogsByDefault."""
    builder = StreamsBuilder()
    builder.table("topic", Materialized.as_("store"))
    topology = builder.build()
    assert topology.internal_topology_builder.source_store_topics == {}
    assert topology.internal_topology_builder.store_builder("store").logging_enabled is True
    found = metadata(topology)
    assert [c.topic for c in found.created_changelogs] == ["appId-store-changelog"]


def test_does_not_reuse_a_repartition_topic_as_changelog() -> None:
    """StreamsBuilderTest.shouldNotReuseRepartitionTopicAsChangelogs."""
    builder = StreamsBuilder()
    builder.stream("topic").repartition().to_table(materialized=Materialized.as_("store"))
    topology = builder.build(ALL)
    assert topology.internal_topology_builder.store_builder("store").logging_enabled is True
    found = metadata(topology)
    assert {s: c.topic for s, c in found.changelogs.items()} == {"store": "appId-store-changelog"}
    assert found.changelogs["store"].subtopology == 1


def test_an_unmaterialized_table_gets_no_store_and_a_later_materialized_one_reuses_its_topic() -> None:
    """StreamsBuilderTest.shouldNotMaterializeStoresIfNotRequired, with the optimization on; a table materialised
    by a join after `build(props)` is still given its topic as changelog (Java decides it when writing the node)."""
    builder = StreamsBuilder()
    table = builder.table("topic", Materialized.with_(L, S))
    topology = builder.build(ALL)
    assert topology.internal_topology_builder.state_store_names == ()
    builder.stream("other", Consumed.with_(L, S)).join(table, lambda v1, v2: v1 + v2).to("out")
    (store,) = topology.internal_topology_builder.state_store_names
    assert topology.internal_topology_builder.source_store_topics == {store: "topic"}


def test_a_versioned_table_keeps_its_changelog() -> None:
    """Our choice (docs/dsl.md): a versioned table's store is not restored from its topic."""
    builder = StreamsBuilder()
    builder.table("topic", Materialized.as_(Stores.persistent_versioned_key_value_store("store", 60_000)))
    topology = builder.build(ALL)
    assert topology.internal_topology_builder.source_store_topics == {}


def test_a_read_only_store_restores_from_its_topic() -> None:
    """TopologyTest/KIP-813: a read-only store's source topic is its changelog (Java always), created by nobody."""
    topology = Topology().add_read_only_state_store(
        Stores.key_value_store_builder(Stores.persistent_key_value_store("store"), S, S),
        "source", "topic", "processor", Forward,
    )  # fmt: skip
    found = metadata(topology)
    assert {s: (c.topic, c.source_topic) for s, c in found.changelogs.items()} == {"store": ("topic", True)}
    assert found.created_changelogs == []
    assert found.changelog_partitions(TaskId(0, 0)) == {"store": ("topic", 0)}


def test_optimization_is_applied_once_and_a_wrong_value_names_the_key() -> None:
    """`build(props)` as Kafka's: a second build changes nothing; an unknown optimization is a ConfigError."""
    builder = StreamsBuilder()
    builder.stream("in").select_key(lambda k, v: v).group_by_key().count().to_stream().to("out")
    first = str(builder.build(ALL).describe())
    assert str(builder.build(ALL).describe()) == first
    with pytest.raises(ConfigError, match=r"topology\.optimization"):
        StreamsBuilder().build({"topology.optimization": "maybe"})


def test_an_application_config_asking_for_optimization_of_an_unoptimized_topology_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kafka optimizes in `build(props)` only; our runtime says so (once) instead of ignoring it silently."""
    builder = StreamsBuilder()
    builder.stream("in").select_key(lambda k, v: v).group_by_key().count().to_stream().to("out")
    topology = builder.build()
    config = {"application.id": "app", **ALL}
    with caplog.at_level("WARNING"), TopologyTestDriver(topology, config):
        pass
    with caplog.at_level("WARNING"), TopologyTestDriver(topology, config):
        pass
    warned = [r for r in caplog.records if "StreamsBuilder.build(props)" in r.getMessage()]
    assert len(warned) == 1
    caplog.clear()
    optimized = StreamsBuilder()
    optimized.stream("in").select_key(lambda k, v: v).group_by_key().count().to_stream().to("out")
    with caplog.at_level("WARNING"), TopologyTestDriver(optimized.build(ALL), config):
        pass
    assert not [r for r in caplog.records if "StreamsBuilder.build(props)" in r.getMessage()]
