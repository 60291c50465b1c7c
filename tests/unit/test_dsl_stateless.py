"""DSL stateless operators through the TopologyTestDriver: exact outputs, names and serdes."""

from __future__ import annotations

import re
from typing import Any

import pytest

from streams_core import (
    Branched,
    Consumed,
    KeyValue,
    Named,
    Processor,
    Produced,
    Record,
    Repartitioned,
    Serdes,
    Stores,
    StreamsBuilder,
    TestRecord,
    TopologyError,
    TopologyTestDriver,
)

S, L = Serdes.String(), Serdes.Long()
CONFIG = {"application.id": "dsl", "statestore.cache.max.bytes": 0}


def run(builder: StreamsBuilder, records: list[tuple[Any, ...]], out: str = "out", topic: str = "in",
        key_serde: Any = S, value_serde: Any = S, out_value_serde: Any = S) -> list[TestRecord[Any, Any]]:  # fmt: skip
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic(topic, key_serde, value_serde)
        source.pipe_record_list(records)
        return driver.create_output_topic(out, S, out_value_serde).read_records_to_list()


def stream(builder: StreamsBuilder, topic: str = "in") -> Any:
    return builder.stream(topic, key_serde=S, value_serde=S)


def test_filter_and_filter_not() -> None:
    builder = StreamsBuilder()
    s = stream(builder)
    s.filter(lambda k, v: v.startswith("a")).to("out")
    s.filter_not(lambda k, v: v.startswith("a")).to("rest")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        source.pipe_record_list([("k1", "apple", 1), ("k2", "berry", 2), ("k3", "avocado", 3)])
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [
            TestRecord("k1", "apple", 1), TestRecord("k3", "avocado", 3)]  # fmt: skip
        assert driver.create_output_topic("rest", S, S).read_key_values_to_list() == [KeyValue("k2", "berry")]


def test_map_map_values_and_select_key() -> None:
    builder = StreamsBuilder()
    s = stream(builder)
    s.map(lambda k, v: (v, k)).to("out")
    s.map_values(str.upper).to("upper")
    s.map_values(lambda k, v: f"{k}:{v}").to("keyed")
    s.select_key(lambda k, v: v[0]).to("selected")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record_list([("a", "x1", 5), ("b", "y2", 6)])
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [
            TestRecord("x1", "a", 5), TestRecord("y2", "b", 6)]  # fmt: skip
        assert driver.create_output_topic("upper", S, S).read_key_values_to_list() == [("a", "X1"), ("b", "Y2")]
        assert driver.create_output_topic("keyed", S, S).read_values_to_list() == ["a:x1", "b:y2"]
        assert driver.create_output_topic("selected", S, S).read_key_values_to_list() == [("x", "x1"), ("y", "y2")]


def test_flat_map_and_flat_map_values_keep_timestamps_and_headers() -> None:
    builder = StreamsBuilder()
    s = stream(builder)
    s.flat_map(lambda k, v: [(w, len(w)) for w in v.split()]).to("out", value_serde=L)
    s.flat_map_values(lambda v: v.split()).to("words")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "to be", 7, headers=[("h", b"1")])
        assert driver.create_output_topic("out", S, L).read_records_to_list() == [
            TestRecord("to", 2, 7, (("h", b"1"),)), TestRecord("be", 2, 7, (("h", b"1"),))]  # fmt: skip
        assert driver.create_output_topic("words", S, S).read_key_values_to_list() == [("k", "to"), ("k", "be")]


def test_peek_and_foreach_see_every_record() -> None:
    seen: list[tuple[str, str]] = []
    done: list[tuple[str, str]] = []
    builder = StreamsBuilder()
    s = stream(builder).peek(lambda k, v: seen.append((k, v)))
    s.to("out")
    s.foreach(lambda k, v: done.append((k, v)))
    assert [r.value for r in run(builder, [("a", "1"), ("b", "2")])] == ["1", "2"]
    assert seen == done == [("a", "1"), ("b", "2")]


