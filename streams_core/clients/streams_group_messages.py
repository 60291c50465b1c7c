"""Wire schemas of KIP-1071's StreamsGroupHeartbeat (API 88) and StreamsGroupDescribe (API 89), version 0.

Built on aiokafka's protocol types, as `stable_offsets.py` builds OffsetFetch v7: aiokafka knows neither
API. Both are flexible versions: compact strings and arrays, and every struct (nested ones too) ends in
tagged fields. Two encodings aiokafka lacks are added here: `uint16` (the endpoint port) and a nullable
struct (one signed byte, -1 for null and 1 before the struct's fields, as Kafka's generated code writes
it). Field order follows apache/kafka's `clients/src/main/resources/common/message/StreamsGroup*.json`;
Kafka 4.3.1 brokers support version 0 of both (checked with ApiVersions).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from io import BytesIO
from typing import Any, TypeAlias

from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int8,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

__all__ = [
    "STREAMS_GROUP_DESCRIBE_KEY",
    "STREAMS_GROUP_HEARTBEAT_KEY",
    "StreamsGroupDescribeRequest",
    "StreamsGroupDescribeRequest_v0",
    "StreamsGroupDescribeResponse_v0",
    "StreamsGroupHeartbeatRequest",
    "StreamsGroupHeartbeatRequest_v0",
    "StreamsGroupHeartbeatResponse_v0",
]

STREAMS_GROUP_HEARTBEAT_KEY = 88
STREAMS_GROUP_DESCRIBE_KEY = 89

_STR = CompactString("utf-8")


class UInt16(Schema):  # type: ignore[misc]  # aiokafka's types are Any to mypy
    """An unsigned 16-bit integer (big-endian): the `uint16` of Kafka's message definitions."""

    _format = struct.Struct(">H")

    def __init__(self) -> None:
        super().__init__()

    def encode(self, item: Any) -> bytes:
        return self._format.pack(item)

    def decode(self, data: BytesIO) -> Any:
        (value,) = self._format.unpack(data.read(2))
        return value

    def repr(self, value: Any) -> str:
        return repr(value)


class NullableStruct(Schema):  # type: ignore[misc]
    """A struct field that may be null: Int8 -1 for null, else Int8 1 and the struct's fields."""

    def encode(self, item: Sequence[Any] | None) -> bytes:
        if item is None:
            return bytes(Int8.encode(-1))
        return bytes(Int8.encode(1) + super().encode(item))

    def decode(self, data: BytesIO) -> Any:
        if Int8.decode(data) < 0:
            return None
        return super().decode(data)

    def repr(self, value: Any) -> str:
        return "NULL" if value is None else super().repr(value)


def _tags() -> tuple[str, Any]:
    return ("tags", TaggedFields)


_KEY_VALUE = CompactArray(("key", _STR), ("value", _STR), _tags())
_TOPIC_INFO = CompactArray(
    ("name", _STR), ("partitions", Int32), ("replication_factor", Int16), ("topic_configs", _KEY_VALUE), _tags()
)
_TASK_IDS = CompactArray(("subtopology_id", _STR), ("partitions", CompactArray(Int32)), _tags())
_TASK_OFFSETS = CompactArray(("subtopology_id", _STR), ("partition", Int32), ("offset", Int64), _tags())
_ENDPOINT_FIELDS: tuple[tuple[str, Any], ...] = (("host", _STR), ("port", UInt16()), _tags())
_TOPIC_PARTITIONS = CompactArray(("topic", _STR), ("partitions", CompactArray(Int32)), _tags())


class StreamsGroupHeartbeatResponse_v0(Response):  # type: ignore[misc]  # aiokafka's types are Any to mypy
    API_KEY = STREAMS_GROUP_HEARTBEAT_KEY
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        ("error_message", _STR),
        ("member_id", _STR),
        ("member_epoch", Int32),
        ("heartbeat_interval_ms", Int32),
        ("acceptable_recovery_lag", Int32),
        ("task_offset_interval_ms", Int32),
        ("status", CompactArray(("status_code", Int8), ("status_detail", _STR), _tags())),
        ("active_tasks", _TASK_IDS),
        ("standby_tasks", _TASK_IDS),
        ("warmup_tasks", _TASK_IDS),
        ("endpoint_information_epoch", Int32),
        (
            "partitions_by_user_endpoint",
            CompactArray(
                ("user_endpoint", Schema(*_ENDPOINT_FIELDS)),
                ("active_partitions", _TOPIC_PARTITIONS),
                ("standby_partitions", _TOPIC_PARTITIONS),
                _tags(),
            ),
        ),
        _tags(),
    )


