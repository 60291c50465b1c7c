"""The streams group wire layer: byte layouts of the flexible encodings aiokafka lacks, and round trips."""

from __future__ import annotations

from io import BytesIO
from typing import Any

import pytest
from aiokafka.protocol.types import Int32, TaggedFields

from streams_core.clients.streams_group_messages import (
    NullableStruct,
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeRequest_v0,
    StreamsGroupDescribeResponse_v0,
    StreamsGroupHeartbeatRequest_v0,
    StreamsGroupHeartbeatResponse_v0,
    UInt16,
)
from streams_core.clients.streams_group_offset_commit import (
    STALE_MEMBER_EPOCH,
    MemberOffsetCommitRequest,
    OffsetCommitRequest_v9,
    OffsetCommitResponse_v9,
    commit_errors,
)
from streams_core.clients.streams_group_protocol import (
    GroupStatus,
    HeartbeatRequestData,
    StatusCode,
    StreamsGroupTopology,
    Subtopology,
    TaskAssignment,
    TopicInfo,
    decode_describe,
    decode_heartbeat,
    heartbeat_request,
)
from streams_core.common.host_info import HostInfo
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition


def encoded(data: HeartbeatRequestData) -> bytes:
    return bytes(heartbeat_request(data).build(StreamsGroupHeartbeatRequest_v0).encode())


def test_uint16_is_unsigned_big_endian() -> None:
    assert UInt16().encode(65535) == b"\xff\xff"
    assert UInt16().encode(8080) == b"\x1f\x90"
    assert UInt16().decode(BytesIO(b"\xff\xfe")) == 65534


def test_a_nullable_struct_is_a_byte_marker_then_its_fields() -> None:
    struct = NullableStruct(("n", Int32), ("tags", TaggedFields))
    assert struct.encode(None) == b"\xff"
    assert struct.encode((7, {})) == b"\x01\x00\x00\x00\x07\x00"
    assert struct.decode(BytesIO(b"\xff")) is None
    assert struct.decode(BytesIO(b"\x01\x00\x00\x00\x07\x00")) == (7, {})


def test_a_leave_heartbeat_has_the_exact_v0_layout() -> None:
    data = encoded(HeartbeatRequestData(group_id="g", member_id="m", member_epoch=-1))
    assert data == (
        b"\x02g"  # group id: compact string, length + 1
        b"\x02m"  # member id
        b"\xff\xff\xff\xff"  # member epoch -1
        b"\x00\x00\x00\x00"  # endpoint information epoch
        b"\x00\x00"  # instance id, rack id: null
        b"\xff\xff\xff\xff"  # rebalance timeout -1: unchanged
        b"\xff"  # topology: null struct
        b"\x00\x00\x00"  # active, standby, warm-up tasks: null arrays
        b"\x00"  # process id: null
        b"\xff"  # user endpoint: null struct
        b"\x00\x00\x00"  # client tags, task offsets, task end offsets: null
        b"\x00"  # shutdown application: false
        b"\x00"  # tagged fields
    )


def test_task_offsets_and_the_shutdown_flag_have_the_v0_layout() -> None:
    """TaskOffsets/TaskEndOffsets (sub-topology id, partition, int64 offset) in task order, then ShutdownApplication.
    The member never sends the offsets to a v0 coordinator (docs/streams-groups.md); the integration
    test sends them this way to pin the 4.3.1 broker's refusal."""
    data = encoded(
        HeartbeatRequestData(
            group_id="g",
            member_id="m",
            member_epoch=-1,
            task_offsets={TaskId(1, 2): 7, TaskId(0, 3): 2**40},
            task_end_offsets={},
            shutdown_application=True,
        )
    )
    assert data.endswith(
        b"\x00"  # client tags: null
        b"\x03"  # task offsets: 2 entries
        b"\x020\x00\x00\x00\x03\x00\x00\x01\x00\x00\x00\x00\x00\x00"  # "0", partition 3, offset 2**40, no tags
        b"\x021\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x07\x00"  # "1", partition 2, offset 7
        b"\x01"  # task end offsets: empty, not null
        b"\x01"  # shutdown application: true
        b"\x00"  # tagged fields
    )