def test_split_routes_to_first_matching_named_branch_and_default() -> None:
    builder = StreamsBuilder()
    consumed: list[str] = []
    branches = (
        stream(builder).split(Named.as_("route-"))
        .branch(lambda k, v: v.startswith("a"), Branched.as_("a"))
        .branch(lambda k, v: v.startswith("a") or v.startswith("b"), Branched.as_("b"))
        .branch(lambda k, v: v.startswith("c"), Branched.with_consumer(lambda b: b.to("c-out"), "c"))
        .branch(lambda k, v: v.startswith("d"), Branched.with_function(lambda b: b.map_values(str.upper)))
        .default_branch()
    )  # fmt: skip
    assert sorted(branches) == ["route-0", "route-4", "route-a", "route-b"]
    branches["route-a"].to("a-out")
    branches["route-b"].to("b-out")
    branches["route-4"].to("d-out")
    branches["route-0"].foreach(lambda k, v: consumed.append(v))
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_value_list(["apple", "banana", "cherry", "date", "elder", "avocado"])
        assert driver.create_output_topic("a-out", S, S).read_values_to_list() == ["apple", "avocado"]
        assert driver.create_output_topic("b-out", S, S).read_values_to_list() == ["banana"]
        assert driver.create_output_topic("c-out", S, S).read_values_to_list() == ["cherry"]
        assert driver.create_output_topic("d-out", S, S).read_values_to_list() == ["DATE"]
    assert consumed == ["elder"]
    description = str(builder.build().describe())
    assert "Processor: route- (stores: [])\n      --> route-4, route-0, route-a, route-b, route-c" in description


def test_split_without_default_drops_unmatched_and_generated_names() -> None:
    builder = StreamsBuilder()
    branches = stream(builder).split().branch(lambda k, v: v == "x").branch(lambda k, v: v == "y").no_default_branch()
    assert sorted(branches) == ["KSTREAM-BRANCH-00000000011", "KSTREAM-BRANCH-00000000012"]
    branches["KSTREAM-BRANCH-00000000012"].to("out")
    assert [r.value for r in run(builder, [("k", "x"), ("k", "y"), ("k", "z")])] == ["y"]


def test_split_is_closed_after_default_branch() -> None:
    split = stream(StreamsBuilder()).split()
    split.default_branch()
    with pytest.raises(TopologyError, match="complete"):
        split.branch(lambda k, v: True)


def test_old_branch_returns_one_stream_per_predicate() -> None:
    builder = StreamsBuilder()
    small, large = stream(builder).branch(lambda k, v: len(v) < 3, lambda k, v: True)
    small.to("small")
    large.to("out")
    assert [r.value for r in run(builder, [("k", "ab"), ("k", "abcd")])] == ["abcd"]
    assert "KSTREAM-BRANCHCHILD-0000000002" in str(builder.build().describe())


def test_merge_interleaves_in_processing_order() -> None:
    builder = StreamsBuilder()
    stream(builder, "a").merge(stream(builder, "b")).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        a, b = driver.create_input_topic("a", S, S), driver.create_input_topic("b", S, S)
        a.pipe_input("k", "a1", 1)
        b.pipe_input("k", "b1", 2)
        a.pipe_input("k", "a2", 3)
        assert driver.create_output_topic("out", S, S).read_values_to_list() == ["a1", "b1", "a2"]


def test_to_with_topic_extractor_serdes_and_partitioner() -> None:
    partitions: list[tuple[str, int]] = []

    def partitioner(topic: str, key: Any, value: Any, count: int) -> int:
        partitions.append((topic, count))
        return 0

    builder = StreamsBuilder()
    stream(builder).map_values(len).to(lambda k, v, ctx: f"len-{v}", Produced.with_(S, L, partitioner))
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record_list([("a", "xx"), ("b", "yyy"), ("c", "zz")])
        assert driver.create_output_topic("len-2", S, L).read_key_values_to_list() == [("a", 2), ("c", 2)]
        assert driver.create_output_topic("len-3", S, L).read_key_values_to_list() == [("b", 3)]
    assert partitions == [("len-2", 1), ("len-3", 1), ("len-2", 1)]


def test_through_a_user_topic() -> None:
    builder = StreamsBuilder()
    stream(builder).through("middle").map_values(str.upper).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 3)
        assert driver.create_output_topic("middle", S, S).read_records_to_list() == [TestRecord("k", "v", 3)]
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [TestRecord("k", "V", 3)]
    assert builder.build().internal_topology_builder.internal_topics == frozenset()


