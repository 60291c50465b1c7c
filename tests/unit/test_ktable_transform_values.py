"""KTable.transform_values with a ValueTransformerWithKey, materialised or not.

Translated from Kafka Streams' KTableTransformValuesTest (apache/kafka
streams/src/test/java/org/apache/kafka/streams/kstream/internals/KTableTransformValuesTest.java),
with its inputs and expected outputs; its mock-based unit tests become driver tests of the same
behaviour (old values sent only when asked for, forwarding disabled, transform on get, close).
"""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import (
    Grouped,
    Materialized,
    Serdes,
    Stores,
    StreamsBuilder,
    StreamsError,
    TopologyError,
    TopologyTestDriver,
    UnknownStateStoreError,
    ValueTransformerWithKey,
)

S, INT = Serdes.String(), Serdes.Integer()
QUERYABLE_NAME, INPUT_TOPIC = "queryable-store", "inputTopic"
STORE_NAME, OTHER_STORE_NAME = "someStore", "otherStore"
# KTableTransformValuesTest.props(): Integer default serdes
CONFIG = {"application.id": "transform-values", "default.key.serde": INT, "default.value.serde": INT}


class Exclamation(ValueTransformerWithKey[str, str, str]):
    """ExclamationValueTransformer: checks its stores are reachable, returns `key->value!`."""

    def __init__(self, *expected_stores: str) -> None:
        self.expected_stores = expected_stores

    def init(self, context: Any) -> None:
        missing = [name for name in self.expected_stores if context.get_state_store(name) is None]
        assert not missing, f"State stores are not accessible: {missing}"

    def transform(self, read_only_key: str, value: str | None) -> str:
        return f"{read_only_key}->{'null' if value is None else value}!"


class Stateful(ValueTransformerWithKey[str, str, int]):
    """StatefulTransformer: a counter of its calls."""

    def __init__(self) -> None:
        self.counter = 0

    def transform(self, read_only_key: str, value: str | None) -> int:
        self.counter += 1
        return self.counter


class Stateless(ValueTransformerWithKey[str, str, int]):
    """StatelessTransformer: the value's length (None stays None)."""

    def transform(self, read_only_key: str, value: str | None) -> int | None:
        return None if value is None else len(value)


def store_builder(name: str) -> Any:
    return Stores.key_value_store_builder(Stores.persistent_key_value_store(name), Serdes.Long(), Serdes.Long())


def captured(builder: StreamsBuilder, table: Any, records: list[tuple[str, str | None, int]],
             value_serde: Any = S) -> tuple[list[tuple[str, Any, int]], TopologyTestDriver]:  # fmt: skip
    """The records `table.to_stream()` gives for `records` (the test's MockProcessorSupplier capture)."""
    out: list[tuple[str, Any, int]] = []
    table.to_stream().to("out", key_serde=S, value_serde=value_serde)
    driver = TopologyTestDriver(builder.build(), CONFIG)
    source = driver.create_input_topic(INPUT_TOPIC, S, S)
    for key, value, ts in records:
        source.pipe_input(key, value, ts)
    out = [(r.key, r.value, r.timestamp) for r in driver.create_output_topic("out", S, value_serde).read_records_to_list()]
    return out, driver


def test_transform_values_with_key() -> None:
    """shouldTransformValuesWithKey: stores added to the builder and named; not materialised."""
    builder = StreamsBuilder().add_state_store(store_builder(STORE_NAME)).add_state_store(store_builder(OTHER_STORE_NAME))
    table = builder.table(INPUT_TOPIC, key_serde=S, value_serde=S).transform_values(
        lambda: Exclamation(STORE_NAME, OTHER_STORE_NAME), STORE_NAME, OTHER_STORE_NAME)
    out, driver = captured(builder, table, [("A", "a", 5), ("B", "b", 10), ("D", None, 15)])
    with driver:
        assert out == [("A", "A->a!", 5), ("B", "B->b!", 10), ("D", "D->null!", 15)]
        with pytest.raises(UnknownStateStoreError):  # Java: null, "Store should not be materialized"
            driver.get_key_value_store(QUERYABLE_NAME)
    assert table.queryable_store_name is None


