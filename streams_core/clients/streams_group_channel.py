"""StreamsGroupChannel: sends streams group heartbeats and describes to the group's coordinator.

Through an aiokafka admin client's connections (as `stable_offsets.py` sends OffsetFetch v7): aiokafka
negotiates the API version per connection, and our request classes carry version 0 only, which Kafka
4.2+ brokers speak. A coordinator error or a broken connection forgets the coordinator, so the next
exchange finds it again; interpreting the answer is `StreamsGroupMembership`'s job.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from aiokafka.errors import GroupAuthorizationFailedError, KafkaError

from streams_core.clients.streams_group_membership import COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, StreamsGroupMembership
from streams_core.clients.streams_group_offset_commit import MemberOffsetCommitRequest, commit_errors
from streams_core.clients.streams_group_protocol import (
    HeartbeatRequestData,
    HeartbeatResponseData,
    StreamsGroupDescription,
    decode_describe,
    decode_heartbeat,
    describe_request,
    heartbeat_request,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from aiokafka.admin import AIOKafkaAdminClient

    from streams_core.common.offset_and_metadata import OffsetAndMetadata
    from streams_core.common.topic_partition import TopicPartition

__all__ = ["OwnedStreamsGroupChannel", "StreamsGroupChannel"]

log = logging.getLogger(__name__)


class StreamsGroupChannel:
    """One group's heartbeat and describe exchanges over a started `AIOKafkaAdminClient` (not owned)."""

    __slots__ = ("_admin", "_coordinator", "group_id")

    def __init__(self, admin: AIOKafkaAdminClient, group_id: str) -> None:
        self._admin = admin
        self.group_id = group_id
        self._coordinator: int | None = None

    async def _coordinator_id(self) -> int:
        if self._coordinator is None:
            self._coordinator = await self._admin.find_coordinator(self.group_id)
        return self._coordinator

    async def heartbeat(self, data: HeartbeatRequestData) -> HeartbeatResponseData:
        """Send one heartbeat; raises aiokafka's `KafkaError` when no answer came (the coordinator is forgotten)."""
        try:
            node = await self._coordinator_id()
            response = decode_heartbeat(await self._admin._send_request(heartbeat_request(data), node))  # no public send
        except GroupAuthorizationFailedError as exc:  # FindCoordinator refused: no READ on the group, an answer for good
            self._coordinator = None
            return _refused(data, GROUP_AUTHORIZATION_FAILED, f"FindCoordinator: {exc}")
        except KafkaError:
            self._coordinator = None
            raise
        if response.error_code in (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE):
            self._coordinator = None
        return response

    async def heartbeat_once(self, membership: StreamsGroupMembership) -> HeartbeatResponseData | None:
        """Send the membership's next heartbeat, if any, and feed it the answer (or the failure, re-raised)."""
        data = membership.heartbeat_request()
        if data is None:
            return None
        try:
            response = await self.heartbeat(data)
        except BaseException:
            membership.on_request_failed()
            raise
        membership.on_response(response)
        return response

    async def describe(self) -> StreamsGroupDescription:
        """The group as its coordinator describes it (its `error_code` says if it does not exist)."""
        try:
            node = await self._coordinator_id()
            (description,) = decode_describe(await self._admin._send_request(describe_request([self.group_id]), node))
        except KafkaError:
            self._coordinator = None
            raise
        if description.error_code in (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE):
            self._coordinator = None
        return description

    async def commit_offsets(
        self, membership: StreamsGroupMembership, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
    ) -> dict[TopicPartition, int]:
        """Commit offsets as this member (its id and current epoch); returns the partitions refused, with the error.

        STALE_MEMBER_EPOCH (113) means the member's epoch is behind the group's: heartbeat, then retry.
        """
        request = MemberOffsetCommitRequest(self.group_id, membership.member_id, membership.member_epoch, offsets)
        try:
            node = await self._coordinator_id()
            errors = commit_errors(await self._admin._send_request(request, node))
        except KafkaError:
            self._coordinator = None
            raise
        if any(code in (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) for code in errors.values()):
            self._coordinator = None
        return errors


GROUP_AUTHORIZATION_FAILED = 30


def _refused(data: HeartbeatRequestData, error_code: int, message: str) -> HeartbeatResponseData:
    """An answer carrying `error_code`, for a refusal that came before the heartbeat reached the group."""
    return HeartbeatResponseData(
        error_code=error_code, error_message=message, member_id=data.member_id, member_epoch=data.member_epoch,
        heartbeat_interval_ms=0, acceptable_recovery_lag=0, task_offset_interval_ms=0, status=None, tasks=None,
        endpoint_information_epoch=data.endpoint_information_epoch, endpoints=None,
    )


class OwnedStreamsGroupChannel(StreamsGroupChannel):
    """A channel that owns its admin client: a member's `StreamsGroupTransport` (started and closed with it)."""

    __slots__ = ()

    async def start(self) -> None:
        await self._admin.start()

    async def close(self) -> None:
        await self._admin.close()
