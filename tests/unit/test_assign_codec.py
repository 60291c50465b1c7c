"""SubscriptionInfo and AssignmentInfo: round trips, version header, errors."""

from __future__ import annotations

import struct

import pytest

from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition as TP
from streams_core.runtime.assignment import (
    AssignmentError,
    AssignmentInfo,
    AssignorError,
    CopartitioningError,
    HostInfo,
    MissingSourceTopicError,
    SubscriptionInfo,
    UnsupportedVersionError,
)

PID = "6f1c3c9e-6d0f-4f8e-9a52-1f0d2a1b2c3d"


def test_subscription_round_trip() -> None:
    info = SubscriptionInfo(
        PID,
        "host-a:7070",
        prev_active_tasks=frozenset({TaskId(0, 1), TaskId(1, 0)}),
        standby_tasks=frozenset({TaskId(0, 2)}),
        task_offset_sums={TaskId(0, 1): 120, TaskId(0, 2): 80},
    )
    data = info.encode()
    assert struct.unpack_from(">ii", data) == (1, 1)  # version first, then latest supported
    assert SubscriptionInfo.decode(data) == info
    assert info.application_server == "host-a:7070"
    assert info.host_info == HostInfo("host-a", 7070)


def test_subscription_without_endpoint() -> None:
    info = SubscriptionInfo(PID)
    decoded = SubscriptionInfo.decode(info.encode())
    assert decoded == info and decoded.host_info is None


def test_subscription_validates_endpoint() -> None:
    with pytest.raises(ValueError, match="host:port"):
        SubscriptionInfo(PID, "no-port")


def test_future_version_is_a_clear_error_with_both_versions() -> None:
    data = struct.pack(">ii", 7, 7) + b"\x00whatever a newer member writes"
    with pytest.raises(UnsupportedVersionError, match="version 7") as caught:
        SubscriptionInfo.decode(data)
    assert (caught.value.version, caught.value.latest_supported_version) == (7, 7)
    assert caught.value.code == AssignorError.VERSION_PROBING
    with pytest.raises(UnsupportedVersionError):
        AssignmentInfo.decode(data)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00\x00\x00\x01", struct.pack(">ii", 0, 1) + b"{}", struct.pack(">ii", 1, 1) + b"not json",
     struct.pack(">ii", 1, 1) + b"[]", struct.pack(">ii", 1, 1) + b"{}"],
)
def test_malformed_subscription_is_an_assignment_error(data: bytes) -> None:
    with pytest.raises(AssignmentError):
        SubscriptionInfo.decode(data)


def test_unknown_fields_are_ignored() -> None:
    data = struct.pack(">ii", 1, 2) + b'{"process_id":"p","extra":[1,2]}'
    info = SubscriptionInfo.decode(data)
    assert info.process_id == "p" and info.latest_supported_version == 2


def test_assignment_round_trip() -> None:
    info = AssignmentInfo(
        active_tasks={TaskId(0, 1): frozenset({TP("a", 1), TP("b", 1)})},
        standby_tasks={TaskId(0, 0): frozenset({TP("a", 0), TP("b", 0)})},
        partitions_by_host={
            HostInfo("h1", 1): frozenset({TP("a", 1), TP("b", 1)}),
            HostInfo("::1", 2): frozenset({TP("a", 0), TP("b", 0)}),
        },
        standby_partitions_by_host={HostInfo("h1", 1): frozenset({TP("a", 0), TP("b", 0)})},
        next_scheduled_rebalance_ms=1_700_000_000_000,
    )
    decoded = AssignmentInfo.decode(info.encode())
    assert decoded == info
    assert decoded.partitions() == {TP("a", 1), TP("b", 1)}
    decoded.raise_if_error()


def test_assignment_error_reaches_every_member_as_the_same_exception() -> None:
    leader_error = CopartitioningError.for_counts({"left": 4, "right": 3})
    info = AssignmentInfo.decode(AssignmentInfo.from_error(leader_error).encode())
    assert info.error_code == AssignorError.COPARTITIONING_MISMATCH
    assert info.partitions() == frozenset()
    with pytest.raises(CopartitioningError, match="left=4, right=3"):
        info.raise_if_error()

    info = AssignmentInfo.from_error(MissingSourceTopicError.for_topics(["in"]))
    with pytest.raises(MissingSourceTopicError, match="in"):
        AssignmentInfo.decode(info.encode()).raise_if_error()


def test_unknown_error_code_from_a_newer_leader() -> None:
    data = struct.pack(">ii", 1, 1) + b'{"error_code":99,"error_message":"boom"}'
    with pytest.raises(AssignmentError, match="boom"):
        AssignmentInfo.decode(data).raise_if_error()
