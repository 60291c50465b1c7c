"""`single.store.self.join` (KIP-862): an inner join of a stream with itself over one window store.

Translated from apache/kafka's streams tests (streams/src/test/java/org/apache/kafka/streams/...):
KStreamKStreamSelfJoinTest (the optimized join emits what the two-store inner join emits),
InternalStreamsBuilderTest's `shouldMark...SelfJoin...` cases (which joins are rewritten, counted by
their windowed nodes), StreamsConfigTest's self-join cases (in test_config.py) and
SelfJoinUpgradeIntegrationTest (the rewritten join keeps the unoptimized this-side store and its
changelog, so an application turning the optimization on keeps its join state).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from streams_core import (
    Consumed,
    JoinWindows,
    Processor,
    Serdes,
    StreamJoined,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
)
from streams_core.kstream.kstream import KStream
from streams_core.processor.topology_description import NodeDescription, ProcessorDescription
from streams_core.runtime.topology_metadata import TopologyMetadata

S = Serdes.String()
ALL = {"topology.optimization": "all"}
DRIVER_CONFIG = {"application.id": "self-join-test", "default.key.serde": S, "default.value.serde": S}
Input = list[tuple[str, str | None, int]]


def concat(left: str | None, right: str | None) -> str:
    """The tests' `valueJoiner`: `(v, v2) -> v + v2`."""
    return f"{left}{right}" if left is None or right is None else left + right


def nodes(topology: Topology) -> dict[str, NodeDescription]:
    return {node.name: node for sub in topology.describe().subtopologies for node in sub.nodes}


def windowed_nodes(topology: Topology) -> int:
    """InternalStreamsBuilderTest.countJoinWindowNodes: the join-window nodes left in the topology."""
    return sum(name.startswith("KSTREAM-WINDOWED-") for name in nodes(topology))


def self_joins(topology: Topology) -> list[bool]:
    """For each stream-stream join in order of its merge node, whether it was rewritten (Java's
    `getSelfJoin()`): a rewritten join is one processor below one windowed node."""
    found = nodes(topology)
    return [
        [p.name for p in node.predecessors] == [p.name for p in node.predecessors if p.name.startswith("KSTREAM-WINDOWED-")]
        for name, node in sorted(found.items())
        if name.startswith("KSTREAM-MERGE-") and any(p.name.startswith(("KSTREAM-WINDOWED-", "KSTREAM-JOIN", "KSTREAM-OUTER"))
                                                     for p in node.predecessors)
    ]  # fmt: skip


def run(topology: Topology, topic: str, records: Input) -> list[tuple[str, str, int]]:
    """Pipe `records` into `topic` and return what reached the `out` topic, as (key, value, timestamp)."""
    with TopologyTestDriver(topology, DRIVER_CONFIG) as driver:
        inputs = driver.create_input_topic(topic, S, S)
        for key, value, timestamp in records:
            inputs.pipe_input(key, value, timestamp)
        return [(r.key, r.value, r.timestamp) for r in driver.create_output_topic("out", S, S).read_records_to_list()]


def same_topic_join(windows: JoinWindows, one_stream: bool) -> Callable[[dict[str, Any] | None], Topology]:
    """KStreamKStreamSelfJoinTest's topologies: `stream.join(stream, ...)` (one stream) or two
    `stream()`s of one topic joined, with StreamJoined.with(String, String, String)."""

    def build(props: dict[str, Any] | None) -> Topology:
        builder = StreamsBuilder()
        left = builder.stream("topic1", Consumed.with_(S, S))
        right = left if one_stream else builder.stream("topic1", Consumed.with_(S, S))
        left.join(right, concat, windows, StreamJoined.with_(S, S, S)).to("out")
        return builder.build(props)

    return build


SHORT_INPUT: Input = [("A", "1", 1), ("B", "1", 2), ("A", "2", 3), ("B", "2", 4), ("B", "3", 5)]
LONG_INPUT: Input = [("A", "1", 0), ("A", "2", 11000), ("B", "1", 12000), ("A", "3", 13000), ("A", "4", 15000),
                     ("C", "1", 16000), ("D", "1", 17000), ("A", "5", 30000)]  # fmt: skip
OUT_OF_ORDER_INPUT: Input = [("A", "1", 0), ("A", "2", 9999), ("B", "1", 11000), ("A", "3", 13000),
                             ("A", "4", 15000), ("C", "1", 16000), ("D", "1", 17000), ("A", "5", 30000),
                             ("A", "5", 6000)]  # fmt: skip


