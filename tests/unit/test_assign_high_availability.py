"""High-availability assignment (KIP-441): lags, caught-up clients, warm-ups, probing convergence.

Model-based: the invariants of `task_assignor`'s docstring are checked on generated groups, and
a simulation of probing rounds (warm-ups catch up between rounds) must reach the balanced
assignment.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from streams_core.common.task_id import TaskId
from streams_core.runtime.assignment import (
    AssignmentConfigs,
    ClientAssignment,
    ClientState,
    TaskAssignment,
    assign_tasks,
    assign_tasks_to_members,
)

BIG_LAG = 1_000_000


@dataclass(frozen=True)
class Group:
    """A generated group: clients, tasks, which are stateful, their end offsets, the configs."""

    clients: dict[str, ClientState]
    tasks: list[TaskId]
    stateful: frozenset[TaskId]
    end_offset_sums: dict[TaskId, int]
    configs: AssignmentConfigs

    def assign(self, clients: Mapping[str, ClientState] | None = None) -> TaskAssignment:
        return assign_tasks(clients or self.clients, self.tasks, self.stateful, self.configs, self.end_offset_sums)

    def lags(self, task: TaskId, clients: Mapping[str, ClientState] | None = None) -> dict[str, int]:
        states = clients or self.clients
        sums = {c: s.task_offset_sums.get(task, 0) for c, s in states.items()}
        end = max(self.end_offset_sums.get(task, 0), *sums.values())
        return {c: end - s for c, s in sums.items()}

    def caught_up(self, task: TaskId, clients: Mapping[str, ClientState] | None = None) -> set[str]:
        lags = self.lags(task, clients)
        within = {c for c, lag in lags.items() if lag <= self.configs.acceptable_recovery_lag}
        return within or {c for c, lag in lags.items() if lag == min(lags.values())}


@st.composite
def groups(draw: st.DrawFn, *, all_caught_up: bool = False) -> Group:
    names = [f"p{i}" for i in range(draw(st.integers(1, 5)))]
    partitions = draw(st.lists(st.integers(1, 8), min_size=1, max_size=3))
    tasks = [TaskId(s, p) for s, n in enumerate(partitions) for p in range(n)]
    stateful_subtopologies = draw(st.sets(st.integers(0, len(partitions) - 1)))
    stateful = frozenset(t for t in tasks if t.subtopology in stateful_subtopologies)
    ends = {t: draw(st.integers(0, 50_000)) for t in sorted(stateful)}
    owners = {t: draw(st.sampled_from([None, *names])) for t in tasks}
    clients = {}
    for name in names:
        offset_sums = {}
        for task in sorted(stateful):
            if draw(st.booleans()):
                offset_sums[task] = draw(st.integers(0, ends[task]))
        clients[name] = ClientState(
            draw(st.integers(1, 3)),
            frozenset(t for t, o in owners.items() if o == name),
            frozenset(t for t in offset_sums if owners[t] != name),
            offset_sums,
        )
    configs = AssignmentConfigs(
        draw(st.integers(0, 2)),
        BIG_LAG if all_caught_up else draw(st.sampled_from([0, 100, 10_000, 20_000])),
        draw(st.integers(1, 3)),
    )
    return Group(clients, tasks, stateful, ends, configs)


def copies(result: Mapping[str, ClientAssignment], task: TaskId) -> Counter[str]:
    held: Counter[str] = Counter()
    for client, a in result.items():
        held[client] += (task in a.active_tasks) + (task in a.standby_tasks) + (task in a.warmup_tasks)
    return held


def assert_balanced_per_subtopology(group: Group, result: Mapping[str, ClientAssignment]) -> None:
    capacity = {c: s.capacity for c, s in group.clients.items()}
    total = sum(capacity.values())
    for subtopology in {t.subtopology for t in group.tasks}:
        n = sum(1 for t in group.tasks if t.subtopology == subtopology)
        for client, a in result.items():
            count = sum(1 for t in a.active_tasks if t.subtopology == subtopology)
            assert abs(count - n * capacity[client] / total) < 1, (subtopology, client, count, n)


@settings(max_examples=300, deadline=None)
@given(groups())
def test_invariants(group: Group) -> None:
    outcome = group.assign()
    result = outcome.clients
    for task in group.tasks:
        owners = [c for c, a in result.items() if task in a.active_tasks]
        assert len(owners) == 1, task
        if task in group.stateful:
            assert owners[0] in group.caught_up(task), "an active task went to a client that is not caught up"
        assert max(copies(result, task).values()) <= 1, "two copies of a task on one client"
    warmups = [(c, t) for c, a in result.items() for t in a.warmup_tasks]
    assert len(warmups) <= group.configs.max_warmup_replicas
    assert all(t in group.stateful for _, t in warmups)
    assert not warmups or outcome.probing_rebalance_needed
    for task in group.tasks:
        standbys = sum(task in a.standby_tasks for a in result.values())
        if task in group.stateful:
            free = len(group.clients) - 1 - sum(task in a.warmup_tasks for a in result.values())
            assert standbys == min(group.configs.num_standby_replicas, free)
        else:
            assert standbys == 0


@settings(max_examples=200, deadline=None)
@given(groups(all_caught_up=True))
def test_balanced_per_subtopology_when_all_caught_up(group: Group) -> None:
    outcome = group.assign()
    assert not outcome.probing_rebalance_needed
    assert not any(a.warmup_tasks for a in outcome.clients.values())
    assert_balanced_per_subtopology(group, outcome.clients)


@settings(max_examples=100, deadline=None)
@given(groups(), st.randoms(use_true_random=False))
def test_deterministic_whatever_the_input_order(group: Group, rng: random.Random) -> None:
    expected = group.assign()
    names = list(group.clients)
    rng.shuffle(names)
    tasks = list(group.tasks)
    rng.shuffle(tasks)
    shuffled = Group({c: group.clients[c] for c in names}, tasks, group.stateful, group.end_offset_sums, group.configs)
    assert shuffled.assign() == expected


def next_round(group: Group, result: Mapping[str, ClientAssignment]) -> dict[str, ClientState]:
    """The clients after a probing interval: every copy (active, standby, warm-up) is caught up."""
    states = {}
    for client, state in group.clients.items():
        a = result[client]
        sums = dict(state.task_offset_sums)
        for task in (a.active_tasks | a.replica_tasks) & group.stateful:
            sums[task] = max(group.end_offset_sums[task], *(s.task_offset_sums.get(task, 0) for s in group.clients.values()))
        states[client] = ClientState(state.capacity, a.active_tasks, a.replica_tasks, sums)
    return states


@settings(max_examples=150, deadline=None)
@given(groups())
def test_probing_rounds_converge_to_the_balanced_assignment(group: Group) -> None:
    rounds = len(group.stateful) // group.configs.max_warmup_replicas + 3
    for _ in range(rounds):
        outcome = group.assign()
        if not outcome.probing_rebalance_needed:
            break
        group = Group(next_round(group, outcome.clients), group.tasks, group.stateful, group.end_offset_sums, group.configs)
    else:
        raise AssertionError(f"no convergence in {rounds} probing rounds")
    assert_balanced_per_subtopology(group, outcome.clients)


def rolling_start(*names: str) -> dict[str, ClientState]:
    """`a` ran alone and owns every task of both sub-topologies, caught up; the others are new."""
    owned = frozenset(TaskId(s, p) for s in (0, 1) for p in range(6))
    sums = {TaskId(0, p): 100_000 for p in range(6)}
    return {"a": ClientState(1, owned, task_offset_sums=sums)} | {n: ClientState(1) for n in names}


def test_rolling_start_warms_up_instead_of_moving_and_converges() -> None:
    stateful = frozenset(TaskId(0, p) for p in range(6))
    tasks = [TaskId(s, p) for s in (0, 1) for p in range(6)]
    ends = {t: 100_000 for t in stateful}
    group = Group(rolling_start("b", "c"), tasks, stateful, ends, AssignmentConfigs())
    first = group.assign()
    assert first.probing_rebalance_needed
    assert first.clients["a"].active_tasks >= stateful, "state-less clients must not get stateful actives"
    assert sum(len(a.warmup_tasks) for a in first.clients.values()) == 2
    for name in ("b", "c"):  # stateless tasks go straight to balance
        assert len([t for t in first.clients[name].active_tasks if t.subtopology == 1]) == 2
    rounds = 1
    outcome = first
    while outcome.probing_rebalance_needed:
        group = Group(next_round(group, outcome.clients), tasks, stateful, ends, group.configs)
        outcome = group.assign()
        rounds += 1
        assert rounds <= 4
    for a in outcome.clients.values():
        assert sorted(t.subtopology for t in a.active_tasks) == [0, 0, 1, 1]


def test_fresh_clients_without_state_are_balanced_at_once() -> None:
    stateful = frozenset(TaskId(0, p) for p in range(4))
    group = Group(
        {"a": ClientState(), "b": ClientState()}, sorted(stateful), stateful, dict.fromkeys(stateful, 5_000_000), AssignmentConfigs()
    )
    outcome = group.assign()
    assert not outcome.probing_rebalance_needed
    assert [len(a.active_tasks) for a in outcome.clients.values()] == [2, 2]


def test_caught_up_standby_takes_over_without_a_warmup() -> None:
    t = TaskId(0, 0)
    others = [TaskId(0, 1)]
    clients = {
        "a": ClientState(1, frozenset({t, *others}), task_offset_sums={t: 900, others[0]: 900}),
        "b": ClientState(1, prev_standby_tasks=frozenset({t}), task_offset_sums={t: 895}),
    }
    outcome = assign_tasks(clients, [t, *others], {t, *others}, AssignmentConfigs(1), {t: 900, others[0]: 900})
    assert outcome.clients["b"].active_tasks == {t}
    assert outcome.clients["a"].standby_tasks == {t}
    assert not outcome.probing_rebalance_needed


def test_lagging_previous_owner_loses_the_task_to_a_caught_up_client() -> None:
    t = TaskId(0, 0)
    clients = {
        "a": ClientState(1, frozenset({t}), task_offset_sums={t: 0}),  # its state was wiped
        "b": ClientState(1, prev_standby_tasks=frozenset({t}), task_offset_sums={t: 50_000}),
    }
    outcome = assign_tasks(clients, [t], {t}, AssignmentConfigs(), {t: 50_000})
    assert outcome.clients["b"].active_tasks == {t}


def test_members_balance_each_subtopology() -> None:
    actives = frozenset(TaskId(s, p) for s in (0, 1) for p in range(4))
    members = {"m1": ClientState(1, frozenset(t for t in actives if t.subtopology == 0)), "m2": ClientState()}
    result = assign_tasks_to_members(ClientAssignment(actives, warmup_tasks=frozenset({TaskId(2, 0)})), members)
    for a in result.values():
        assert sorted(t.subtopology for t in a.active_tasks) == [0, 0, 1, 1]
    assert sum(len(a.warmup_tasks) for a in result.values()) == 1
    assert len(result["m1"].active_tasks & members["m1"].prev_active_tasks) == 2