def test_repartition_names_internal_topics_after_the_application() -> None:
    builder = StreamsBuilder()
    s = stream(builder)
    s.repartition(Repartitioned.as_("by-key").with_number_of_partitions(4)).to("out")
    s.repartition(key_serde=S, value_serde=S).to("out2")
    topology = builder.build()
    description = str(topology.describe())
    assert "Sink: by-key-repartition-sink (topic: by-key-repartition)" in description
    assert "Source: KSTREAM-SOURCE-0000000008 (topics: [KSTREAM-REPARTITION-0000000005-repartition])" in description
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 3)
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [TestRecord("k", "v", 3)]
        assert driver.create_output_topic("dsl-by-key-repartition", S, S).read_records_to_list() == [
            TestRecord("k", "v", 3)]  # fmt: skip
        assert driver.create_output_topic("out2", S, S).read_values_to_list() == ["v"]
    itb = topology.internal_topology_builder
    assert itb.internal_topics == {"dsl-by-key-repartition", "dsl-KSTREAM-REPARTITION-0000000005-repartition"}
    assert itb.internal_topic_partition_counts({"in": 2}) == {
        "dsl-by-key-repartition": 4, "dsl-KSTREAM-REPARTITION-0000000005-repartition": 2}  # fmt: skip


class Doubler(Processor[str, str, str, str]):
    def init(self, context: Any) -> None:
        self.context = context
        self.seen = context.get_state_store("seen")

    def process(self, record: Record[str, str]) -> None:
        count = (self.seen.get(record.key) or 0) + 1
        self.seen.put(record.key, count)
        self.context.forward(record.with_key(f"{record.key}#{count}"))


def test_process_with_a_store_added_to_the_builder() -> None:
    builder = StreamsBuilder()
    builder.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("seen"), S, L))
    stream(builder).process(Doubler, "seen", named="doubler").to("out")
    assert [(r.key, r.value) for r in run(builder, [("a", "1"), ("a", "2"), ("b", "3")])] == [
        ("a#1", "1"), ("a#2", "2"), ("b#1", "3")]  # fmt: skip
    assert "Processor: doubler (stores: [seen])" in str(builder.build().describe())


def test_stream_from_several_topics_and_a_pattern() -> None:
    builder = StreamsBuilder()
    builder.stream(["t1", "t2"], Consumed.with_(S, S)).to("out")
    builder.stream(re.compile("p-.*"), key_serde=S, value_serde=S).map_values(str.upper).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("t2", S, S).pipe_input("k", "two")
        driver.create_input_topic("p-x", S, S).pipe_input("k", "pattern")
        driver.create_input_topic("t1", S, S).pipe_input("k", "one")
        assert driver.create_output_topic("out", S, S).read_values_to_list() == ["two", "PATTERN", "one"]


def test_consumed_timestamp_extractor_and_source_name() -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(S, L).with_timestamp_extractor(lambda record, partition_time: record.value)
                   .with_name("events")).to("out", value_serde=L)  # fmt: skip
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, L).pipe_input("k", 42, 1)
        assert driver.create_output_topic("out", S, L).read_records_to_list() == [TestRecord("k", 42, 42)]
    assert "Source: events (topics: [in])" in str(builder.build().describe())


def test_stream_serdes_are_inherited_by_to() -> None:
    builder = StreamsBuilder()
    builder.stream("in", key_serde=L, value_serde=L).filter(lambda k, v: v > 1).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", L, L).pipe_key_value_list([(1, 1), (2, 2)])
        assert driver.create_output_topic("out", L, L).read_key_values_to_list() == [(2, 2)]


def test_user_names_for_processors() -> None:
    builder = StreamsBuilder()
    stream(builder).filter(lambda k, v: True, named="keep-all").map_values(str.upper, Named.as_("shout")).to(
        "out", Produced.as_("to-out"))  # fmt: skip
    text = str(builder.build().describe())
    for line in ("Processor: keep-all (stores: [])", "Processor: shout (stores: [])", "Sink: to-out (topic: out)"):
        assert line in text


def test_mixing_streams_of_two_builders_is_an_error() -> None:
    with pytest.raises(TopologyError, match="another StreamsBuilder"):
        stream(StreamsBuilder(), "a").merge(stream(StreamsBuilder(), "b"))


def test_a_topic_read_twice_by_a_stream_and_a_table_is_an_error() -> None:
    """Two `stream()`s of a topic share a source (test_dsl_shared_sources.py); a table and a stream do not."""
    builder = StreamsBuilder()
    stream(builder)
    with pytest.raises(TopologyError, match="already consumed"):
        builder.table("in")