@pytest.mark.parametrize(
    ("windows", "one_stream", "records"),
    [
        (JoinWindows.of_time_difference_without_grace(100), True, SHORT_INPUT),
        (JoinWindows.of_time_difference_without_grace(100), False, SHORT_INPUT),
        (JoinWindows.of_time_difference_and_grace(11_000, 10_000), False, LONG_INPUT),
        (JoinWindows.of_time_difference_without_grace(10_000), False, OUT_OF_ORDER_INPUT),
        (JoinWindows.of_time_difference_without_grace(1000).before(0).after(3000), True, LONG_INPUT),
        (JoinWindows.of_time_difference_without_grace(1000).before(2500).after(0), True, OUT_OF_ORDER_INPUT),
    ],
    ids=["one-stream", "two-streams", "before-after-windows", "out-of-order", "after-only", "before-only"],
)
def test_the_self_join_emits_what_the_inner_join_emits(windows: JoinWindows, one_stream: bool, records: Input) -> None:
    """KStreamKStreamSelfJoinTest.shouldMatchInnerJoinWithSelfJoinWithSingleStream, ...WithTwoStreams,
    ...DifferentBeforeAfterWindows, ...OutOfOrderMessages: the same records, in the same order, with the
    same timestamps (the last two add windows that are not symmetric)."""
    build = same_topic_join(windows, one_stream)
    optimized = build(ALL)
    assert self_joins(optimized) == [True]
    expected = run(build(None), "topic1", records)
    assert expected  # the inputs do join
    assert run(optimized, "topic1", records) == expected


def test_the_self_join_results_of_the_short_input() -> None:
    """KStreamKStreamSelfJoinTest's first input, spelled out: each record joins itself and the earlier
    records of its key, the self-match placed as the inner join places it."""
    build = same_topic_join(JoinWindows.of_time_difference_without_grace(100), one_stream=True)
    assert run(build(ALL), "topic1", SHORT_INPUT) == [
        ("A", "11", 1), ("B", "11", 2), ("A", "21", 3), ("A", "12", 3), ("A", "22", 3), ("B", "21", 4),
        ("B", "12", 4), ("B", "22", 4), ("B", "31", 5), ("B", "32", 5), ("B", "13", 5), ("B", "23", 5),
        ("B", "33", 5),
    ]  # fmt: skip


def test_an_expired_record_does_not_join_itself() -> None:
    """KStreamKStreamSelfJoin's `emitSelfRecord`: a record older than stream time minus the store's
    retention (its copy would be gone from the store) gets no self-match, as the inner join's other
    side would no longer hold it; None keys and values are dropped, as the inner join drops them."""
    build = same_topic_join(JoinWindows.of_time_difference_without_grace(100), one_stream=True)
    records: Input = [("A", "1", 1000), ("A", "2", 500), ("A", None, 1000), ("B", "x", 1001)]
    optimized = run(build(ALL), "topic1", records)
    assert optimized == run(build(None), "topic1", records) == [("A", "11", 1000), ("B", "xx", 1001)]


DESCRIBED = """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [topic1])
      --> KSTREAM-WINDOWED-0000000001
    Processor: KSTREAM-WINDOWED-0000000001 (stores: [KSTREAM-JOINTHIS-0000000003-store])
      --> KSTREAM-MERGE-0000000005
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-MERGE-0000000005 (stores: [KSTREAM-JOINTHIS-0000000003-store])
      --> KSTREAM-SINK-0000000006
      <-- KSTREAM-WINDOWED-0000000001
    Sink: KSTREAM-SINK-0000000006 (topic: out)
      <-- KSTREAM-MERGE-0000000005

"""


def test_describe_prints_one_processor_over_one_store() -> None:
    """Java's StreamStreamJoinNode.writeToTopology with `isSelfJoin`: the self-join processor takes the
    merge node's name, below the this-side windowed node, and both share the this-side store."""
    topology = same_topic_join(JoinWindows.of_time_difference_without_grace(100), one_stream=True)(ALL)
    assert str(topology.describe()) == DESCRIBED
    merge = nodes(topology)["KSTREAM-MERGE-0000000005"]
    assert isinstance(merge, ProcessorDescription)
    assert topology.internal_topology_builder.state_store_names == ("KSTREAM-JOINTHIS-0000000003-store",)


