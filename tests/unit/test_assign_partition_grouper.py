"""Default partition grouper and co-partitioning enforcement."""

from __future__ import annotations

import pytest

from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition as TP
from streams_core.errors import TopologyError
from streams_core.runtime.assignment import (
    CopartitioningError,
    MissingSourceTopicError,
    ensure_copartitioning,
    partition_groups,
)


def test_partition_p_of_every_source_topic_is_task_p() -> None:
    groups = partition_groups({0: {"left", "right"}, 1: {"other"}}, {"left": 2, "right": 2, "other": 3})
    assert groups == {
        TaskId(0, 0): {TP("left", 0), TP("right", 0)},
        TaskId(0, 1): {TP("left", 1), TP("right", 1)},
        TaskId(1, 0): {TP("other", 0)},
        TaskId(1, 1): {TP("other", 1)},
        TaskId(1, 2): {TP("other", 2)},
    }
    assert list(groups) == sorted(groups)


def test_uneven_source_topics_give_max_tasks() -> None:
    groups = partition_groups({0: {"a", "b"}}, {"a": 3, "b": 1})
    assert groups[TaskId(0, 0)] == {TP("a", 0), TP("b", 0)}
    assert groups[TaskId(0, 2)] == {TP("a", 2)}


def test_missing_source_topics_are_named() -> None:
    with pytest.raises(MissingSourceTopicError, match="missing from the cluster metadata: x, y") as caught:
        partition_groups({0: {"a", "x"}, 1: {"y"}}, {"a": 1})
    assert caught.value.topics == ["x", "y"]


def test_copartitioned_topics_with_different_counts_fail_naming_them() -> None:
    with pytest.raises(CopartitioningError) as caught:
        ensure_copartitioning([{"left", "right"}], {"left": 4, "right": 3})
    assert str(caught.value) == "co-partitioned topics have different partition counts: left=4, right=3"
    assert caught.value.counts == {"left": 4, "right": 3}
    assert isinstance(caught.value, TopologyError)


def test_equal_counts_pass() -> None:
    assert ensure_copartitioning([{"left", "right"}], {"left": 4, "right": 4, "x": 1}) == {}


def test_missing_copartitioned_topic() -> None:
    with pytest.raises(MissingSourceTopicError, match="right"):
        ensure_copartitioning([{"left", "right"}], {"left": 4})


def test_repartition_topics_take_the_count_of_their_group() -> None:
    required = ensure_copartitioning(
        [{"table", "app-KSTREAM-REPARTITION"}, {"app-r1", "app-r2"}],
        {"table": 6, "app-r1": 2, "app-r2": 5},
        repartition_topics={"app-KSTREAM-REPARTITION", "app-r1", "app-r2"},
    )
    assert required == {"app-KSTREAM-REPARTITION": 6, "app-r1": 5, "app-r2": 5}


def test_existing_repartition_topic_with_other_count_is_a_mismatch() -> None:
    with pytest.raises(CopartitioningError, match="app-rep=2, table=6"):
        ensure_copartitioning([{"table", "app-rep"}], {"table": 6, "app-rep": 2}, repartition_topics={"app-rep"})
