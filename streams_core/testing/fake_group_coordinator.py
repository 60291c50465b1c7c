"""The fake cluster's group coordinator: members, eager rebalances, committed offsets.

A join or leave starts a rebalance: every member revokes everything, the oldest member (the
leader) assigns through its own assignor (round-robin for a plain consumer group), and each
member receives its partitions. An offset commit from a member no longer in the group fails, and
from an old generation is retriable while a rebalance is under way, as Kafka's OffsetCommit is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Protocol

from streams_core import clients
from streams_core.clients.ports import GroupAssignor
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.topic_partition import TopicPartition
from streams_core.testing.fake_log import as_committed, offsets_of
from streams_core.testing.fake_topics import FakeTopics

__all__ = ["FakeGroupCoordinator", "GroupMember"]

log = logging.getLogger(__name__)


class GroupMember(Protocol):
    """What the group coordinator needs of a subscribed consumer (`FakeConsumer`)."""

    member_id: str
    topics: tuple[str, ...]
    assignor: GroupAssignor | None

    async def _revoke_for_rebalance(self) -> None: ...

    async def _receive_assignment(
        self, generation: int, partitions: frozenset[TopicPartition], user_data: bytes | None
    ) -> None: ...


class _Group:
    """A consumer group: its members (oldest first), generation, and committed offsets."""

    __slots__ = ("committed", "generation", "id", "members", "pending", "rebalancing", "synced", "task")

    def __init__(self, group_id: str) -> None:
        self.id = group_id
        self.members: dict[str, GroupMember] = {}
        self.generation = 0
        self.synced: dict[str, int] = {}
        """Generation each member last received an assignment in."""
        self.committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self.pending = False
        self.rebalancing = False
        self.task: asyncio.Task[None] | None = None


class FakeGroupCoordinator(FakeTopics):
    """Consumer groups over the topics: who is in each, its generation, what it has committed."""

    def __init__(self, *, default_partitions: int = 1) -> None:
        super().__init__(default_partitions=default_partitions)
        self._groups: dict[str, _Group] = {}

    def _group(self, group_id: str) -> _Group:
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = _Group(group_id)
        return group

    def committed(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's committed offsets (next offset to read per partition)."""
        group = self._groups.get(group_id)
        return offsets_of(group.committed) if group else {}

    def committed_with_metadata(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets with the metadata each was committed with."""
        group = self._groups.get(group_id)
        return dict(group.committed) if group else {}

    def members(self, group_id: str) -> list[str]:
        group = self._groups.get(group_id)
        return list(group.members) if group else []

    def generation(self, group_id: str) -> int:
        group = self._groups.get(group_id)
        return group.generation if group else 0

    def group_stable(self, group_id: str) -> bool:
        """No rebalance is under way or pending, and every member has its assignment."""
        group = self._groups.get(group_id)
        if group is None:
            return True
        return (
            not group.rebalancing and not group.pending
            and all(group.synced.get(m) == group.generation for m in group.members)
        )

    def _join(self, group_id: str, member: GroupMember) -> None:
        group = self._group(group_id)
        group.members[member.member_id] = member
        self.log_event("join", member.member_id, group=group_id)
        self._request_rebalance(group)

    def _leave(self, group_id: str, member_id: str, *, reason: str = "leave") -> None:
        group = self._groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        del group.members[member_id]
        group.synced.pop(member_id, None)
        self.log_event(reason, member_id, group=group_id)
        if group.members:
            self._request_rebalance(group)
        else:
            group.generation += 1

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self._groups.get(group_id)
        return group is not None and member_id in group.members

    def kick(self, group_id: str, member_id: str) -> None:
        """Expire a member's session: the others rebalance without it; its next commit fails."""
        self._leave(group_id, member_id, reason="kicked")

    def _request_rebalance(self, group: _Group) -> None:
        group.pending = True
        if group.task is None or group.task.done():
            group.task = asyncio.get_running_loop().create_task(self._run_rebalances(group))

    async def _run_rebalances(self, group: _Group) -> None:
        while group.pending and group.members:
            group.rebalancing = True
            try:
                await self._rebalance(group)
            except Exception:
                log.exception("rebalance of group %s failed", group.id)
            finally:
                group.rebalancing = False
                self.notify()

    async def _rebalance(self, group: _Group) -> None:
        """Eager: revoke everything on every member, the leader assigns, each member receives."""
        await asyncio.gather(*(m._revoke_for_rebalance() for m in list(group.members.values())))
        group.pending = False
        members = dict(group.members)
        if not members:
            return
        group.generation += 1
        generation = group.generation
        leader_id, leader = next(iter(members.items()))
        topics = sorted({t for m in members.values() for t in m.topics})
        counts = {t: len(self._topics[t]) for t in topics if t in self._topics}
        assignments: dict[str, tuple[frozenset[TopicPartition], bytes | None]] = {}
        if leader.assignor is not None:
            result = leader.assignor.assign(counts, {mid: self._subscription(m) for mid, m in members.items()})
            for mid, assignment in result.items():
                assignments[mid] = (frozenset(TopicPartition(t, p) for t, p in assignment.partitions), assignment.user_data)
        else:  # a plain consumer group: round-robin
            tps = [TopicPartition(t, p) for t in topics for p in range(counts.get(t, 0))]
            ids = list(members)
            for mid in ids:
                assignments[mid] = (frozenset(tp for i, tp in enumerate(tps) if ids[i % len(ids)] == mid), None)
        self.log_event(
            "rebalance", leader_id, group=group.id, generation=generation, members=list(members),
            assignment={mid: sorted(a[0]) for mid, a in assignments.items()},
        )

        async def receive(mid: str, member: GroupMember) -> None:
            if group.members.get(mid) is not member:
                return  # left meanwhile
            partitions, user_data = assignments.get(mid, (frozenset(), None))
            group.synced[mid] = generation
            await member._receive_assignment(generation, partitions, user_data)

        await asyncio.gather(*(receive(mid, m) for mid, m in members.items()))

    @staticmethod
    def _subscription(member: GroupMember) -> bytes:
        assert member.assignor is not None
        return member.assignor.subscription()

    def _check_commit(self, group_id: str, member_id: str, generation: int) -> None:
        """Kafka's OffsetCommit checks: an unknown member fails; an old generation is retriable mid-rebalance."""
        group = self._group(group_id)
        if member_id not in group.members:
            raise clients.CommitFailedError()
        if generation != group.generation:
            if group.rebalancing or group.pending:
                raise clients.RebalanceInProgressError(f"group {group_id} is rebalancing")
            raise clients.CommitFailedError()

    def _commit(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int], client: str) -> None:
        committed = as_committed(offsets)
        self._group(group_id).committed.update(committed)
        self.log_event("commit", client, group=group_id, offsets=offsets_of(committed))

    async def wait_stable(self, group_id: str, timeout: float = 5.0) -> None:
        """Wait until the group has no rebalance under way (TimeoutError otherwise)."""
        async with asyncio.timeout(timeout):
            while not self.group_stable(group_id):
                await self._wait_for_change(0.05)