def test_the_kept_store_and_changelog_are_the_unoptimized_this_side_ones() -> None:
    """SelfJoinUpgradeIntegrationTest: turning the optimization on keeps the join's state, because the
    one store is the unoptimized join's this-side store, under the same name and changelog topic
    (the other side's store and changelog are dropped)."""
    build = same_topic_join(JoinWindows.of_time_difference_without_grace(6_000_000), one_stream=True)

    def changelogs(topology: Topology) -> list[str]:
        topology.internal_topology_builder.set_application_id("appId")
        return [c.topic for c in TopologyMetadata(topology.internal_topology_builder, "appId").created_changelogs]

    assert changelogs(build(None)) == ["appId-KSTREAM-JOINTHIS-0000000003-store-changelog",
                                       "appId-KSTREAM-JOINOTHER-0000000004-store-changelog"]  # fmt: skip
    assert changelogs(build(ALL)) == ["appId-KSTREAM-JOINTHIS-0000000003-store-changelog"]
    # the upgrade test's records: "A" then "B" then "C" of key "1", each joining all before it
    records: Input = [("1", "A", 42), ("1", "B", 43), ("1", "C", 44)]
    assert run(build(ALL), "topic1", records) == [
        ("1", "AA", 42), ("1", "BA", 43), ("1", "AB", 43), ("1", "BB", 43),
        ("1", "CA", 44), ("1", "CB", 44), ("1", "AC", 44), ("1", "BC", 44), ("1", "CC", 44),
    ]  # fmt: skip


# -- InternalStreamsBuilderTest: which joins are rewritten ---------------------------------------

W = JoinWindows.of_time_difference_without_grace(100)


def stream(builder: StreamsBuilder, topic: str) -> KStream[str, str]:
    return builder.stream(topic, Consumed.with_(S, S))


def single_stream(b: StreamsBuilder) -> None:
    s = stream(b, "t1")
    s.join(s, concat, W)


def two_streams(b: StreamsBuilder) -> None:
    stream(b, "t1").join(stream(b, "t1"), concat, W)


def merge_two_streams(b: StreamsBuilder) -> None:
    merged = stream(b, "t1").merge(stream(b, "t2"))
    merged.join(merged, concat, W)


def three_way_join(b: StreamsBuilder) -> None:
    stream(b, "t1").join(stream(b, "t1"), concat, W).join(stream(b, "t3"), concat, W)


def all_self_joins(b: StreamsBuilder) -> None:
    first = stream(b, "t1").join(stream(b, "t1"), concat, W)
    first.merge(stream(b, "t2").join(stream(b, "t2"), concat, W))


def n_way_same_source(b: StreamsBuilder) -> None:
    stream(b, "t1").join(stream(b, "t1"), concat, W).join(stream(b, "t1"), concat, W)


def no_op_filter(b: StreamsBuilder) -> None:
    s = stream(b, "t1")
    s.filter(lambda k, v: v is not None)
    s.join(stream(b, "t1"), concat, W)


def two_joins_same_source(b: StreamsBuilder) -> None:
    stream(b, "t1").join(stream(b, "t1"), concat, W)
    stream(b, "t1").join(stream(b, "t1"), concat, W)


def with_filter(b: StreamsBuilder) -> None:
    stream(b, "t1").filter(lambda k, v: v is not None).join(stream(b, "t1"), concat, W)


def with_map_values(b: StreamsBuilder) -> None:
    mapped = stream(b, "t1").map_values(lambda v: v)
    mapped.join(stream(b, "t1"), concat, W)


def multiple_sources(b: StreamsBuilder) -> None:
    stream(b, "t1").join(stream(b, "t2"), concat, W)


@pytest.mark.parametrize(
    ("topology", "marked", "windowed"),
    [
        (single_stream, [True], 1),
        (two_streams, [True], 1),
        (merge_two_streams, [True], 1),
        (three_way_join, [True, False], 3),
        (all_self_joins, [True, True], 2),
        (n_way_same_source, [True, False], 3),
        (no_op_filter, [True], 1),
        (two_joins_same_source, [True, True], 2),
        (with_filter, [False], 2),
        (with_map_values, [False], 2),
        (multiple_sources, [False], 2),
    ],
    ids=lambda p: getattr(p, "__name__", None),
)
def test_which_joins_are_rewritten(topology: Callable[[StreamsBuilder], None], marked: list[bool], windowed: int) -> None:
    """InternalStreamsBuilderTest.shouldMarkStreamStreamJoinAsSelfJoinSingleStream, ...TwoStreams,
    ...MergeTwoStreams, shouldMarkFirstStreamStreamJoinAsSelfJoin3WayJoin, shouldMarkAllStreamStreamJoinsAsSelfJoin,
    shouldMarkFirstStreamStreamJoinAsSelfJoinNwaySameSource, shouldMarkStreamStreamJoinAsSelfJoinTwoStreamsWithNoOpFilter,
    ...TwoJoinsSameSource, shouldNotMarkStreamStreamJoinAsSelfJoinTwoStreamsWithFilter, ...OneStreamWithMap,
    ...MultipleSources: a join whose two sides are one node is rewritten, one side through a filter or a
    map_values is not."""
    builder = StreamsBuilder()
    topology(builder)
    optimized = builder.build(ALL)
    assert self_joins(optimized) == marked
    assert windowed_nodes(optimized) == windowed


