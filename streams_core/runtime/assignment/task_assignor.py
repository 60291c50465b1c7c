"""The task assignor: places active and standby tasks on clients, balanced and sticky.

A client is one process (one `process_id`); its capacity is its number of stream threads.
Rules, in priority order:

1. Balance. With T active tasks and total capacity C, a client of capacity c gets
   floor(T*c/C) or that plus one task, so |tasks - T*c/C| < 1 (equal capacities: counts differ
   by at most one).
2. Stickiness within that bound. Stateful tasks first: a task stays with its previous owner;
   if it must move (owner gone or full) it goes to the client with local state for it, the
   most caught up (highest offset sum) first; then stateless tasks stay where they were.
3. The rest go to the least loaded clients, spreading each sub-topology's tasks.
4. Standby replicas (stateful tasks only, `num_standby` each, at most clients - 1): never on
   the client with the active task or another copy; a client with local state for the task
   is preferred while its total load is within its share, else the least loaded client.

Everything iterates in sorted order, so the same input gives the same assignment on any host.
`assign_tasks_to_members` then spreads one client's tasks over its members (stream threads)
with the same balance and stickiness.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from streams_core.processor.task_id import TaskId

__all__ = ["ClientAssignment", "ClientState", "assign_tasks", "assign_tasks_to_members"]


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

    def local_rank(self, task: TaskId) -> int | None:
        """How caught up this client's state for the task is (its offset sum, else 0); None if absent."""
        rank = self.task_offset_sums.get(task)
        if rank is not None:
            return rank
        return 0 if task in self.prev_active_tasks or task in self.prev_standby_tasks else None


@dataclass(slots=True, frozen=True)
class ClientAssignment:
    """The tasks given to one client or member."""

    active_tasks: frozenset[TaskId] = frozenset()
    standby_tasks: frozenset[TaskId] = frozenset()


