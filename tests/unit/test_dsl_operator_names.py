"""Node and store names of table sources, global stores, `to_stream(mapper)` and anonymous Materialized.

Translated from Kafka Streams' StreamsBuilderTest (apache/kafka
streams/src/test/java/org/apache/kafka/streams/StreamsBuilderTest.java):
shouldUseSpecifiedNameForTableSourceProcessor, shouldUseSpecifiedNameForGlobalTableSourceProcessor,
shouldUseSpecifiedNameForGlobalStoreProcessor, shouldUseDefaultNameForGlobalStoreProcessor,
shouldUseSpecifiedNameForToStream, shouldUseSpecifiedNameForToStreamWithMapper,
shouldAllowJoin{Unmaterialized,Materialized}{Filtered,MapValued}KTable, with their expected names.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import (
    Consumed,
    Materialized,
    Named,
    Processor,
    Record,
    Serdes,
    Stores,
    StreamsBuilder,
    Topology,
)

STREAM_TOPIC, STREAM_TOPIC_TWO, TABLE_TOPIC = "stream-topic", "stream-topic-two", "table-topic"
S = Serdes.String()


def node_names(builder: StreamsBuilder) -> list[str]:
    return [n.name for sub in builder.build().describe().subtopologies for n in sub.nodes]


def stores_of(builder: StreamsBuilder) -> dict[str, set[str]]:
    """Processor name -> its stores, from describe()."""
    return {n.name: set(getattr(n, "stores", ())) for sub in builder.build().describe().subtopologies for n in sub.nodes}


def test_specified_name_for_table_source() -> None:
    """shouldUseSpecifiedNameForTableSourceProcessor: `<name>-source` and `<name>`, two indexes used."""
    builder = StreamsBuilder()
    builder.table(STREAM_TOPIC, Consumed.as_("source-node"))
    builder.table(STREAM_TOPIC_TWO)
    assert node_names(builder) == ["source-node-source", "source-node", "KSTREAM-SOURCE-0000000004",
                                   "KTABLE-SOURCE-0000000005"]  # fmt: skip


def test_specified_name_for_global_table_source() -> None:
    """shouldUseSpecifiedNameForGlobalTableSourceProcessor: the store names number as Java's."""
    builder = StreamsBuilder()
    builder.global_table(STREAM_TOPIC, Consumed.as_("source-processor"))
    builder.global_table(STREAM_TOPIC_TWO)
    itb = builder.build().internal_topology_builder
    assert itb.global_state_store_names == ("stream-topic-STATE-STORE-0000000000",
                                            "stream-topic-two-STATE-STORE-0000000003")  # fmt: skip
    assert itb.node_names[:2] == ("source-processor-source", "source-processor")


class _Noop(Processor[str, str, None, None]):
    def process(self, record: Record[str, str]) -> None:
        pass


def _global_store(consumed: Consumed[Any, Any]) -> Topology:
    builder = StreamsBuilder()
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("store"), S, S)
    builder.add_global_store(store, "topic", _Noop, consumed)
    return builder.build()


@pytest.mark.parametrize(("consumed", "expected"), [
    (Consumed.with_(S, S).with_name("test"), ("test-source", "test")),
    (Consumed.with_(S, S), ("KSTREAM-SOURCE-0000000000", "KTABLE-SOURCE-0000000001")),
], ids=["specified", "default"])  # fmt: skip
def test_global_store_processor_names(consumed: Consumed[Any, Any], expected: tuple[str, str]) -> None:
    """shouldUseSpecifiedNameForGlobalStoreProcessor / shouldUseDefaultNameForGlobalStoreProcessor."""
    assert _global_store(consumed).internal_topology_builder.node_names == expected


def test_specified_name_for_to_stream() -> None:
    """shouldUseSpecifiedNameForToStream."""
    builder = StreamsBuilder()
    builder.table(STREAM_TOPIC).to_stream(named=Named.as_("to-stream"))
    assert node_names(builder) == ["KSTREAM-SOURCE-0000000001", "KTABLE-SOURCE-0000000002", "to-stream"]


