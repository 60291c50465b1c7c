"""The task assignor: Kafka Streams' high-availability assignment (KIP-441), pure and deterministic.

A client is one process (one `process_id`); its capacity is its number of stream threads.
Steps, and the invariants they keep:

1. Lags. A client's lag on a stateful task is `end - offset sum` (offset sum 0 without local
   state), where `end` is the task's changelog end-offset sum as the leader fetched it, raised to
   the highest offset sum any client reports (the fetch precedes the JoinGroup, so a member's
   checkpoint can be newer; unknown end offsets fall back to that highest sum). A client is
   *caught up* when its lag is at most `acceptable_recovery_lag`; when no client is, the least
   lagging ones count as caught up (Kafka's "most caught-up client").
2. Balanced target, sub-topology by sub-topology (stateful ones first). With T tasks of a
   sub-topology and total capacity C, a client of capacity c gets floor(T*c/C) or one more
   (|count - T*c/C| < 1); the extra ones go to the least loaded clients so far (on a tie, those
   that owned more of the tasks before, then the most caught up), which keeps the total balanced. Within these quotas a task stays with its
   previous owner (the tasks that are hardest to place elsewhere stay first); the others go to
   the client with room that is most caught up (local state first), then least loaded.
3. Movements (stateful tasks only). The active task is always on a caught-up client: a task
   whose target is not caught up stays with its previous owner if that one is caught up, else
   goes to the least loaded caught-up client, and the target gets a warm-up replica (a standby)
   while fewer than `max_warmup_replicas` were given in the whole assignment. Any movement asks
   for a probing rebalance, after which the warm-ups that caught up take over. Stateless tasks
   keep their target.
4. Standby replicas (`num_standby_replicas` per stateful task, fewer if clients run out): never
   on a client with the task's active, warm-up or another standby; a client with local state
   is preferred (the least lagging first) while its total load is within its share, else the
   least loaded client.

Everything iterates in sorted order, so the same input gives the same assignment on any host.
`assign_tasks_to_members` then spreads one client's tasks over its members (stream threads):
actives balanced per sub-topology, replicas balanced, both sticky.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from streams_core.common.task_id import TaskId

__all__ = [
    "AssignmentConfigs",
    "ClientAssignment",
    "ClientState",
    "TaskAssignment",
    "assign_tasks",
    "assign_tasks_to_members",
]

_Rank = tuple[int, int]
"""How good a client is for a task: (lag, 0 with local state else 1); lower is better."""


@dataclass(slots=True, frozen=True)
class AssignmentConfigs:
    """The assignor's settings, with Kafka Streams' defaults."""

    num_standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2

    def __post_init__(self) -> None:
        if self.num_standby_replicas < 0 or self.acceptable_recovery_lag < 0 or self.max_warmup_replicas < 1:
            raise ValueError(f"invalid assignment configs {self}")


@dataclass(slots=True, frozen=True)
class ClientState:
    """What the leader knows of a client (or of one member, capacity 1) before assigning."""

    capacity: int = 1
    prev_active_tasks: frozenset[TaskId] = frozenset()
    prev_standby_tasks: frozenset[TaskId] = frozenset()
    task_offset_sums: Mapping[TaskId, int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {self.capacity}")

    def has_local_state(self, task: TaskId) -> bool:
        return task in self.prev_active_tasks or task in self.prev_standby_tasks or task in self.task_offset_sums


@dataclass(slots=True, frozen=True)
class ClientAssignment:
    """The tasks given to one client or member; warm-ups are standbys that will take over."""

    active_tasks: frozenset[TaskId] = frozenset()
    standby_tasks: frozenset[TaskId] = frozenset()
    warmup_tasks: frozenset[TaskId] = frozenset()

    @property
    def replica_tasks(self) -> frozenset[TaskId]:
        """Standbys and warm-ups: what the member runs as standby tasks."""
        return self.standby_tasks | self.warmup_tasks


@dataclass(slots=True, frozen=True)
class TaskAssignment:
    """Every client's tasks, and whether a probing rebalance should follow (warm-ups pending)."""

    clients: Mapping[str, ClientAssignment] = field(default_factory=dict, hash=False)
    probing_rebalance_needed: bool = False


