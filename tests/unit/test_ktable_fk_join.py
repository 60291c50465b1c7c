"""Foreign-key table-table joins (KIP-213), with the scenarios and expected outputs of Kafka Streams'
KTableKTableForeignKeyJoinIntegrationTest (a TopologyTestDriver test there too)."""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import (
    Materialized,
    Serdes,
    StreamsBuilder,
    TableJoined,
    TestRecord,
    TopologyTestDriver,
)

S = Serdes.String()
CONFIG = {"application.id": "fk", "statestore.cache.max.bytes": 0}


def fk_of(value: str) -> str | None:
    return value.split("|")[1]


def joiner(left: Any, right: Any) -> str:
    return f"({left},{right})"


def topology(left_join: bool, materialized: bool, extractor: Any = fk_of, table_joined: Any = None) -> Any:
    builder = StreamsBuilder()
    left = builder.table("left_table", key_serde=S, value_serde=S)
    right = builder.table("right_table", key_serde=S, value_serde=S)
    m = Materialized.as_("store").with_value_serde(S) if materialized else Materialized.with_(S, S)
    join = left.left_join if left_join else left.join
    join(right, extractor, joiner, table_joined, m).to_stream().to("output")
    return builder.build()


def as_map(store: Any) -> dict[str, str]:
    return {kv.key: kv.value for kv in store.all()}


CASES = [(left, materialized) for left in (False, True) for materialized in (False, True)]


@pytest.mark.parametrize(("left_join", "materialized"), CASES)
def test_join_from_left_then_delete_left_entity(left_join: bool, materialized: bool) -> None:
    with TopologyTestDriver(topology(left_join, materialized), CONFIG) as driver:
        right, left = driver.create_input_topic("right_table", S, S), driver.create_input_topic("left_table", S, S)
        output = driver.create_output_topic("output", S, S)
        right.pipe_input("rhs1", "rhsValue1", 0)
        right.pipe_input("rhs2", "rhsValue2", 1)
        right.pipe_input("rhs3", "rhsValue3", 2)
        assert output.read_key_values_to_map() == {}
        left.pipe_input("lhs1", "lhsValue1|rhs1", 3)
        left.pipe_input("lhs2", "lhsValue2|rhs2", 4)
        expected = {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)"}
        assert output.read_key_values_to_map() == expected
        left.pipe_input("lhs3", "lhsValue3|rhs1", 5)
        assert output.read_key_values_to_map() == {"lhs3": "(lhsValue3|rhs1,rhsValue1)"}
        left.pipe_input("lhs1", None, 6)
        assert output.read_records_to_list() == [TestRecord("lhs1", None, 6)]
        if materialized:
            assert as_map(driver.get_key_value_store("store")) == {
                "lhs2": "(lhsValue2|rhs2,rhsValue2)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"}  # fmt: skip


@pytest.mark.parametrize(("left_join", "materialized"), CASES)
def test_join_from_right_then_delete_right_entity(left_join: bool, materialized: bool) -> None:
    with TopologyTestDriver(topology(left_join, materialized), CONFIG) as driver:
        right, left = driver.create_input_topic("right_table", S, S), driver.create_input_topic("left_table", S, S)
        output = driver.create_output_topic("output", S, S)
        left.pipe_input("lhs1", "lhsValue1|rhs1", 0)
        left.pipe_input("lhs2", "lhsValue2|rhs2", 1)
        left.pipe_input("lhs3", "lhsValue3|rhs1", 2)
        nothing = {"lhs1": "(lhsValue1|rhs1,None)", "lhs2": "(lhsValue2|rhs2,None)", "lhs3": "(lhsValue3|rhs1,None)"}
        assert output.read_key_values_to_map() == (nothing if left_join else {})
        right.pipe_input("rhs1", "rhsValue1", 3)
        # the answers carry the later timestamp of the two sides
        assert output.read_records_to_list() == [TestRecord("lhs1", "(lhsValue1|rhs1,rhsValue1)", 3),
                                                 TestRecord("lhs3", "(lhsValue3|rhs1,rhsValue1)", 3)]  # fmt: skip
        right.pipe_input("rhs2", "rhsValue2", 4)
        assert output.read_key_values_to_map() == {"lhs2": "(lhsValue2|rhs2,rhsValue2)"}
        right.pipe_input("rhs3", "rhsValue3", 5)  # referenced by nobody
        assert output.read_key_values_to_map() == {}
        right.pipe_input("rhs1", None, 6)
        assert output.read_key_values_to_map() == (
            {"lhs1": "(lhsValue1|rhs1,None)", "lhs3": "(lhsValue3|rhs1,None)"} if left_join else {"lhs1": None, "lhs3": None}
        )
        if materialized:
            after = {"lhs2": "(lhsValue2|rhs2,rhsValue2)"}
            if left_join:
                after |= {"lhs1": "(lhsValue1|rhs1,None)", "lhs3": "(lhsValue3|rhs1,None)"}
            assert as_map(driver.get_key_value_store("store")) == after


