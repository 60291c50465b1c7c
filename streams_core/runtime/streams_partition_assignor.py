"""StreamsPartitionAssignor: one stream thread's side of the group protocol, without aiokafka.

Each thread's consumer carries one. It says what the thread sends in its JoinGroup (process id,
`application.server`, tasks it owned and tasks with local state), computes the whole group's
assignment when its consumer is the leader, and keeps the AssignmentInfo its member receives.
The aiokafka adapter in `streams_core.clients` calls it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from streams_core.processor.task_id import TaskId
from streams_core.runtime.assignment import AssignmentInfo, MemberAssignment, SubscriptionInfo, compute_group_assignment
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
        log_prefix: str = "",
    ) -> None:
        self.topology = topology
        self.process_id = process_id
        self.application_server = application_server
        self.num_standby_replicas = num_standby_replicas
        self._task_states = task_states
        self._log_prefix = log_prefix
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

    def assign(self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, bytes]) -> dict[str, MemberAssignment]:
        """The leader's assignment of every member (synchronous: aiokafka awaits nothing here)."""
        self.partition_counts = dict(partition_counts)
        self.is_leader = True
        result = compute_group_assignment(
            subscriptions,
            self.topology.subtopologies,
            partition_counts,
            copartition_groups=self.topology.copartition_groups,
            stateful_subtopologies=self.topology.stateful_subtopologies,
            num_standby_replicas=self.num_standby_replicas,
        )
        log.info(
            "%sassigned %d members: %s",
            self._log_prefix,
            len(result),
            {m: sorted(str(t) for t in a.info.active_tasks) for m, a in result.items()},
        )
        return result

    def on_assignment(self, user_data: bytes) -> None:
        """Keep what this member received; errors are raised later by the thread, not inside aiokafka."""
        self.assignment = AssignmentInfo.decode(user_data)