class _Lags:
    """Step 1: each client's lag on each stateful task, and which clients are caught up."""

    def __init__(
        self,
        clients: Mapping[str, ClientState],
        stateful: Iterable[TaskId],
        end_offset_sums: Mapping[TaskId, int],
        acceptable_recovery_lag: int,
    ) -> None:
        self.lag: dict[TaskId, dict[str, int]] = {}
        self.caught_up: dict[TaskId, frozenset[str]] = {}
        for task in stateful:
            sums = {c: s.task_offset_sums.get(task, 0) for c, s in clients.items()}
            end = max(end_offset_sums.get(task, 0), *sums.values())
            lags = {c: end - offset_sum for c, offset_sum in sums.items()}
            within = frozenset(c for c, lag in lags.items() if lag <= acceptable_recovery_lag)
            least = min(lags.values())
            self.lag[task] = lags
            self.caught_up[task] = within or frozenset(c for c, lag in lags.items() if lag == least)

    def of(self, client: str, task: TaskId) -> int:
        return self.lag.get(task, {}).get(client, 0)


def _spread(
    tasks: Collection[TaskId],
    capacities: Mapping[str, int],
    load: Mapping[str, int],
    owner: Mapping[TaskId, str],
    rank: Callable[[str, TaskId], _Rank],
) -> dict[TaskId, str]:
    """Step 2 for one group of tasks: capacity quotas (extras to the least loaded), then sticky."""
    names = sorted(capacities)
    total, capacity_sum = len(tasks), sum(capacities.values())
    quota = {c: total * capacities[c] // capacity_sum for c in names}
    prev_here = Counter(owner[t] for t in tasks if t in owner)

    def closeness(client: str) -> _Rank:
        ranks = [rank(client, t) for t in tasks]
        return sum(r[0] for r in ranks), sum(r[1] for r in ranks)

    fractional = sorted(
        (c for c in names if total * capacities[c] % capacity_sum),
        key=lambda c: ((load[c] + quota[c]) / capacities[c], -prev_here[c], closeness(c), c),
    )
    for client in fractional[: total - sum(quota.values())]:
        quota[client] += 1

    def best_elsewhere(task: TaskId) -> _Rank:
        return min((rank(c, task) for c in names if c != owner.get(task)), default=(0, 0))

    placed: dict[TaskId, str] = {}
    count: Counter[str] = Counter()
    keep_order = sorted(sorted(tasks), key=best_elsewhere, reverse=True)
    for task in keep_order:
        previous = owner.get(task)
        if previous is not None and previous in quota and count[previous] < quota[previous]:
            placed[task] = previous
            count[previous] += 1
    for task in sorted(t for t in tasks if t not in placed):
        client = min(
            (c for c in names if count[c] < quota[c]),
            key=lambda c: (rank(c, task), (load[c] + count[c]) / capacities[c], c),
        )
        placed[task] = client
        count[client] += 1
    return placed


def _previous_owners(
    states: Mapping[str, ClientState], tasks: Collection[TaskId], lags: _Lags | None = None
) -> dict[TaskId, str]:
    """Each task's previous active owner; when several claim it, the least lagging, then the lowest id."""
    owners: dict[TaskId, str] = {}
    for client in sorted(states):
        for task in states[client].prev_active_tasks:
            if task not in tasks:
                continue
            current = owners.get(task)
            if current is None or (lags is not None and lags.of(client, task) < lags.of(current, task)):
                owners[task] = client
    return owners


def assign_tasks(
    clients: Mapping[str, ClientState],
    tasks: Collection[TaskId],
    stateful_tasks: Collection[TaskId] = frozenset(),
    configs: AssignmentConfigs | None = None,
    end_offset_sums: Mapping[TaskId, int] | None = None,
) -> TaskAssignment:
    """Assign active tasks, warm-ups and standbys to clients (by process id), steps 1-4 above.

    `end_offset_sums`: per stateful task, the sum of its changelog partitions' end offsets.
    """
    if not clients:
        if tasks:
            raise ValueError(f"no clients to assign {len(tasks)} tasks to")
        return TaskAssignment()
    configs = configs or AssignmentConfigs()
    names = sorted(clients)
    all_tasks = frozenset(tasks)
    stateful = all_tasks & frozenset(stateful_tasks)
    lags = _Lags(clients, sorted(stateful), end_offset_sums or {}, configs.acceptable_recovery_lag)
    owners = _previous_owners(clients, all_tasks, lags)
    capacities = {c: clients[c].capacity for c in names}

    def rank(client: str, task: TaskId) -> _Rank:
        return lags.of(client, task), 0 if clients[client].has_local_state(task) else 1

    actives: dict[str, set[TaskId]] = {c: set() for c in names}
    warmups: dict[str, set[TaskId]] = {c: set() for c in names}
    load: Counter[str] = Counter({c: 0 for c in names})
    by_subtopology: dict[int, list[TaskId]] = {}
    for task in sorted(all_tasks):
        by_subtopology.setdefault(task.subtopology, []).append(task)
    order = sorted(by_subtopology, key=lambda s: (by_subtopology[s][0] not in stateful, s))
    movements: list[tuple[int, TaskId, str]] = []
    for subtopology in order:
        group = by_subtopology[subtopology]
        target = _spread(group, capacities, load, owners, rank)
        for task in group:
            client = target[task]
            if task in stateful and client not in lags.caught_up[task]:
                client = _caught_up_owner(task, lags.caught_up[task], owners, load, capacities)
                movements.append((len(lags.caught_up[task]), task, target[task]))
            actives[client].add(task)
            load[client] += 1
    for _, task, destination in sorted(movements)[: configs.max_warmup_replicas]:
        warmups[destination].add(task)
    standbys = _assign_standbys(clients, actives, warmups, sorted(stateful), configs.num_standby_replicas, rank)
    return TaskAssignment(
        {c: ClientAssignment(frozenset(actives[c]), frozenset(standbys[c]), frozenset(warmups[c])) for c in names},
        probing_rebalance_needed=bool(movements),
    )


def _caught_up_owner(
    task: TaskId,
    caught_up: frozenset[str],
    owners: Mapping[TaskId, str],
    load: Mapping[str, int],
    capacities: Mapping[str, int],
) -> str:
    """Step 3: the previous owner if caught up, else the least loaded caught-up client."""
    previous = owners.get(task)
    if previous in caught_up:
        return previous
    return min(caught_up, key=lambda c: (load[c] / capacities[c], c))


def _assign_standbys(
    clients: Mapping[str, ClientState],
    actives: Mapping[str, set[TaskId]],
    warmups: Mapping[str, set[TaskId]],
    stateful: list[TaskId],
    num_standby: int,
    rank: Callable[[str, TaskId], _Rank],
) -> dict[str, set[TaskId]]:
    """Step 4: standby replicas on clients without a copy of the task, local state first."""
    standbys: dict[str, set[TaskId]] = {c: set() for c in clients}
    if not num_standby or not stateful:
        return standbys
    names = sorted(clients)
    capacity_sum = sum(s.capacity for s in clients.values())
    load = {c: len(actives[c]) + len(warmups[c]) for c in names}
    total = sum(load.values()) + num_standby * len(stateful)
    share = {c: -(-total * clients[c].capacity // capacity_sum) for c in names}
    for task in stateful:
        for _ in range(num_standby):
            eligible = [c for c in names if task not in actives[c] and task not in warmups[c] and task not in standbys[c]]
            if not eligible:
                break
            local = [c for c in eligible if clients[c].has_local_state(task) and load[c] < share[c]]
            if local:
                client = min(local, key=lambda c: (rank(c, task), load[c] / clients[c].capacity, c))
            else:
                client = min(eligible, key=lambda c: (load[c] / clients[c].capacity, c))
            standbys[client].add(task)
            load[client] += 1
    return standbys


def assign_tasks_to_members(
    assignment: ClientAssignment,
    members: Mapping[str, ClientState],
) -> dict[str, ClientAssignment]:
    """Spread one client's tasks over its members (consumers, one per stream thread).

    Actives are balanced per sub-topology (counts differ by at most one, or by capacity when a
    member state gives one), replicas (standbys and warm-ups) in total; each stays with the
    member that had it before (a replica also sticks to a member that ran it as active).
    """
    if not members:
        if assignment.active_tasks or assignment.replica_tasks:
            raise ValueError("no members to assign the client's tasks to")
        return {}
    names = sorted(members)
    capacities = {m: members[m].capacity for m in names}

    def no_rank(member: str, task: TaskId) -> _Rank:
        return 0, 0

    active_owners = _previous_owners(members, assignment.active_tasks)
    active: dict[str, set[TaskId]] = {m: set() for m in names}
    load: Counter[str] = Counter({m: 0 for m in names})
    for subtopology in sorted({t.subtopology for t in assignment.active_tasks}):
        group = sorted(t for t in assignment.active_tasks if t.subtopology == subtopology)
        for task, member in _spread(group, capacities, load, active_owners, no_rank).items():
            active[member].add(task)
            load[member] += 1

    replica_owners: dict[TaskId, str] = {}
    for member in names:
        state = members[member]
        for task in sorted(assignment.replica_tasks & (state.prev_active_tasks | state.prev_standby_tasks)):
            replica_owners.setdefault(task, member)
    zero: Counter[str] = Counter({m: 0 for m in names})
    replicas: dict[str, set[TaskId]] = {m: set() for m in names}
    for task, member in _spread(assignment.replica_tasks, capacities, zero, replica_owners, no_rank).items():
        replicas[member].add(task)
    return {
        m: ClientAssignment(
            frozenset(active[m]),
            frozenset(replicas[m] & assignment.standby_tasks),
            frozenset(replicas[m] & assignment.warmup_tasks),
        )
        for m in names
    }
