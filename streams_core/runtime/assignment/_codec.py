"""Wire format shared by SubscriptionInfo and AssignmentInfo: a version header, then JSON.

Header: two big-endian int32, the version the data is written in and the latest version the
sender supports (Kafka's layout, so a leader can read the versions of data it cannot parse).
Body: compact UTF-8 JSON; unknown keys are ignored, so a version can grow optional fields.
"""

from __future__ import annotations

import json
import struct
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment.errors import AssignmentError, UnsupportedVersionError

_HEADER = struct.Struct(">ii")


def encode_envelope(version: int, latest_supported_version: int, body: Mapping[str, Any]) -> bytes:
    payload = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    return _HEADER.pack(version, latest_supported_version) + payload


def read_versions(data: bytes, kind: str) -> tuple[int, int]:
    """(version, latest supported version) of encoded data; AssignmentError if truncated."""
    if len(data) < _HEADER.size:
        raise AssignmentError(f"{kind}: {len(data)} bytes is too short for the version header")
    version, latest = _HEADER.unpack_from(data)
    if version < 1:
        raise AssignmentError(f"{kind}: invalid version {version}")
    return version, latest


def decode_envelope(data: bytes, kind: str, our_latest: int) -> tuple[int, int, dict[str, Any]]:
    """Check the header and parse the body; UnsupportedVersionError for future versions."""
    version, latest = read_versions(data, kind)
    if version > our_latest:
        raise UnsupportedVersionError.for_versions(kind, version, latest, our_latest)
    try:
        body = json.loads(data[_HEADER.size:])
    except ValueError as exc:
        raise AssignmentError(f"{kind} version {version}: malformed body: {exc}") from exc
    if not isinstance(body, dict):
        raise AssignmentError(f"{kind} version {version}: body is not an object")
    return version, latest, body


def encode_tasks(tasks: Iterable[TaskId]) -> list[str]:
    return [str(task) for task in sorted(tasks)]


def decode_tasks(items: Iterable[str]) -> frozenset[TaskId]:
    return frozenset(TaskId.parse(item) for item in items)


def encode_partitions(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: defaultdict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(partitions):
        by_topic[topic].append(partition)
    return dict(by_topic)


def decode_partitions(by_topic: Mapping[str, Iterable[int]]) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, int(p)) for topic, ps in by_topic.items() for p in ps)
