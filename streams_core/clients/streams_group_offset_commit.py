"""OffsetCommit v9 for a streams group member: offsets committed with its member id and member epoch.

A streams group's coordinator refuses aiokafka's OffsetCommit (v2/v3) from a member: with the member
id and epoch it answers UNSUPPORTED_VERSION (KIP-848's rule: members of the new protocols commit with
v9 or later), and without them UNKNOWN_MEMBER_ID while the group has members (both seen on a 4.3.1
broker). Version 9 is the flexible v8 layout whose generation field carries the member epoch; the
broker checks it against the member's (STALE_MEMBER_EPOCH for one it never gave, seen on 4.3.1), so a
member that was fenced cannot overwrite the new owner's offsets. (Version 10 names topics by id.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import CompactArray, CompactString, Int16, Int32, Int64, Schema, TaggedFields

from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.topic_partition import TopicPartition

__all__ = [
    "STALE_MEMBER_EPOCH",
    "MemberOffsetCommitRequest",
    "OffsetCommitRequest_v9",
    "OffsetCommitResponse_v9",
    "commit_errors",
]

STALE_MEMBER_EPOCH = 113
_STR = CompactString("utf-8")


class OffsetCommitResponse_v9(Response):  # type: ignore[misc]  # aiokafka's types are Any to mypy
    API_KEY = 8
    API_VERSION = 9
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "topics",
            CompactArray(
                ("name", _STR),
                ("partitions", CompactArray(("partition_index", Int32), ("error_code", Int16), ("tags", TaggedFields))),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class OffsetCommitRequest_v9(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 8
    API_VERSION = 9
    RESPONSE_TYPE = OffsetCommitResponse_v9
    SCHEMA = Schema(
        ("group_id", _STR),
        ("generation_id_or_member_epoch", Int32),
        ("member_id", _STR),
        ("group_instance_id", _STR),
        (
            "topics",
            CompactArray(
                ("name", _STR),
                (
                    "partitions",
                    CompactArray(
                        ("partition_index", Int32),
                        ("committed_offset", Int64),
                        ("committed_leader_epoch", Int32),
                        ("committed_metadata", _STR),
                        ("tags", TaggedFields),
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


_CommitStruct: TypeAlias = OffsetCommitRequest_v9


class MemberOffsetCommitRequest(Request[_CommitStruct]):  # type: ignore[misc]
    """OffsetCommit v9 of one member (no fallback: the broker must speak v9, Kafka 3.7+)."""

    API_KEY = 8

    def __init__(
        self, group_id: str, member_id: str, member_epoch: int, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
    ) -> None:
        by_topic: dict[str, list[tuple[Any, ...]]] = {}
        for tp, committed in sorted(offsets.items()):
            offset, metadata = (committed, "") if isinstance(committed, int) else committed
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset, -1, metadata, {}))
        self._fields: tuple[Any, ...] = (group_id, member_epoch, member_id, None, [(t, ps, {}) for t, ps in by_topic.items()], {})

    def build(self, request_struct_class: type[_CommitStruct]) -> _CommitStruct:
        return request_struct_class(*self._fields)


def commit_errors(response: Response) -> dict[TopicPartition, int]:
    """The partitions of an OffsetCommit answer that carry an error, with its code."""
    return {
        TopicPartition(name, partition): code
        for name, partitions, _ in response.topics
        for partition, code, _ in partitions
        if code
    }