def test_specified_name_for_to_stream_with_mapper() -> None:
    """shouldUseSpecifiedNameForToStreamWithMapper: Java's `toStream(named).selectKey(mapper)`."""
    builder = StreamsBuilder()
    builder.table(STREAM_TOPIC).to_stream(lambda k, v: (k, v), Named.as_("to-stream"))
    assert node_names(builder) == ["KSTREAM-SOURCE-0000000001", "KTABLE-SOURCE-0000000002", "to-stream",
                                   "KSTREAM-KEY-SELECT-0000000004"]  # fmt: skip


@pytest.mark.parametrize("operator", ["filter", "map_values"])
def test_join_unmaterialized_table_operator(operator: str) -> None:
    """shouldAllowJoinUnmaterialized{Filtered,MapValued}KTable: the join reads the source's store; the
    operator has none. An anonymous Materialized (no store name) materialises nothing either, as
    Java's (only a queryable name does), but uses an index first: the join is then `-0000000006`."""
    for materialized, join in ((None, "KSTREAM-JOIN-0000000005"), (Materialized.with_(S, S), "KSTREAM-JOIN-0000000006")):
        builder = StreamsBuilder()
        table = builder.table(TABLE_TOPIC)
        function = (lambda k, v: True) if operator == "filter" else (lambda v: v)
        derived = getattr(table, operator)(function, materialized=materialized)
        builder.stream(STREAM_TOPIC).join(derived, lambda a, b: f"{a}+{b}")
        stores = stores_of(builder)
        prefix = "KTABLE-FILTER-" if operator == "filter" else "KTABLE-MAPVALUES-"
        node = prefix + ("0000000003" if materialized is None else "0000000004")
        assert stores[node] == set()
        assert stores[join] == {"table-topic-STATE-STORE-0000000000"}


@pytest.mark.parametrize("operator", ["filter", "map_values"])
def test_join_materialized_table_operator(operator: str) -> None:
    """shouldAllowJoinMaterialized{Filtered,MapValued}KTable: the named store serves the join."""
    builder = StreamsBuilder()
    function = (lambda k, v: True) if operator == "filter" else (lambda v: v)
    derived = getattr(builder.table(TABLE_TOPIC), operator)(function, materialized=Materialized.as_("store"))
    builder.stream(STREAM_TOPIC).join(derived, lambda a, b: f"{a}+{b}")
    stores = stores_of(builder)
    prefix = "KTABLE-FILTER-" if operator == "filter" else "KTABLE-MAPVALUES-"
    assert stores[prefix + "0000000003"] == {"store"}
    assert stores["KSTREAM-JOIN-0000000005"] == {"store"}
    assert builder.build().internal_topology_builder.state_store_names == ("store",)


class Router:
    """A TopicNameExtractor with its own `__str__`: describe() prints it, as Java prints `toString()`."""

    def __call__(self, key: Any, value: Any, record_context: Any) -> str:
        return f"topic-{key}"

    def __str__(self) -> str:
        return "Router(topic-<key>)"


def test_topic_name_extractor_prints_as_its_str() -> None:
    builder = StreamsBuilder()
    builder.stream("in").to(Router())
    builder.stream("in2").to(lambda k, v, c: "t")
    text = str(builder.build().describe())
    assert "Sink: KSTREAM-SINK-0000000001 (extractor class: Router(topic-<key>))" in text
    assert "(extractor class: test_topic_name_extractor_prints_as_its_str.<locals>.<lambda>)" in text


def test_specified_names_for_process_and_print() -> None:
    """shouldUseSpecifiedNameForProcessOperation, shouldUseSpecifiedNameForPrintOperation."""
    from streams_core import Printed

    class Noop(Processor[Any, Any, Any, Any]):
        def process(self, record: Record[Any, Any]) -> None:
            pass

    builder = StreamsBuilder()
    builder.stream(STREAM_TOPIC).process(Noop, named=Named.as_("test-processor"))
    assert node_names(builder) == ["KSTREAM-SOURCE-0000000000", "test-processor"]
    builder = StreamsBuilder()
    builder.stream(STREAM_TOPIC).print(Printed.to_sys_out().with_name("print-processor"))
    assert node_names(builder) == ["KSTREAM-SOURCE-0000000000", "print-processor"]