class _Placement:
    """Tasks placed so far under the balance bound of rule 1."""

    def __init__(self, total: int, capacities: Mapping[str, int]) -> None:
        capacity_sum = sum(capacities.values())
        self.capacities = dict(capacities)
        self.clients = sorted(capacities)
        self.floor = {c: total * cap // capacity_sum for c, cap in capacities.items()}
        self.fractional = {c: total * cap % capacity_sum != 0 for c, cap in capacities.items()}
        self.extras = total - sum(self.floor.values())
        self.tasks: dict[str, set[TaskId]] = {c: set() for c in capacities}
        self.per_subtopology: dict[str, Counter[int]] = {c: Counter() for c in capacities}

    def has_room(self, client: str) -> bool:
        count, floor = len(self.tasks[client]), self.floor[client]
        return count < floor or (count == floor and self.fractional[client] and self.extras > 0)

    def load(self, client: str) -> float:
        return len(self.tasks[client]) / self.capacities[client]

    def place(self, client: str, task: TaskId) -> None:
        if len(self.tasks[client]) >= self.floor[client]:
            self.extras -= 1
        self.tasks[client].add(task)
        self.per_subtopology[client][task.subtopology] += 1

    def sticky(self, tasks: Iterable[TaskId], owner: Mapping[TaskId, str]) -> list[TaskId]:
        """Keep each task with its previous owner where the bound allows; return the others."""
        left: list[TaskId] = []
        for task in tasks:
            client = owner.get(task)
            if client is not None and self.has_room(client):
                self.place(client, task)
            else:
                left.append(task)
        return left

    def by_local_state(self, tasks: Iterable[TaskId], states: Mapping[str, ClientState]) -> list[TaskId]:
        """Place each task on the most caught-up client with local state and room; return the others."""
        left: list[TaskId] = []
        for task in tasks:
            best: tuple[int, float, str] | None = None
            for client in self.clients:
                rank = states[client].local_rank(task)
                if rank is None or not self.has_room(client):
                    continue
                key = (-rank, self.load(client), client)
                if best is None or key < best:
                    best = key
            if best is None:
                left.append(task)
            else:
                self.place(best[2], task)
        return left

    def balance(self, tasks: Iterable[TaskId]) -> None:
        """Place each task on the client with room holding the fewest of its sub-topology, then least loaded."""
        for task in tasks:
            client = min(
                (c for c in self.clients if self.has_room(c)),
                key=lambda c: (self.per_subtopology[c][task.subtopology] / self.capacities[c], self.load(c), c),
            )
            self.place(client, task)


def _previous_owners(states: Mapping[str, ClientState], tasks: Collection[TaskId]) -> dict[TaskId, str]:
    """Each task's previous active owner; when several claim it, the most caught up, then the lowest id."""
    owners: dict[TaskId, str] = {}
    for client in sorted(states):
        state = states[client]
        for task in state.prev_active_tasks:
            if task not in tasks:
                continue
            current = owners.get(task)
            if current is None or (state.local_rank(task) or 0) > (states[current].local_rank(task) or 0):
                owners[task] = client
    return owners


def assign_tasks(
    clients: Mapping[str, ClientState],
    tasks: Collection[TaskId],
    stateful_tasks: Collection[TaskId] = frozenset(),
    num_standby: int = 0,
) -> dict[str, ClientAssignment]:
    """Assign active tasks, then standby replicas of stateful tasks, to clients (by process id)."""
    if not clients:
        if tasks:
            raise ValueError(f"no clients to assign {len(tasks)} tasks to")
        return {}
    all_tasks = frozenset(tasks)
    stateful = all_tasks & frozenset(stateful_tasks)
    placement = _Placement(len(all_tasks), {c: s.capacity for c, s in clients.items()})
    owners = _previous_owners(clients, all_tasks)

    def state_elsewhere(task: TaskId) -> bool:
        return any(clients[c].has_local_state(task) for c in clients if c != owners.get(task))

    stateful_order = sorted(stateful, key=lambda t: (state_elsewhere(t), t))
    moved = placement.sticky(stateful_order, owners)
    leftovers = placement.by_local_state(sorted(moved), clients)
    leftovers += placement.sticky(sorted(all_tasks - stateful), owners)
    placement.balance(sorted(leftovers))

    actives = placement.tasks
    standbys = _assign_standbys(clients, actives, sorted(stateful), num_standby)
    return {c: ClientAssignment(frozenset(actives[c]), frozenset(standbys[c])) for c in sorted(clients)}


def _assign_standbys(
    clients: Mapping[str, ClientState],
    actives: Mapping[str, set[TaskId]],
    stateful: list[TaskId],
    num_standby: int,
) -> dict[str, set[TaskId]]:
    """Rule 4: standby replicas on clients other than the active one, local state first."""
    standbys: dict[str, set[TaskId]] = {c: set() for c in clients}
    replicas = min(max(num_standby, 0), len(clients) - 1)
    if not replicas or not stateful:
        return standbys
    names = sorted(clients)
    capacity_sum = sum(s.capacity for s in clients.values())
    total = sum(len(a) for a in actives.values()) + replicas * len(stateful)
    share = {c: -(-total * clients[c].capacity // capacity_sum) for c in names}
    load = {c: len(actives[c]) for c in names}
    for task in stateful:
        for _ in range(replicas):
            eligible = [c for c in names if task not in actives[c] and task not in standbys[c]]
            local = [
                c for c in eligible if clients[c].local_rank(task) is not None and load[c] < share[c]
            ]
            if local:
                client = min(
                    local, key=lambda c: (-(clients[c].local_rank(task) or 0), load[c] / clients[c].capacity, c)
                )
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

    Actives and standbys are each balanced across members (counts differ by at most one, or
    by capacity when a member state gives one) and stay with the member that had them before
    (a standby also sticks to a member that ran it as active).
    """
    if not members:
        if assignment.active_tasks or assignment.standby_tasks:
            raise ValueError("no members to assign the client's tasks to")
        return {}
    capacities = {m: s.capacity for m, s in members.items()}
    active = _Placement(len(assignment.active_tasks), capacities)
    active_owners = _previous_owners(members, assignment.active_tasks)
    active.balance(active.sticky(sorted(assignment.active_tasks), active_owners))

    standby = _Placement(len(assignment.standby_tasks), capacities)
    standby_owners: dict[TaskId, str] = {}
    for member in sorted(members):
        state = members[member]
        for task in sorted(assignment.standby_tasks & (state.prev_active_tasks | state.prev_standby_tasks)):
            standby_owners.setdefault(task, member)
    standby.balance(standby.sticky(sorted(assignment.standby_tasks), standby_owners))
    return {
        m: ClientAssignment(frozenset(active.tasks[m]), frozenset(standby.tasks[m])) for m in sorted(members)
    }