def test_transform_values_with_key_and_materialize() -> None:
    """shouldTransformValuesWithKeyAndMaterialize: the results are in the store, with timestamps."""
    builder = StreamsBuilder().add_state_store(store_builder(STORE_NAME))
    table = builder.table(INPUT_TOPIC, key_serde=S, value_serde=S).transform_values(
        lambda: Exclamation(STORE_NAME, QUERYABLE_NAME), Materialized.as_(QUERYABLE_NAME).with_key_serde(S)
        .with_value_serde(S), STORE_NAME)  # fmt: skip
    out, driver = captured(builder, table, [("A", "a", 5), ("B", "b", 10), ("C", None, 15)])
    with driver:
        assert out == [("A", "A->a!", 5), ("B", "B->b!", 10), ("C", "C->null!", 15)]
        store = driver.get_key_value_store(QUERYABLE_NAME)
        assert [store.get(k) for k in "ABC"] == ["A->a!", "B->b!", "C->null!"]
        timestamped = driver.get_timestamped_key_value_store(QUERYABLE_NAME)
        assert [(v.value, v.timestamp) for v in map(timestamped.get, "ABC")] == [
            ("A->a!", 5), ("B->b!", 10), ("C->null!", 15),
        ]  # fmt: skip
    assert table.queryable_store_name == QUERYABLE_NAME


def _reduced(table: Any) -> Any:
    """`groupBy(KeyValue::new, Grouped.with(String, Integer)).reduce(+, -).mapValues(toString)`."""
    return (table.group_by(lambda k, v: (k, v), Grouped.with_(S, INT))
            .reduce(lambda a, v: a + v, lambda a, v: a - v).map_values(str))  # fmt: skip


def test_correct_old_values_if_materialized_even_if_stateful() -> None:
    """shouldCalculateCorrectOldValuesIfMaterializedEvenIfStateful: old values come from the store."""
    builder = StreamsBuilder()
    table = builder.table(INPUT_TOPIC, key_serde=S, value_serde=S).transform_values(
        Stateful, Materialized.as_(QUERYABLE_NAME).with_key_serde(S).with_value_serde(INT))
    out, driver = captured(builder, _reduced(table), [("A", "ignored", 5), ("A", "ignored1", 15), ("A", "ignored2", 10)])
    with driver:
        assert out == [("A", "1", 5), ("A", "2", 15), ("A", "3", 15)]
        assert driver.get_key_value_store(QUERYABLE_NAME).get("A") == 3


def test_correct_old_values_if_not_stateful_even_if_not_materialized() -> None:
    """shouldCalculateCorrectOldValuesIfNotStatefulEvenIfNotMaterialized: the old value transformed again."""
    builder = StreamsBuilder()
    table = builder.table(INPUT_TOPIC, key_serde=S, value_serde=S).transform_values(Stateless)
    out, driver = captured(builder, _reduced(table), [("A", "a", 5), ("A", "aa", 15), ("A", "aaa", 10)])
    with driver:
        assert out == [("A", "1", 5), ("A", "2", 15), ("A", "3", 15)]


def test_old_values_transformed_only_when_asked_for() -> None:
    """shouldNotSendOldValuesByDefault / shouldSendOldValuesIfConfigured: without a downstream that asks
    for old values the transformer is called once per update (a counter counts 1, 2, 3)."""
    builder = StreamsBuilder()
    table = builder.table(INPUT_TOPIC, key_serde=S, value_serde=S).transform_values(Stateful)
    out, driver = captured(builder, table, [("A", "x", 1), ("A", "y", 2), ("B", "z", 3)], INT)
    with driver:
        assert out == [("A", 1, 1), ("A", 2, 2), ("B", 3, 3)]