@pytest.mark.parametrize("materialized", [False, True])
def test_left_join_emits_a_record_with_a_none_foreign_key(materialized: bool) -> None:
    """shouldEmitRecordOnNullForeignKeyForLeftJoins."""
    with TopologyTestDriver(topology(True, materialized, lambda value: None), CONFIG) as driver:
        driver.create_input_topic("left_table", S, S).pipe_input("lhs1", "lhsValue1|rhs1", 0)
        assert driver.create_output_topic("output", S, S).read_key_values_to_map() == {"lhs1": "(lhsValue1|rhs1,None)"}


def test_inner_join_skips_a_none_foreign_key_and_counts_it() -> None:
    with TopologyTestDriver(topology(False, False, lambda value: None), CONFIG) as driver:
        driver.create_input_topic("left_table", S, S).pipe_input("lhs1", "lhsValue1|rhs1", 0)
        assert driver.create_output_topic("output", S, S).read_key_values_to_map() == {}
        assert driver.dropped_records == 1


def test_changing_the_foreign_key_unsubscribes_the_old_one() -> None:
    """shouldUnsubscribeOldForeignKeyIfLeftSideIsUpdated (inner join)."""
    with TopologyTestDriver(topology(False, True), CONFIG) as driver:
        right, left = driver.create_input_topic("right_table", S, S), driver.create_input_topic("left_table", S, S)
        output = driver.create_output_topic("output", S, S)
        right.pipe_input("rhs1", "rhsValue1", 0)
        right.pipe_input("rhs2", "rhsValue2", 1)
        left.pipe_input("lhs1", "lhsValue1|rhs1", 2)
        assert output.read_key_values_to_map() == {"lhs1": "(lhsValue1|rhs1,rhsValue1)"}
        left.pipe_input("lhs1", "lhsValue1|rhs2", 3)
        assert output.read_key_values_to_map() == {"lhs1": "(lhsValue1|rhs2,rhsValue2)"}
        right.pipe_input("rhs1", "rhsValue1-changed", 4)  # no longer referenced: nothing happens
        assert output.read_key_values_to_map() == {}
        subscriptions = next(s for name, s in driver.get_all_state_stores().items() if "SUBSCRIPTION-STATE-STORE" in name)
        assert len(list(subscriptions.all())) == 1


def test_named_join_names_its_nodes_topics_and_store() -> None:
    description = str(topology(False, True, table_joined=TableJoined.as_("fk")).describe())
    for line in ("Processor: fk-subscription-registration-processor (stores: [])",
                 "Sink: fk-subscription-registration-sink (topic: fk-subscription-registration-topic)",
                 "Source: fk-subscription-registration-source (topics: [fk-subscription-registration-topic])",
                 "Processor: fk-subscription-receive (stores: [fk-subscription-store])",
                 "Processor: fk-foreign-join-subscription (stores: [fk-subscription-store])",
                 "Sink: fk-subscription-response-sink (topic: fk-subscription-response-topic)",
                 "Processor: fk-subscription-response-resolver (stores: [left_table-STATE-STORE-0000000000])",
                 "Processor: fk-result (stores: [store])"):  # fmt: skip
        assert line in description, line