@pytest.mark.parametrize(
    ("props", "rewritten"),
    [
        ({"topology.optimization": "single.store.self.join"}, True),
        ({"topology.optimization": "reuse.ktable.source.topics,merge.repartition.topics"}, False),
        ({"topology.optimization": "none"}, False),
        (None, False),
    ],
    ids=["named-alone", "the-other-two", "none", "no-props"],
)
def test_the_rewrite_follows_the_config(props: dict[str, Any] | None, rewritten: bool) -> None:
    """InternalStreamsBuilderTest.shouldOptimizeJoinWhenInConfig and shouldNotOptimizeJoinWhenNotInConfig."""
    builder = StreamsBuilder()
    single_stream(builder)
    topology = builder.build(props)
    assert self_joins(topology) == [rewritten]
    assert windowed_nodes(topology) == (1 if rewritten else 2)


@pytest.mark.parametrize("kind", ["left_join", "outer_join"])
def test_left_and_outer_self_joins_keep_their_two_stores(kind: str) -> None:
    """Only inner joins are rewritten (docs/dsl.md): Kafka's single-store processor drops a None-key
    record that a left or outer join emits unjoined (KIP-962), so rewriting those would change results."""
    builder = StreamsBuilder()
    s = stream(builder, "t1")
    getattr(s, kind)(s, concat, W).to("out")
    topology = builder.build(ALL)
    assert self_joins(topology) == [False]
    assert windowed_nodes(topology) == 2
    with TopologyTestDriver(topology, DRIVER_CONFIG) as driver:
        driver.create_input_topic("t1", S, S).pipe_input(None, "v", 5)
        unjoined = [(None, "vNone")] + ([(None, "Nonev")] if kind == "outer_join" else [])
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == unjoined


class Collect(Processor[str, str, None, None]):
    """A processor below the self-join (KStreamKStreamSelfJoinTest's MockApiProcessor)."""

    seen: ClassVar[list[tuple[str, str]]] = []

    def process(self, record: Any) -> None:
        Collect.seen.append((record.key, record.value))


def test_operators_below_the_self_join_read_its_results() -> None:
    """KStreamKStreamSelfJoinTest's `selfJoin.process(supplier)`: what hangs below the join's merge
    node hangs below the self-join processor, which keeps the merge node's name."""
    Collect.seen = []
    builder = StreamsBuilder()
    s = stream(builder, "topic1")
    s.join(s, concat, W).process(Collect)
    topology = builder.build(ALL)
    run(topology, "topic1", SHORT_INPUT[:2])
    assert Collect.seen == [("A", "11"), ("B", "11")]


def test_a_key_changed_stream_joined_with_itself_shares_one_repartition_and_is_rewritten() -> None:
    """Java's `repartitionForJoin` reuses the stream's repartition node for the second side (same
    name), so the join node has one parent and `rewriteSingleStoreSelfJoin` takes it; the results are
    the unoptimized join's."""

    def build(props: dict[str, Any] | None) -> Topology:
        builder = StreamsBuilder()
        rekeyed = stream(builder, "topic1").select_key(lambda k, v: v[0])
        rekeyed.join(rekeyed, concat, W).to("out")
        return builder.build(props)

    optimized = build(ALL)
    assert self_joins(optimized) == [True]
    assert windowed_nodes(optimized) == 1
    records: Input = [("k1", "a1", 1), ("k2", "b1", 2), ("k3", "a2", 3), ("k4", "b2", 150), ("k5", "a3", 60)]
    expected = run(build(None), "topic1", records)
    assert ("a", "a2a1", 3) in expected
    assert run(optimized, "topic1", records) == expected