class StreamsGroupHeartbeatRequest_v0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = STREAMS_GROUP_HEARTBEAT_KEY
    API_VERSION = 0
    RESPONSE_TYPE = StreamsGroupHeartbeatResponse_v0
    SCHEMA = Schema(
        ("group_id", _STR),
        ("member_id", _STR),
        ("member_epoch", Int32),
        ("endpoint_information_epoch", Int32),
        ("instance_id", _STR),
        ("rack_id", _STR),
        ("rebalance_timeout_ms", Int32),
        (
            "topology",
            NullableStruct(
                ("epoch", Int32),
                (
                    "subtopologies",
                    CompactArray(
                        ("subtopology_id", _STR),
                        ("source_topics", CompactArray(_STR)),
                        ("source_topic_regex", CompactArray(_STR)),
                        ("state_changelog_topics", _TOPIC_INFO),
                        ("repartition_sink_topics", CompactArray(_STR)),
                        ("repartition_source_topics", _TOPIC_INFO),
                        (
                            "copartition_groups",
                            CompactArray(
                                ("source_topics", CompactArray(Int16)),
                                ("source_topic_regex", CompactArray(Int16)),
                                ("repartition_source_topics", CompactArray(Int16)),
                                _tags(),
                            ),
                        ),
                        _tags(),
                    ),
                ),
                _tags(),
            ),
        ),
        ("active_tasks", _TASK_IDS),
        ("standby_tasks", _TASK_IDS),
        ("warmup_tasks", _TASK_IDS),
        ("process_id", _STR),
        ("user_endpoint", NullableStruct(*_ENDPOINT_FIELDS)),
        ("client_tags", _KEY_VALUE),
        ("task_offsets", _TASK_OFFSETS),
        ("task_end_offsets", _TASK_OFFSETS),
        ("shutdown_application", Boolean),
        _tags(),
    )


_ASSIGNMENT = Schema(("active_tasks", _TASK_IDS), ("standby_tasks", _TASK_IDS), ("warmup_tasks", _TASK_IDS), _tags())


class StreamsGroupDescribeResponse_v0(Response):  # type: ignore[misc]
    API_KEY = STREAMS_GROUP_DESCRIBE_KEY
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "groups",
            CompactArray(
                ("error_code", Int16),
                ("error_message", _STR),
                ("group_id", _STR),
                ("group_state", _STR),
                ("group_epoch", Int32),
                ("assignment_epoch", Int32),
                (
                    "topology",
                    NullableStruct(
                        ("epoch", Int32),
                        (
                            "subtopologies",
                            CompactArray(
                                ("subtopology_id", _STR),
                                ("source_topics", CompactArray(_STR)),
                                ("repartition_sink_topics", CompactArray(_STR)),
                                ("state_changelog_topics", _TOPIC_INFO),
                                ("repartition_source_topics", _TOPIC_INFO),
                                _tags(),
                            ),
                        ),
                        _tags(),
                    ),
                ),
                (
                    "members",
                    CompactArray(
                        ("member_id", _STR),
                        ("member_epoch", Int32),
                        ("instance_id", _STR),
                        ("rack_id", _STR),
                        ("client_id", _STR),
                        ("client_host", _STR),
                        ("topology_epoch", Int32),
                        ("process_id", _STR),
                        ("user_endpoint", NullableStruct(*_ENDPOINT_FIELDS)),
                        ("client_tags", _KEY_VALUE),
                        ("task_offsets", _TASK_OFFSETS),
                        ("task_end_offsets", _TASK_OFFSETS),
                        ("assignment", _ASSIGNMENT),
                        ("target_assignment", _ASSIGNMENT),
                        ("is_classic", Boolean),
                        _tags(),
                    ),
                ),
                ("authorized_operations", Int32),
                _tags(),
            ),
        ),
        _tags(),
    )


class StreamsGroupDescribeRequest_v0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = STREAMS_GROUP_DESCRIBE_KEY
    API_VERSION = 0
    RESPONSE_TYPE = StreamsGroupDescribeResponse_v0
    SCHEMA = Schema(("group_ids", CompactArray(_STR)), ("include_authorized_operations", Boolean), _tags())


_HeartbeatStruct: TypeAlias = StreamsGroupHeartbeatRequest_v0
_DescribeStruct: TypeAlias = StreamsGroupDescribeRequest_v0


class StreamsGroupHeartbeatRequest(Request[_HeartbeatStruct]):  # type: ignore[misc]
    """A StreamsGroupHeartbeat whose field values are given in schema order (see `streams_group_protocol`)."""

    API_KEY = STREAMS_GROUP_HEARTBEAT_KEY

    def __init__(self, fields: tuple[Any, ...]) -> None:
        self.fields = fields

    def build(self, request_struct_class: type[_HeartbeatStruct]) -> _HeartbeatStruct:
        return request_struct_class(*self.fields)


class StreamsGroupDescribeRequest(Request[_DescribeStruct]):  # type: ignore[misc]
    """StreamsGroupDescribe of some groups."""

    API_KEY = STREAMS_GROUP_DESCRIBE_KEY

    def __init__(self, group_ids: Sequence[str], include_authorized_operations: bool = False) -> None:
        self.group_ids = list(group_ids)
        self.include_authorized_operations = include_authorized_operations

    def build(self, request_struct_class: type[_DescribeStruct]) -> _DescribeStruct:
        return request_struct_class(self.group_ids, self.include_authorized_operations, {})
