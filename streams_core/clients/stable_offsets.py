"""Committed offsets read with KIP-447's `require_stable`, which aiokafka's OffsetFetch (v3) lacks.

`commit_transaction()` returns once the transaction coordinator has decided, before the markers
reach `__consumer_offsets`; until they do, a plain OffsetFetch answers the offset from before the
transaction. OffsetFetch v7 with `require_stable` answers UNSTABLE_OFFSET_COMMIT for a partition
with a pending transactional commit instead, and the reader asks again until every partition is
stable: an offset read here is never older than a transaction that has committed.

`fetch_stable_offsets` reads through an admin client (the batch run's end check);
`read_committed_stably` makes a group consumer's own reads (where a new owner starts) stable.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeAlias

from aiokafka import OffsetAndMetadata
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.errors import KafkaError, KafkaTimeoutError, for_code
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import Boolean, CompactArray, CompactString, Int16, Int32, Int64, Schema, TaggedFields

from streams_core.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient

__all__ = ["fetch_stable_offsets", "read_committed_stably"]

_NONE = 0
_UNKNOWN_TOPIC_OR_PARTITION = 3
_COORDINATOR_LOAD_IN_PROGRESS = 14
_COORDINATOR_NOT_AVAILABLE = 15
_NOT_COORDINATOR = 16
_UNSTABLE_OFFSET_COMMIT = 88
_RETRIABLE = frozenset({_COORDINATOR_LOAD_IN_PROGRESS, _COORDINATOR_NOT_AVAILABLE, _NOT_COORDINATOR, _UNSTABLE_OFFSET_COMMIT})
_BACKOFF_S = 0.02


class OffsetFetchResponse_v7(Response):  # type: ignore[misc]  # aiokafka's types are Any to mypy
    API_KEY = 9
    API_VERSION = 7
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "topics",
            CompactArray(
                ("name", CompactString("utf-8")),
                (
                    "partitions",
                    CompactArray(
                        ("partition_index", Int32),
                        ("committed_offset", Int64),
                        ("committed_leader_epoch", Int32),
                        ("metadata", CompactString("utf-8")),
                        ("error_code", Int16),
                        ("tags", TaggedFields),
                    ),
                ),
                ("tags", TaggedFields),
            ),
        ),
        ("error_code", Int16),
        ("tags", TaggedFields),
    )


class OffsetFetchRequest_v7(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 9
    API_VERSION = 7
    RESPONSE_TYPE = OffsetFetchResponse_v7
    SCHEMA = Schema(
        ("group_id", CompactString("utf-8")),
        (
            "topics",
            CompactArray(
                ("name", CompactString("utf-8")),
                ("partition_indexes", CompactArray(Int32)),
                ("tags", TaggedFields),
            ),
        ),
        ("require_stable", Boolean),
        ("tags", TaggedFields),
    )


_StableStruct: TypeAlias = OffsetFetchRequest_v7


class StableOffsetFetchRequest(Request[_StableStruct]):  # type: ignore[misc]
    """OffsetFetch for one group's partitions with `require_stable` set (v7 only: no fallback)."""

    API_KEY = 9

    def __init__(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        self._group_id = group_id
        self._topics: list[tuple[str, list[int], dict[int, bytes]]] = [(topic, sorted(ps), {}) for topic, ps in sorted(by_topic.items())]

    def build(self, request_struct_class: type[_StableStruct]) -> _StableStruct:
        return request_struct_class(self._group_id, self._topics, True, {})


async def fetch_stable_offsets(
    admin: AIOKafkaAdminClient, group_id: str, partitions: Iterable[TopicPartition], *, timeout_s: float = 30.0
) -> dict[TopicPartition, int | None]:
    """`group_id`'s committed offset of each partition (None where none), once no transaction holds one back.

    Retries while the coordinator moves or loads, or a partition's commit is pending; raises
    `KafkaTimeoutError` if that lasts `timeout_s`, and the error of any other failure.
    """
    wanted = list(partitions)
    if not wanted:
        return {}
    deadline = time.monotonic() + timeout_s
    request = StableOffsetFetchRequest(group_id, wanted)
    found: dict[TopicPartition, tuple[int, str]]
    while True:
        try:
            coordinator = await admin.find_coordinator(group_id)
            response = await admin._send_request(request, coordinator)  # the admin client has no public send
        except KafkaError as exc:
            if not exc.retriable:
                raise
            code, found = _COORDINATOR_NOT_AVAILABLE, {}
        else:
            code, found = _read(response)
        if code == _NONE:
            return {tp: found[tp][0] if tp in found else None for tp in wanted}
        if code not in _RETRIABLE:
            raise for_code(code)(f"offset fetch for group {group_id!r}")
        if time.monotonic() > deadline:
            raise KafkaTimeoutError(f"committed offsets of group {group_id!r} not stable within {timeout_s} s (error {code})")
        await asyncio.sleep(_BACKOFF_S)


def _read(response: Response) -> tuple[int, dict[TopicPartition, tuple[int, str]]]:
    """The first error code of the answer (group-level first) and the offsets it holds (>= 0),
    each with its metadata."""
    code: int = response.error_code
    found: dict[TopicPartition, tuple[int, str]] = {}
    for topic, partitions, _ in response.topics:
        for partition, offset, _epoch, metadata, error_code, _ in partitions:
            if error_code and error_code != _UNKNOWN_TOPIC_OR_PARTITION and not code:
                code = error_code
            if offset >= 0:
                found[TopicPartition(topic, partition)] = (offset, metadata or "")
    return code, found


class UnstableOffsetCommitError(KafkaError):  # type: ignore[misc]
    """UNSTABLE_OFFSET_COMMIT (88), which aiokafka does not know: retriable, a transaction holds the offset."""

    errno = _UNSTABLE_OFFSET_COMMIT
    retriable = True


def read_committed_stably(consumer: AIOKafkaConsumer) -> None:
    """Make a started group consumer read committed offsets with `require_stable`, as Java's does under
    read_committed: a partition's new owner must not start from an offset older than the last
    transaction its old owner committed (aiokafka fetches them by itself, while the rebalance
    listener still runs, so nothing the listener does first can order the read).

    Replaces the fetch of the consumer's aiokafka `GroupCoordinator` (aiokafka is pinned; the
    broker tests of `tests/integration/test_stable_offsets.py` pin this down). The coordinator
    retries a retriable error after `retry.backoff.ms`.
    """
    if consumer._group_id is None:  # no group, no committed offsets
        return
    coordinator = consumer._coordinator  # created by start(); aiokafka has no hook for this
    if not hasattr(coordinator, "_do_fetch_commit_offsets"):
        raise RuntimeError("this aiokafka's GroupCoordinator has no _do_fetch_commit_offsets to make stable")

    async def fetch(partitions: Iterable[KafkaTopicPartition]) -> dict[KafkaTopicPartition, OffsetAndMetadata]:
        wanted = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
        response = await coordinator._send_req(StableOffsetFetchRequest(coordinator.group_id, wanted))
        code, found = _read(response)
        if code == _NOT_COORDINATOR:
            coordinator.coordinator_dead()
        if code == _UNSTABLE_OFFSET_COMMIT:
            raise UnstableOffsetCommitError(f"a transaction holds back committed offsets of {wanted}")
        if code != _NONE:
            raise for_code(code)(f"offset fetch for group {coordinator.group_id!r}")
        return {KafkaTopicPartition(tp.topic, tp.partition): OffsetAndMetadata(*committed) for tp, committed in found.items()}

    coordinator._do_fetch_commit_offsets = fetch