def test_forwarding_is_disabled_in_the_transformer_context() -> None:
    """shouldInitializeTransformerWithForwardDisabledProcessorContext."""

    class Forwarding(ValueTransformerWithKey[str, str, str]):
        def init(self, context: Any) -> None:
            self.context = context

        def transform(self, read_only_key: str, value: str | None) -> str:
            self.context.forward(None)
            return "unreachable"

    builder = StreamsBuilder()
    table = builder.table(INPUT_TOPIC, key_serde=S, value_serde=S).transform_values(Forwarding)
    with pytest.raises(StreamsError, match="forward"):
        captured(builder, table, [("A", "a", 1)])


def test_transform_on_get_if_not_materialized() -> None:
    """shouldTransformOnGetIfNotMaterialized: a join reads the non-materialised result through a
    getter that transforms the parent's value (`Key->Value!`)."""
    builder = StreamsBuilder()
    table = builder.table(INPUT_TOPIC, key_serde=S, value_serde=S).transform_values(Exclamation)
    (builder.stream("clicks", key_serde=S, value_serde=S)
     .join(table, lambda click, value: f"{click}/{value}").to("joined", key_serde=S, value_serde=S))  # fmt: skip
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic(INPUT_TOPIC, S, S).pipe_input("Key", "Value", 73)
        driver.create_input_topic("clicks", S, S).pipe_input("Key", "click", 80)
        assert driver.create_output_topic("joined", S, S).read_key_values_to_list() == [("Key", "click/Key->Value!")]


def test_supplier_returning_none_is_refused() -> None:
    """shouldThrowOnGetIfSupplierReturnsNull."""
    builder = StreamsBuilder()
    builder.table(INPUT_TOPIC, key_serde=S, value_serde=S).transform_values(lambda: None).to_stream().to("out")
    with pytest.raises(TopologyError, match="supplier returned None"), TopologyTestDriver(builder.build(), CONFIG):
        pass


def test_transformer_closed_with_the_task() -> None:
    """shouldCloseTransformerOnProcessorClose."""
    closed: list[str] = []

    class Closing(Stateless):
        def close(self) -> None:
            closed.append("closed")

    builder = StreamsBuilder()
    builder.table(INPUT_TOPIC, key_serde=S, value_serde=S).transform_values(Closing).to_stream().to("out")
    with TopologyTestDriver(builder.build(), CONFIG):
        assert closed == []
    assert closed == ["closed"]


def test_supplier_stores_and_names() -> None:
    """A supplier's `stores()` are added and connected (ConnectedStoreProvider); the node is Java's
    `KTABLE-TRANSFORMVALUES-<n>`; an anonymous Materialized materialises nothing (Java's
    `queryableStoreName` is null) and burns no index."""

    class Supplier:
        def get(self) -> Exclamation:
            return Exclamation(STORE_NAME)

        def stores(self) -> list[Any]:
            return [store_builder(STORE_NAME)]

    builder = StreamsBuilder()
    table = builder.table(INPUT_TOPIC, key_serde=S, value_serde=S)
    table.transform_values(Supplier()).transform_values(Stateless, Materialized.with_(S, INT)).to_stream().to("out")
    assert str(builder.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [inputTopic])\n"
        "      --> KTABLE-SOURCE-0000000002\n"
        "    Processor: KTABLE-SOURCE-0000000002 (stores: [])\n"
        "      --> KTABLE-TRANSFORMVALUES-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: KTABLE-TRANSFORMVALUES-0000000003 (stores: [someStore])\n"
        "      --> KTABLE-TRANSFORMVALUES-0000000004\n"
        "      <-- KTABLE-SOURCE-0000000002\n"
        "    Processor: KTABLE-TRANSFORMVALUES-0000000004 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000005\n"
        "      <-- KTABLE-TRANSFORMVALUES-0000000003\n"
        "    Processor: KTABLE-TOSTREAM-0000000005 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000006\n"
        "      <-- KTABLE-TRANSFORMVALUES-0000000004\n"
        "    Sink: KSTREAM-SINK-0000000006 (topic: out)\n"
        "      <-- KTABLE-TOSTREAM-0000000005\n\n"
    )
