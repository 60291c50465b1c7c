"""StreamsPartitionAssignor: one stream thread's side of the group protocol, without aiokafka.

Each thread's consumer carries one. It says what the thread sends in its JoinGroup (process id,
`application.server`, tasks it owned and tasks with local state with their offset sums),
computes the whole group's assignment when its consumer is the leader, and keeps the
AssignmentInfo its member receives. The aiokafka adapter in `streams_core.clients` calls it.

KIP-441 needs the changelog end offsets on the leader, but aiokafka calls `assign()`
synchronously: so every member fetches them just before it joins (`refresh_end_offsets`, from
the rebalance listener's revocation callback) and the leader uses the latest it fetched. When
the leader asks for a probing rebalance, `on_assignment` schedules it on the event loop.

Under `group.protocol=streams` the broker assigns: the same object is the thread's
`StreamsGroupAssignor` (clients/ports.py), saying what the member sends when it joins
(`streams_group_member_info`) and turning the broker's tasks and endpoints into the same
`AssignmentInfo` (`on_streams_group_assignment`), so the rest of the thread does not know which
protocol runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from streams_core.clients.streams_group_membership import MemberInfo
from streams_core.clients.streams_group_protocol import EndpointPartitions, GroupStatus, TaskAssignment
from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment import (
    AssignmentConfigs,
    AssignmentInfo,
    MemberAssignment,
    SubscriptionInfo,
    compute_group_assignment,
)
from streams_core.runtime.assignment.streams_group_assignment import streams_group_assignment_info, task_partitions
from streams_core.runtime.assignment.streams_group_topology import streams_group_topology
from streams_core.runtime.topology_metadata import TopologyMetadata

__all__ = ["StreamsPartitionAssignor", "TaskStates"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TaskStates:
    """What a thread reports for stickiness: tasks it ran, tasks with state on disk, their offset sums."""

    prev_active: frozenset[TaskId] = frozenset()
    with_local_state: frozenset[TaskId] = frozenset()
    offset_sums: Mapping[TaskId, int] = field(default_factory=dict)


class StreamsPartitionAssignor:
    """Subscription, leader assignment and received assignment of one stream thread."""

    def __init__(
        self,
        topology: TopologyMetadata,
        *,
        process_id: str,
        application_server: str,
        num_standby_replicas: int,
        task_states: Callable[[], TaskStates],
        acceptable_recovery_lag: int = 10_000,
        max_warmup_replicas: int = 2,
        probing_rebalance_interval_ms: int = 600_000,
        request_rebalance: Callable[[], None] | None = None,
        log_prefix: str = "",
        replication_factor: int = -1,
        window_additional_retention_ms: int = 86_400_000,
        rebalance_timeout_ms: int = 300_000,
        topic_defaults: Mapping[str, str] = MappingProxyType({}),
    ) -> None:
        self.topology = topology
        self.process_id = process_id
        self.application_server = application_server
        self.configs = AssignmentConfigs(num_standby_replicas, acceptable_recovery_lag, max_warmup_replicas)
        self.probing_rebalance_interval_ms = probing_rebalance_interval_ms
        self._request_rebalance = request_rebalance
        self._probing_timer: asyncio.TimerHandle | None = None
        self.changelog_end_offsets: dict[TopicPartition, int] = {}
        """The latest end offsets of the changelog partitions this member fetched (for the leader)."""
        self._task_states = task_states
        self._log_prefix = log_prefix
        self._topic_configs = (replication_factor, window_additional_retention_ms, rebalance_timeout_ms, dict(topic_defaults))
        self.assignment: AssignmentInfo | None = None
        self.shutdown_requested = False
        self.partition_counts: dict[str, int] = {}
        self.is_leader = False
        """Whether this member computed the group's assignment in the latest rebalance."""

    def subscription(self) -> bytes:
        """This member's SubscriptionInfo, encoded for the JoinGroup user data."""
        states = self._task_states()
        self.is_leader = False
        return SubscriptionInfo(
            process_id=self.process_id,
            user_endpoint=self.application_server,
            prev_active_tasks=states.prev_active,
            standby_tasks=states.with_local_state,
            task_offset_sums=dict(states.offset_sums),
            shutdown_requested=self.shutdown_requested,
        ).encode()

    def assign(self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, bytes]) -> dict[str, MemberAssignment[AssignmentInfo]]:
        """The leader's assignment of every member (synchronous: aiokafka awaits nothing here)."""
        self.partition_counts = dict(partition_counts)
        self.is_leader = True
        result = compute_group_assignment(
            subscriptions,
            self.topology.subtopologies,
            partition_counts,
            copartition_groups=self.topology.copartition_groups,
            stateful_subtopologies=self.topology.stateful_subtopologies,
            configs=self.configs,
            task_end_offset_sums=self.task_end_offset_sums(),
            probing_rebalance_at_ms=time.time_ns() // 1_000_000 + self.probing_rebalance_interval_ms,
            leader_process_id=self.process_id,
        )
        probing = any(a.info.next_scheduled_rebalance_ms for a in result.values())
        log.info(
            "%sassigned %d members%s: active %s, standby %s",
            self._log_prefix,
            len(result),
            f" (warm-ups pending, probing rebalance in {self.probing_rebalance_interval_ms} ms)" if probing else "",
            {m: sorted(str(t) for t in a.info.active_tasks) for m, a in result.items()},
            {m: sorted(str(t) for t in a.info.standby_tasks) for m, a in result.items()},
        )
        return result

    def task_end_offset_sums(self) -> dict[TaskId, int]:
        """Per stateful task, the sum of the known end offsets of its changelog partitions."""
        sums: dict[TaskId, int] = {}
        subtopology_of = {spec.topic: spec.subtopology for spec in self.topology.changelogs.values()}
        for tp, offset in self.changelog_end_offsets.items():
            subtopology = subtopology_of.get(tp.topic)
            if subtopology is not None:
                task = TaskId(subtopology, tp.partition)
                sums[task] = sums.get(task, 0) + offset
        return sums

    async def refresh_end_offsets(
        self,
        partitions_for: Callable[[str], Awaitable[set[int]]],
        end_offsets: Callable[[Iterable[TopicPartition]], Awaitable[Mapping[TopicPartition, int]]],
    ) -> None:
        """Fetch the end offsets of every changelog partition; on failure keep the last ones (logged)."""
        topics = sorted({spec.topic for spec in self.topology.changelogs.values()})
        if not topics:
            return
        try:
            partitions = [TopicPartition(t, p) for t in topics for p in sorted(await partitions_for(t))]
            self.changelog_end_offsets = dict(await end_offsets(partitions))
        except Exception as exc:
            log.warning("%scannot fetch changelog end offsets for task lags (%r); using the last known", self._log_prefix, exc)

    def on_assignment(self, user_data: bytes) -> None:
        """Keep what this member received; errors are raised later by the thread, not inside aiokafka.

        If the leader scheduled a probing rebalance for this member, arm a timer for it (replacing
        any earlier one: every assignment carries the current schedule).
        """
        self.assignment = AssignmentInfo.decode(user_data)
        self.cancel_probing_rebalance()
        at_ms = self.assignment.next_scheduled_rebalance_ms
        if at_ms and self._request_rebalance is not None:
            delay_s = max(0.0, (at_ms - time.time_ns() // 1_000_000) / 1000)
            try:
                self._probing_timer = asyncio.get_running_loop().call_later(delay_s, self._probe)
            except RuntimeError:
                log.warning("%sno event loop to schedule the probing rebalance on", self._log_prefix)

    def cancel_probing_rebalance(self) -> None:
        if self._probing_timer is not None:
            self._probing_timer.cancel()
            self._probing_timer = None

    def _probe(self) -> None:
        self._probing_timer = None
        if self._request_rebalance is not None:
            log.info("%sprobing rebalance: warm-up replicas that caught up can take over", self._log_prefix)
            self._request_rebalance()

    # -- group.protocol=streams: the broker assigns (KIP-1071) ---------------------------------

    def streams_group_member_info(self) -> MemberInfo:
        """What this member tells the broker when it joins: the topology Kafka Streams would send,
        the instance's process id and `application.server` (threads of one instance share both)."""
        replication_factor, window_retention_ms, rebalance_timeout_ms, topic_defaults = self._topic_configs
        return MemberInfo(
            process_id=self.process_id,
            topology=streams_group_topology(
                self.topology,
                replication_factor=replication_factor,
                window_additional_retention_ms=window_retention_ms,
                topic_defaults=topic_defaults,
            ),
            user_endpoint=HostInfo.parse(self.application_server) if self.application_server else None,
            rebalance_timeout_ms=rebalance_timeout_ms,
            shutdown_requested=self.shutdown_requested,
        )

    def streams_group_partitions(self, tasks: Iterable[TaskId]) -> frozenset[TopicPartition]:
        """The partitions the main consumer reads for these active tasks."""
        return frozenset().union(*task_partitions(self.topology.subtopologies, tasks).values())

    def on_streams_group_assignment(
        self, tasks: TaskAssignment, endpoints: Sequence[EndpointPartitions], statuses: Sequence[GroupStatus] = ()
    ) -> None:
        """Keep the broker's assignment as this member's `AssignmentInfo` (what `on_assignment` does for the classic one).

        A streams group has no leader member; what the classic leader alone does for the whole group
        (a batch run's start, KIP-95) falls to the member running the topology's first task, 0_0."""
        self.assignment = streams_group_assignment_info(self.topology.subtopologies, tasks, endpoints, statuses)
        first = TaskId(min(self.topology.subtopologies, default=0), 0)
        self.is_leader = first in tasks.active