def joining() -> HeartbeatRequestData:
    topology = StreamsGroupTopology(
        0,
        (
            Subtopology("0", ("in",), repartition_sink_topics=("app-x-repartition",)),
            Subtopology(
                "1",
                ("left", "right"),
                state_changelog_topics=(TopicInfo("app-s-changelog", 0, -1, {"cleanup.policy": "compact"}),),
                repartition_source_topics=(TopicInfo("app-x-repartition", 6, 3, {}),),
                copartition_groups=(("right", "app-x-repartition"),),
            ),
        ),
    )
    return HeartbeatRequestData(
        group_id="app",
        member_id="m-1",
        member_epoch=0,
        rebalance_timeout_ms=300_000,
        topology=topology,
        tasks=TaskAssignment(frozenset({TaskId(1, 2), TaskId(0, 3), TaskId(0, 1)})),
        process_id="p-1",
        user_endpoint=HostInfo("host-a", 8080),
        client_tags={"zone": "b", "rack": "r1"},
    )


def test_a_join_heartbeat_decodes_back_with_the_schema() -> None:
    decoded = StreamsGroupHeartbeatRequest_v0.decode(encoded(joining()))
    assert (decoded.group_id, decoded.member_id, decoded.member_epoch) == ("app", "m-1", 0)
    epoch, subtopologies, _ = decoded.topology
    assert epoch == 0
    sub1 = subtopologies[1]
    assert sub1[0] == "1" and sub1[1] == ["left", "right"]
    assert sub1[3] == [("app-s-changelog", 0, -1, [("cleanup.policy", "compact", {})], {})]
    assert sub1[5] == [("app-x-repartition", 6, 3, [], {})]
    # the co-partition group as indices: "right" is source topic 1, the repartition topic index 0
    assert sub1[6] == [([1], [], [0], {})]
    assert decoded.active_tasks == [("0", [1, 3], {}), ("1", [2], {})]
    assert decoded.standby_tasks == [] and decoded.warmup_tasks == []
    assert decoded.user_endpoint == ("host-a", 8080, {})
    assert decoded.client_tags == [("rack", "r1", {}), ("zone", "b", {})]


def test_a_copartition_group_must_name_topics_of_its_subtopology() -> None:
    topology = StreamsGroupTopology(0, (Subtopology("0", ("a",), copartition_groups=(("a", "b"),)),))
    with pytest.raises(ValueError, match=r"does not read: \['b'\]"):
        encoded(HeartbeatRequestData("g", "m", 0, topology=topology))


def response_fields(**overrides: Any) -> list[Any]:
    fields: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "member_id": "m-1",
        "member_epoch": 3,
        "heartbeat_interval_ms": 5000,
        "acceptable_recovery_lag": 10000,
        "task_offset_interval_ms": 60000,
        "status": None,
        "active_tasks": None,
        "standby_tasks": None,
        "warmup_tasks": None,
        "endpoint_information_epoch": 0,
        "partitions_by_user_endpoint": None,
        "tags": {},
    }
    assert list(fields) == list(StreamsGroupHeartbeatResponse_v0.SCHEMA.names)
    fields.update(overrides)
    return list(fields.values())


def decode_response(**overrides: Any) -> Any:
    wire = StreamsGroupHeartbeatResponse_v0(*response_fields(**overrides)).encode()
    return decode_heartbeat(StreamsGroupHeartbeatResponse_v0.decode(wire))


def test_a_heartbeat_answer_without_changes_has_no_tasks() -> None:
    answer = decode_response()
    assert answer.member_epoch == 3 and answer.heartbeat_interval_ms == 5000
    assert answer.tasks is None and answer.status is None and answer.endpoints is None


