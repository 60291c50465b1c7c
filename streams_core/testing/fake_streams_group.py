"""The streams group protocol (KIP-1071) over a `FakeKafkaCluster`: one fake coordinator per group id.

`FakeKafkaClientSupplier` gives a main consumer under `group.protocol=streams` a
`FakeStreamsGroupTransport`: heartbeats go to the cluster's `FakeStreamsGroupCoordinator` of the
group (shared by every instance on the cluster, as a broker's), which reads the source topics'
partition counts from the cluster; offsets are committed into the cluster's group offsets, checked
against the member's epoch as the broker's OffsetCommit v9 is (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from weakref import WeakKeyDictionary

from streams_core.clients.streams_group_fake_coordinator import FakeStreamsGroupCoordinator
from streams_core.clients.streams_group_membership import UNKNOWN_MEMBER_ID, StreamsGroupMembership
from streams_core.clients.streams_group_offset_commit import STALE_MEMBER_EPOCH
from streams_core.clients.streams_group_protocol import HeartbeatRequestData, HeartbeatResponseData, StreamsGroupDescription
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.topic_partition import TopicPartition
from streams_core.testing.fake_kafka_cluster import FakeKafkaCluster

__all__ = ["FAKE_HEARTBEAT_INTERVAL_MS", "FakeStreamsGroupTransport", "fake_streams_group"]

FAKE_HEARTBEAT_INTERVAL_MS = 50
"""The fake broker's heartbeat interval: short, so that unit tests rebalance in a few loop turns."""

_groups: WeakKeyDictionary[FakeKafkaCluster, dict[str, FakeStreamsGroupCoordinator]] = WeakKeyDictionary()


def fake_streams_group(cluster: FakeKafkaCluster, group_id: str) -> FakeStreamsGroupCoordinator:
    """The coordinator of `group_id` on `cluster` (made on first use)."""
    groups = _groups.setdefault(cluster, {})
    if group_id not in groups:
        groups[group_id] = FakeStreamsGroupCoordinator(group_id, {}, heartbeat_interval_ms=FAKE_HEARTBEAT_INTERVAL_MS)
    return groups[group_id]


class FakeStreamsGroupTransport:
    """A member's way to its group's fake coordinator (`StreamsGroupTransport`)."""

    __slots__ = ("client_id", "cluster", "group_id", "in_flight", "round_trip_s", "sent")

    def __init__(self, cluster: FakeKafkaCluster, group_id: str, client_id: str) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.client_id = client_id
        self.in_flight = 0
        self.round_trip_s = 0.0  # a test may slow the exchange down to catch concurrent heartbeats
        self.sent: list[tuple[float, HeartbeatRequestData]] = []  # (time.monotonic(), heartbeat)

    @property
    def coordinator(self) -> FakeStreamsGroupCoordinator:
        return fake_streams_group(self.cluster, self.group_id)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def heartbeat(self, data: HeartbeatRequestData) -> HeartbeatResponseData:
        """One exchange; a second heartbeat while one is in flight breaks KIP-1071's rule and raises."""
        if self.in_flight:
            raise AssertionError(f"{self.client_id}: a second streams group heartbeat while one is in flight")
        self.in_flight += 1
        self.sent.append((time.monotonic(), data))
        try:
            await asyncio.sleep(self.round_trip_s)  # a round trip: other tasks run meanwhile
            return self._answer(data)
        finally:
            self.in_flight -= 1

    def _answer(self, data: HeartbeatRequestData) -> HeartbeatResponseData:
        fault = self.cluster._fault("streams_group_heartbeat", self.client_id)
        if fault is not None:
            raise fault
        coordinator = self.coordinator
        topology = coordinator.topology or data.topology
        if topology is not None:
            sources = {t for sub in topology.subtopologies for t in sub.source_topics}
            counts = {t: self.cluster.partition_count(t) for t in sources}
            coordinator.partition_counts = {t: n for t, n in counts.items() if n is not None}
        return coordinator.heartbeat(data)

    async def commit_offsets(
        self, membership: StreamsGroupMembership, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
    ) -> dict[TopicPartition, int]:
        await asyncio.sleep(0)
        fault = self.cluster._fault("commit", self.client_id)
        if fault is not None:
            raise fault
        member = self.coordinator.members.get(membership.member_id)
        if member is None:
            return dict.fromkeys(offsets, UNKNOWN_MEMBER_ID)
        if membership.member_epoch != member.epoch:
            return dict.fromkeys(offsets, STALE_MEMBER_EPOCH)
        self.cluster._commit(self.group_id, offsets, self.client_id)
        return {}

    async def describe(self) -> StreamsGroupDescription | None:
        return None
