"""IQv2's value types: immutable queries and requests, Position arithmetic, bounds, and result accessors."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from streams_core import (
    FailureReason,
    KeyQuery,
    MultiVersionedKeyQuery,
    Position,
    PositionBound,
    QueryResult,
    RangeQuery,
    ResultOrder,
    StateQueryRequest,
    StateQueryResult,
    VersionedKeyQuery,
    WindowKeyQuery,
    WindowRangeQuery,
)


def test_builders_return_new_values_and_leave_the_original_alone() -> None:
    query = RangeQuery.with_range("a", "c")
    descending = query.with_descending_keys()
    assert query.result_order() is ResultOrder.ANY and descending.result_order() is ResultOrder.DESCENDING
    assert (descending.lower_bound(), descending.upper_bound()) == ("a", "c")
    with pytest.raises(dataclasses.FrozenInstanceError):
        query._lower = "z"  # type: ignore[misc]
    request = StateQueryRequest.in_store("s").with_query(KeyQuery.with_key(1))
    narrowed = request.with_partitions([1, 2]).require_active().enable_execution_info()
    assert request.is_all_partitions() and not request.is_require_active() and not request.execution_info_enabled()
    assert narrowed.partitions == {1, 2} and narrowed.is_require_active() and narrowed.execution_info_enabled()
    assert narrowed.with_all_partitions().is_all_partitions()
    with pytest.raises(ValueError):
        _ = request.partitions
    assert request.position_bound.is_unbounded()
    with pytest.raises(ValueError):
        KeyQuery.with_key(None)


def test_queries_are_equal_by_value_and_travel_by_pickle() -> None:
    """A query crosses to a worker process by pickle: it must come back equal."""
    for query in (
        KeyQuery.with_key("k"),
        RangeQuery.with_upper_bound(5).with_ascending_keys(),
        WindowKeyQuery.with_key_and_window_start_range("k", 0, 10),
        WindowRangeQuery.with_window_start_range(0, 10),
        VersionedKeyQuery.with_key("k").as_of(7),
        MultiVersionedKeyQuery.with_key("k").from_time(1).to_time(9).with_descending_timestamps(),
    ):
        assert pickle.loads(pickle.dumps(query)) == query
    assert VersionedKeyQuery.with_key("k").as_of_timestamp() is None
    assert MultiVersionedKeyQuery.with_key("k").result_order() is ResultOrder.ANY


def test_position_merge_takes_the_larger_offset_and_a_bound_checks_only_its_partition() -> None:
    first = Position.from_map({"in": {0: 5, 1: 2}})
    merged = first.merge(Position().with_component("in", 1, 9).with_component("other", 0, 1))
    assert merged.get_partition_positions("in") == {0: 5, 1: 9} and merged.get_topics() == {"in", "other"}
    assert first.get_partition_positions("in") == {0: 5, 1: 2}, "merge makes a new position"
    bound = PositionBound.at(Position.from_map({"in": {0: 5, 1: 10}}))
    assert bound.permits(first, 0), "partition 0 reached offset 5"
    assert not bound.permits(first, 1), "partition 1 is behind"
    assert not bound.permits(None, 0), "a copy without a position has not reached any bound"
    assert bound.permits(None, 3), "no entry for partition 3"
    assert PositionBound.unbounded().permits(None, 0)
    assert pickle.loads(pickle.dumps(bound)) == bound, "a position is a token a caller may keep or send"


def test_a_failed_result_raises_on_get_result_and_only_partition_result_skips_failures() -> None:
    failed: QueryResult[int] = QueryResult.for_failure(FailureReason.NOT_ACTIVE, "standby")
    with pytest.raises(ValueError, match="NOT_ACTIVE"):
        failed.get_result()
    assert failed.get_failure_message() == "standby"
    with pytest.raises(ValueError):
        QueryResult.for_result(1).get_failure_reason()
    with pytest.raises(RuntimeError):
        failed.throw_if_failure()
    one = StateQueryResult({0: QueryResult.for_result(None), 1: QueryResult.for_result(7), 2: failed})
    only = one.get_only_partition_result()
    assert only is not None and only.get_result() == 7
    with pytest.raises(ValueError):
        StateQueryResult({0: QueryResult.for_result(1), 1: QueryResult.for_result(2)}).get_only_partition_result()
    assert one.get_global_result() is None


def test_the_query_store_type_is_one_value_across_pickles() -> None:
    """A worker keeps one view per (store, type, partition...): the type that each request brings
    over the channel must be equal (and hash equal) to the last one, or the views would pile up."""
    from streams_core.query.internals.store_query_utils import QUERY_STORE_TYPE

    copy = pickle.loads(pickle.dumps(QUERY_STORE_TYPE))
    assert copy == QUERY_STORE_TYPE and hash(copy) == hash(QUERY_STORE_TYPE)
    assert len({("counts", copy, 0), ("counts", QUERY_STORE_TYPE, 0)}) == 1


def test_queries_pickle_to_equal_queries_of_their_class() -> None:
    """Queries travel to worker processes pickled (as their class and fields, `Query.__reduce__`)."""
    from streams_core import TimestampedKeyQuery, TimestampedRangeQuery

    queries: list[Any] = [
        KeyQuery.with_key("a").skip_cache(),
        RangeQuery.with_range("a", "b").with_descending_keys(),
        TimestampedRangeQuery.with_lower_bound(3),
        TimestampedKeyQuery.with_key(1),
        WindowKeyQuery.with_key_and_window_start_range("k", 1, 2),
        WindowRangeQuery.with_key("k"),
        WindowRangeQuery.with_window_start_range(1, 5),
        VersionedKeyQuery.with_key("k").as_of(4),
        MultiVersionedKeyQuery.with_key("k").from_time(1).to_time(9).with_ascending_timestamps(),
    ]
    for query in queries:
        copy = pickle.loads(pickle.dumps(query, protocol=pickle.HIGHEST_PROTOCOL))
        assert copy == query and type(copy) is type(query), query
