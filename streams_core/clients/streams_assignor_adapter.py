"""The aiokafka side of the Streams assignor: translates aiokafka's structs for the runtime's assignor.

aiokafka calls `metadata`, `assign` and `on_assignment` on the instance it was given (the base
class declares them as classmethods, but per-instance state works), so each stream thread passes
its own adapter around its own `StreamsPartitionAssignor`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

from streams_core.clients.ports import GroupAssignor

__all__ = ["StreamsAssignorAdapter"]


class StreamsAssignorAdapter(AbstractPartitionAssignor):  # type: ignore[misc]  # aiokafka is untyped
    """The single assignor a stream thread's consumer is given (protocol name "stream")."""

    name = "stream"
    version = 0

    def __init__(self, assignor: GroupAssignor) -> None:
        self._assignor = assignor

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), self._assignor.subscription())

    def assign(
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        topics = {topic for metadata in members.values() for topic in metadata.subscription}
        counts = {}
        for topic in topics:
            partitions = cluster.partitions_for_topic(topic)
            if partitions:
                counts[topic] = len(partitions)
        result = self._assignor.assign(counts, {member: m.user_data for member, m in members.items()})
        out = {}
        for member, assignment in result.items():
            by_topic: defaultdict[str, list[int]] = defaultdict(list)
            for topic, partition in assignment.partitions:
                by_topic[topic].append(partition)
            out[member] = ConsumerProtocolMemberAssignment(
                self.version, sorted((t, sorted(p)) for t, p in by_topic.items()), assignment.user_data
            )
        return out

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        self._assignor.on_assignment(assignment.user_data)