# What Kafka Streams 4.3.1 prints for this topology (its describe(), run with its jars)
JAVA_FK_TOPOLOGY = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KTABLE-SOURCE-0000000016 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic])\n'
    '      --> KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017\n'
    '    Source: KSTREAM-SOURCE-0000000001 (topics: [left_table])\n'
    '      --> KTABLE-SOURCE-0000000002\n'
    '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017 (stores: [left_table-STATE-STORE-0000000000])\n'
    '      --> KTABLE-FK-JOIN-OUTPUT-0000000018\n'
    '      <-- KTABLE-SOURCE-0000000016\n'
    '    Processor: KTABLE-FK-JOIN-OUTPUT-0000000018 (stores: [])\n'
    '      --> KTABLE-TOSTREAM-0000000020\n'
    '      <-- KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017\n'
    '    Processor: KTABLE-SOURCE-0000000002 (stores: [left_table-STATE-STORE-0000000000])\n'
    '      --> KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007\n'
    '      <-- KSTREAM-SOURCE-0000000001\n'
    '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007 (stores: [])\n'
    '      --> KTABLE-SINK-0000000008\n'
    '      <-- KTABLE-SOURCE-0000000002\n'
    '    Processor: KTABLE-TOSTREAM-0000000020 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000021\n'
    '      <-- KTABLE-FK-JOIN-OUTPUT-0000000018\n'
    '    Sink: KSTREAM-SINK-0000000021 (topic: output)\n'
    '      <-- KTABLE-TOSTREAM-0000000020\n'
    '    Sink: KTABLE-SINK-0000000008 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic)\n'
    '      <-- KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: KSTREAM-SOURCE-0000000004 (topics: [right_table])\n'
    '      --> KTABLE-SOURCE-0000000005\n'
    '    Source: KTABLE-SOURCE-0000000009 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic])\n'
    '      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011\n'
    '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])\n'
    '      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012\n'
    '      <-- KTABLE-SOURCE-0000000009\n'
    '    Processor: KTABLE-SOURCE-0000000005 (stores: [right_table-STATE-STORE-0000000003])\n'
    '      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013\n'
    '      <-- KSTREAM-SOURCE-0000000004\n'
    '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012 (stores: [right_table-STATE-STORE-0000000003])\n'
    '      --> KTABLE-SINK-0000000015\n'
    '      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011\n'
    '    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])\n'
    '      --> KTABLE-SINK-0000000015\n'
    '      <-- KTABLE-SOURCE-0000000005\n'
    '    Sink: KTABLE-SINK-0000000015 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic)\n'
    '      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012, KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013\n'
    '\n'
)


def test_unnamed_join_has_kafka_streams_topology() -> None:
    builder = StreamsBuilder()
    left = builder.table("left_table", key_serde=S, value_serde=S)
    right = builder.table("right_table", key_serde=S, value_serde=S)
    left.join(right, fk_of, lambda x, y: x + y).to_stream().to("output")
    assert str(builder.build().describe()) == JAVA_FK_TOPOLOGY


@pytest.mark.parametrize("left_join", [False, True])
def test_deletes_as_kafka_streams_4_3_emits_them(left_join: bool) -> None:
    """Kafka Streams 4.3.1's driver gives exactly these records (one tombstone for the deleted row,
    nothing for the delete of a row that never existed)."""
    with TopologyTestDriver(topology(left_join, False), CONFIG) as driver:
        right, left = driver.create_input_topic("right_table", S, S), driver.create_input_topic("left_table", S, S)
        right.pipe_input("rhs1", "rhsValue1", 0)
        left.pipe_input("lhs1", "lhsValue1|rhs1", 3)
        left.pipe_input("lhs2", "lhsValue2|rhs9", 4)
        left.pipe_input("lhs1", None, 6)
        left.pipe_input("lhs3", None, 7)
        expected = [TestRecord("lhs1", "(lhsValue1|rhs1,rhsValue1)", 3)]
        if left_join:
            expected.append(TestRecord("lhs2", "(lhsValue2|rhs9,None)", 4))
        expected.append(TestRecord("lhs1", None, 6))
        assert driver.create_output_topic("output", S, S).read_records_to_list() == expected