def test_a_heartbeat_answer_with_tasks_status_and_endpoints() -> None:
    answer = decode_response(
        status=[(1, "missing: in", {})],
        active_tasks=[("0", [0, 2], {}), ("1", [1], {})],
        standby_tasks=[],
        warmup_tasks=[("1", [0], {})],
        endpoint_information_epoch=4,
        partitions_by_user_endpoint=[(("h", 9090, {}), [("in", [0, 2], {})], [("in", [1], {})], {})],
    )
    assert answer.tasks == TaskAssignment(
        frozenset({TaskId(0, 0), TaskId(0, 2), TaskId(1, 1)}), frozenset(), frozenset({TaskId(1, 0)})
    )
    assert answer.status == (GroupStatus(StatusCode.MISSING_SOURCE_TOPICS, "missing: in"),)
    assert str(answer.status[0]) == "MISSING_SOURCE_TOPICS: missing: in"
    (endpoint,) = answer.endpoints
    assert endpoint.endpoint == HostInfo("h", 9090)
    assert endpoint.active == {TopicPartition("in", 0), TopicPartition("in", 2)}
    assert endpoint.standby == {TopicPartition("in", 1)}
    assert answer.endpoint_information_epoch == 4


def test_a_subtopology_id_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="'sub-0' is not a Kafka Streams sub-topology number"):
        decode_response(active_tasks=[("sub-0", [0], {})], standby_tasks=[], warmup_tasks=[])


def test_describe_request_and_answer() -> None:
    request = StreamsGroupDescribeRequest(["app"]).build(StreamsGroupDescribeRequest_v0)
    assert request.encode() == b"\x02\x04app\x00\x00"
    empty_assignment: tuple[Any, ...] = ([], [], [], {})
    member: tuple[Any, ...] = (
        "m-1", 5, None, None, "client", "/127.0.0.1", 0, "p-1", ("h", 8081, {}), [("zone", "a", {})], [], [],
        ([("0", [0, 1], {})], [], [], {}), empty_assignment, False, {},
    )  # fmt: skip
    topology: tuple[Any, ...] = (
        0,
        [("0", ["in"], ["app-r"], [], [], {}), ("1", [], [], [("app-c", 0, -1, [], {})], [("app-r", 2, -1, [], {})], {})],
        {},
    )
    group: tuple[Any, ...] = (0, None, "app", "Stable", 5, 5, topology, [member], -2147483648, {})
    wire = StreamsGroupDescribeResponse_v0(0, [group], {}).encode()
    (description,) = decode_describe(StreamsGroupDescribeResponse_v0.decode(wire))
    assert (description.group_id, description.state, description.group_epoch) == ("app", "Stable", 5)
    assert description.topology is not None
    sub0, sub1 = description.topology.subtopologies
    assert sub0.repartition_sink_topics == ("app-r",)
    assert sub1.state_changelog_topics == (TopicInfo("app-c", 0, -1, {}),)
    assert sub1.repartition_source_topics == (TopicInfo("app-r", 2, -1, {}),)
    (described,) = description.members
    assert described.user_endpoint == HostInfo("h", 8081) and described.client_tags == {"zone": "a"}
    assert described.assignment.active == {TaskId(0, 0), TaskId(0, 1)}
    assert not described.target_assignment


def test_a_member_commit_carries_its_id_and_epoch_in_v9() -> None:
    offsets: dict[TopicPartition, OffsetAndMetadata | int] = {
        TopicPartition("b", 1): OffsetAndMetadata(7, "meta"),
        TopicPartition("a", 0): 3,
    }
    request = MemberOffsetCommitRequest("app", "m-1", 12, offsets).build(OffsetCommitRequest_v9)
    decoded = OffsetCommitRequest_v9.decode(request.encode())
    assert (decoded.group_id, decoded.generation_id_or_member_epoch, decoded.member_id) == ("app", 12, "m-1")
    assert decoded.group_instance_id is None
    assert decoded.topics == [("a", [(0, 3, -1, "", {})], {}), ("b", [(1, 7, -1, "meta", {})], {})]
    answer = OffsetCommitResponse_v9(0, [("a", [(0, 0, {})], {}), ("b", [(1, STALE_MEMBER_EPOCH, {})], {})], {})
    assert commit_errors(OffsetCommitResponse_v9.decode(answer.encode())) == {TopicPartition("b", 1): STALE_MEMBER_EPOCH}
