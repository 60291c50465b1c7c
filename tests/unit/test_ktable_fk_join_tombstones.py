"""The tombstones of foreign-key joins whose result store has caching off, as Kafka Streams emits them.

Inputs and expected outputs are KTableKTableForeignKeyJoinIntegrationTest's (a TopologyTestDriver
test with the default record cache, the result's `Materialized` with caching disabled "because
the cache suppresses some of the unnecessary tombstones"). A result with a store forwards
`Change(None, None)` for the delete of a key it never held, as Java's KTableSource does without
a cache, so an inner join emits `(key, None)` for a left record that never joined.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import Materialized, Serdes, Stores, StreamsBuilder, TopologyTestDriver

S = Serdes.String()
CASES = [(left, materialized, rejoin) for left in (True, False) for materialized in (True, False) for rejoin in (True, False)]


def _joiner(left: Any, right: Any) -> str:
    return f"({'null' if left is None else left},{'null' if right is None else right})"


def _rejoiner(left: Any, right: Any) -> str:
    return f"rejoin({left},{right})"


def _topology(left_join: bool, materialized: bool, rejoin: bool) -> Any:
    """KTableKTableForeignKeyJoinIntegrationTest.getTopology (tables not versioned)."""
    builder = StreamsBuilder()
    left = builder.table("left_table", key_serde=S, value_serde=S)
    right = builder.table("right_table", key_serde=S, value_serde=S)
    main = (Materialized.as_(Stores.in_memory_key_value_store("store")) if materialized
            else Materialized.with_(None, S)).with_value_serde(S).with_caching_disabled()  # fmt: skip
    join = left.left_join if left_join else left.join
    fk_join = join(right, lambda value: value.split("|")[1], _joiner, materialized=main)
    fk_join.to_stream().to("output")
    if rejoin:  # a downstream join forces the result's materialization
        again = (Materialized.as_(Stores.in_memory_key_value_store("store-rejoin")).with_value_serde(S)
                 .with_caching_disabled() if materialized else Materialized.with_(None, S))  # fmt: skip
        (fk_join.left_join if left_join else fk_join.join)(left, _rejoiner, materialized=again).to_stream().to(
            "rejoin_output"
        )
    return builder.build()


def _check(driver: TopologyTestDriver, materialized: bool, output: dict[str, Any], store: dict[str, Any]) -> None:
    """What the output topic got since the last check, and the result store's content (if it has one)."""
    assert driver.create_output_topic("output", S, S).read_key_values_to_map() == output
    if materialized:
        assert {kv.key: kv.value for kv in driver.get_key_value_store("store").all()} == store


@pytest.mark.parametrize(("left_join", "materialized", "rejoin"), CASES)
def test_should_emit_tombstone_when_deleting_non_joining_records(left_join: bool, materialized: bool, rejoin: bool) -> None:
    """KTableKTableForeignKeyJoinIntegrationTest.shouldEmitTombstoneWhenDeletingNonJoiningRecords."""
    with TopologyTestDriver(_topology(left_join, materialized, rejoin), {"application.id": "fk"}) as driver:
        left = driver.create_input_topic("left_table", S, S)
        left.pipe_input("lhs1", "lhsValue1|rhs1", 0)
        expected = {"lhs1": "(lhsValue1|rhs1,null)"} if left_join else {}
        _check(driver, materialized, expected, expected)
        # an unnecessary tombstone for the inner join: it cannot know whether a result was emitted
        left.pipe_input("lhs1", None, 1)
        _check(driver, materialized, {"lhs1": None}, {})
        left.pipe_input("lhs1", None, 2)  # deleting a non-existing record is idempotent
        _check(driver, materialized, {}, {})


@pytest.mark.parametrize(("left_join", "materialized", "rejoin"), CASES)
def test_should_not_emit_tombstones_when_deleting_non_existing_records(
    left_join: bool, materialized: bool, rejoin: bool
) -> None:
    """KTableKTableForeignKeyJoinIntegrationTest.shouldNotEmitTombstonesWhenDeletingNonExistingRecords."""
    with TopologyTestDriver(_topology(left_join, materialized, rejoin), {"application.id": "fk"}) as driver:
        driver.create_input_topic("left_table", S, S).pipe_input("lhs1", None, 0)
        _check(driver, materialized, {}, {})


@pytest.mark.parametrize(("left_join", "materialized", "rejoin"), CASES)
def test_join_should_produce_nulls_when_value_has_non_matching_foreign_key(
    left_join: bool, materialized: bool, rejoin: bool
) -> None:
    """KTableKTableForeignKeyJoinIntegrationTest.joinShouldProduceNullsWhenValueHasNonMatchingForeignKey:
    moving a left record from one missing foreign key to another emits a tombstone for the inner join."""
    with TopologyTestDriver(_topology(left_join, materialized, rejoin), {"application.id": "fk"}) as driver:
        left = driver.create_input_topic("left_table", S, S)
        left.pipe_input("lhs1", "lhsValue1|rhs1", 0)
        expected = {"lhs1": "(lhsValue1|rhs1,null)"} if left_join else {}
        _check(driver, materialized, expected, expected)
        for timestamp, fk in ((1, "rhs2"), (2, "rhs3")):
            left.pipe_input("lhs1", f"lhsValue1|{fk}", timestamp)
            joined = f"(lhsValue1|{fk},null)"
            _check(driver, materialized, {"lhs1": joined if left_join else None}, {"lhs1": joined} if left_join else {})
