"""The broker's task assignment in the classic assignor's form, and a refused topology's differences in words."""

from __future__ import annotations

import pytest

from streams_core.clients.streams_group_protocol import (
    EndpointPartitions,
    GroupStatus,
    StatusCode,
    StreamsGroupTopology,
    Subtopology,
    TaskAssignment,
    TopicInfo,
)
from streams_core.clients.streams_group_topology_diff import topology_difference
from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment.errors import (
    AssignmentError,
    CopartitioningError,
    MissingSourceTopicError,
    ShutdownRequestedError,
)
from streams_core.runtime.assignment.streams_group_assignment import streams_group_assignment_info

SUBTOPOLOGIES = {0: ["in"], 1: ["app-r-repartition"]}
A, B = HostInfo("a", 1), HostInfo("b", 2)


def test_tasks_become_partitions_and_warmups_standbys() -> None:
    tasks = TaskAssignment(frozenset({TaskId(0, 1), TaskId(1, 1)}), frozenset({TaskId(1, 2)}), frozenset({TaskId(1, 3)}))
    endpoints = (
        EndpointPartitions(A, frozenset({TopicPartition("in", 1)}), frozenset()),
        EndpointPartitions(B, frozenset({TopicPartition("in", 0)}), frozenset({TopicPartition("in", 1)})),
    )
    info = streams_group_assignment_info(SUBTOPOLOGIES, tasks, endpoints)
    assert info.active_tasks == {
        TaskId(0, 1): frozenset({TopicPartition("in", 1)}),
        TaskId(1, 1): frozenset({TopicPartition("app-r-repartition", 1)}),
    }
    assert set(info.standby_tasks) == {TaskId(1, 2), TaskId(1, 3)}
    assert info.partitions_by_host == {A: frozenset({TopicPartition("in", 1)}), B: frozenset({TopicPartition("in", 0)})}
    assert info.standby_partitions_by_host == {B: frozenset({TopicPartition("in", 1)})}
    info.raise_if_error()


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (StatusCode.MISSING_SOURCE_TOPICS, MissingSourceTopicError),
        (StatusCode.INCORRECTLY_PARTITIONED_TOPICS, CopartitioningError),
        (StatusCode.SHUTDOWN_APPLICATION, ShutdownRequestedError),
    ],
)
def test_statuses_that_stop_the_application_are_the_assignment_error(code: StatusCode, error: type[Exception]) -> None:
    info = streams_group_assignment_info(SUBTOPOLOGIES, TaskAssignment.EMPTY, (), (GroupStatus(code, "topics in, out"),))
    with pytest.raises(error, match="topics in, out"):
        info.raise_if_error()


def test_delays_and_missing_internal_topics_are_no_error() -> None:
    statuses = (GroupStatus(StatusCode.ASSIGNMENT_DELAYED, "delayed"), GroupStatus(StatusCode.MISSING_INTERNAL_TOPICS, "creating"))
    streams_group_assignment_info(SUBTOPOLOGIES, TaskAssignment.EMPTY, (), statuses).raise_if_error()


def test_a_task_of_an_unknown_subtopology_is_refused() -> None:
    with pytest.raises(AssignmentError, match="unknown sub-topology 7"):
        streams_group_assignment_info(SUBTOPOLOGIES, TaskAssignment(frozenset({TaskId(7, 0)})), ())


def _topology(retention: str, sources: tuple[str, ...] = ("in",)) -> StreamsGroupTopology:
    return StreamsGroupTopology(
        0,
        (
            Subtopology("0", sources, repartition_sink_topics=("app-r",)),
            Subtopology(
                "1",
                repartition_source_topics=(TopicInfo("app-r", 4, configs={"retention.ms": retention}),),
                state_changelog_topics=(TopicInfo("app-c", configs={"cleanup.policy": "compact"}),),
            ),
        ),
    )


def test_the_difference_names_the_topic_config_and_both_values() -> None:
    text = topology_difference(_topology("-1"), _topology("1000"))
    assert text == "sub-topology 1: repartition source topic app-r: retention.ms='-1' in the group, '1000' here"


def test_the_difference_names_sources_and_sub_topologies() -> None:
    assert "source topics ['in'] in the group, ['in', 'other'] here" in topology_difference(
        _topology("-1"), _topology("-1", ("in", "other"))
    )
    one = StreamsGroupTopology(0, (Subtopology("0", ("in",)),))
    assert topology_difference(_topology("-1"), one).startswith("sub-topologies ['0', '1'] in the group, ['0'] here")
    assert topology_difference(_topology("-1"), _topology("-1")) == ""
