"""Task assignor: balance, stickiness, local-state preference, standbys, determinism (all clients caught up)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Collection, Mapping

import pytest

from streams_core.common.task_id import TaskId
from streams_core.runtime.assignment import (
    AssignmentConfigs,
    ClientAssignment,
    ClientState,
    assign_tasks,
    assign_tasks_to_members,
)


def assign(
    states: Mapping[str, ClientState],
    all_tasks: Collection[TaskId],
    stateful: Collection[TaskId] = frozenset(),
    num_standby: int = 0,
) -> Mapping[str, ClientAssignment]:
    return assign_tasks(states, all_tasks, stateful, AssignmentConfigs(num_standby)).clients


def tasks(n: int, subtopologies: int = 1) -> list[TaskId]:
    return [TaskId(s, p) for s in range(subtopologies) for p in range(n)]


def clients(*names: str, **capacity: int) -> dict[str, ClientState]:
    return {name: ClientState(capacity.get(name, 1)) for name in names}


def active_counts(result: Mapping[str, ClientAssignment]) -> dict[str, int]:
    return {c: len(a.active_tasks) for c, a in result.items()}


def check_complete(result: Mapping[str, ClientAssignment], all_tasks: list[TaskId]) -> None:
    assigned = [t for a in result.values() for t in a.active_tasks]
    assert sorted(assigned) == sorted(all_tasks)


def previous(result: Mapping[str, ClientAssignment], **extra: ClientState) -> dict[str, ClientState]:
    states = {
        c: ClientState(1, a.active_tasks, a.standby_tasks) for c, a in result.items()
    }
    states.update(extra)
    return states


def test_balanced_for_1_to_5_clients_and_4_to_12_tasks() -> None:
    rng = random.Random(11)
    for n_clients in range(1, 6):
        for n_tasks in range(4, 13):
            all_tasks = tasks(n_tasks, subtopologies=1)
            for _ in range(10):
                names = [f"p{i}" for i in range(n_clients)]
                states = {
                    name: ClientState(
                        1,
                        frozenset(rng.sample(all_tasks, rng.randrange(0, n_tasks))),
                        frozenset(rng.sample(all_tasks, rng.randrange(0, 3))),
                    )
                    for name in names
                }
                stateful = set(rng.sample(all_tasks, rng.randrange(0, n_tasks)))
                result = assign(states, all_tasks, stateful, num_standby=rng.randrange(0, 3))
                check_complete(result, all_tasks)
                counts = active_counts(result).values()
                assert max(counts) - min(counts) <= 1, (n_clients, n_tasks, result)


def test_balance_is_weighted_by_capacity() -> None:
    result = assign(clients("a", "b", "c", a=1, b=2, c=3), tasks(12))
    assert active_counts(result) == {"a": 2, "b": 4, "c": 6}
    rng = random.Random(5)
    for _ in range(200):
        capacity = {f"p{i}": rng.randrange(1, 5) for i in range(rng.randrange(1, 6))}
        all_tasks = tasks(rng.randrange(1, 25))
        result = assign({c: ClientState(k) for c, k in capacity.items()}, all_tasks)
        check_complete(result, all_tasks)
        total = sum(capacity.values())
        for client, count in active_counts(result).items():
            assert abs(count - len(all_tasks) * capacity[client] / total) < 1


def test_same_membership_keeps_the_assignment() -> None:
    all_tasks = tasks(4, subtopologies=2)
    first = assign(clients("a", "b", "c"), all_tasks, set(all_tasks))
    again = assign(previous(first), all_tasks, set(all_tasks))
    assert {c: a.active_tasks for c, a in again.items()} == {c: a.active_tasks for c, a in first.items()}


def test_member_leaves_then_rejoins_with_its_state() -> None:
    all_tasks = tasks(6)
    original = {
        "a": ClientState(1, frozenset(all_tasks[0:2])),
        "b": ClientState(1, frozenset(all_tasks[2:4])),
        "c": ClientState(1, frozenset(all_tasks[4:6])),
    }
    first = assign(original, all_tasks, set(all_tasks))
    assert {c: a.active_tasks for c, a in first.items()} == {c: s.prev_active_tasks for c, s in original.items()}

    without_c = assign({c: original[c] for c in ("a", "b")}, all_tasks, set(all_tasks))
    assert original["a"].prev_active_tasks <= without_c["a"].active_tasks  # nothing taken away
    assert original["b"].prev_active_tasks <= without_c["b"].active_tasks
    assert active_counts(without_c) == {"a": 3, "b": 3}

    c_back = ClientState(1, prev_standby_tasks=frozenset(all_tasks[4:6]))  # its state is still on disk
    rejoined = assign(previous(without_c, c=c_back), all_tasks, set(all_tasks))
    assert {c: a.active_tasks for c, a in rejoined.items()} == {c: s.prev_active_tasks for c, s in original.items()}


def test_new_client_moves_only_what_balance_needs() -> None:
    all_tasks = tasks(12)
    first = assign(clients("a", "b", "c"), all_tasks)
    second = assign(previous(first, d=ClientState()), all_tasks)
    assert active_counts(second) == {"a": 3, "b": 3, "c": 3, "d": 3}
    for client in ("a", "b", "c"):
        assert second[client].active_tasks <= first[client].active_tasks
    moved = sum(len(first[c].active_tasks - second[c].active_tasks) for c in ("a", "b", "c"))
    assert moved == 3


def test_task_of_a_departed_owner_goes_to_the_client_with_local_state() -> None:
    all_tasks = tasks(4)
    t = all_tasks[3]
    states = {
        "a": ClientState(1, frozenset(all_tasks[0:2])),
        "b": ClientState(1, frozenset({all_tasks[2]})),
        "c": ClientState(1, prev_standby_tasks=frozenset({t})),
    }
    result = assign(states, all_tasks, set(all_tasks))
    assert t in result["c"].active_tasks


def test_most_caught_up_client_wins() -> None:
    t = TaskId(0, 0)
    states = {
        "a": ClientState(1, task_offset_sums={t: 10}),
        "b": ClientState(1, task_offset_sums={t: 500}),
        "c": ClientState(1, task_offset_sums={t: 20}),
    }
    result = assign(states, [t], {t})
    assert result["b"].active_tasks == {t}


def test_stateful_tasks_stay_before_stateless_ones() -> None:
    stateful, stateless = TaskId(0, 0), TaskId(1, 0)
    states = {
        "a": ClientState(1, frozenset({stateful, stateless})),
        "b": ClientState(1),
    }
    result = assign(states, [stateful, stateless], {stateful})
    assert result["a"].active_tasks == {stateful}
    assert result["b"].active_tasks == {stateless}


def test_local_state_beats_stateless_stickiness() -> None:
    stateful, stateless = TaskId(0, 0), TaskId(1, 0)
    states = {
        "a": ClientState(1, frozenset({stateless}), frozenset({stateful})),
        "b": ClientState(1),
    }
    result = assign(states, [stateful, stateless], {stateful})
    assert result["a"].active_tasks == {stateful}


def test_two_previous_owners_most_caught_up_keeps_it() -> None:
    t = TaskId(0, 0)
    states = {
        "a": ClientState(1, frozenset({t}), task_offset_sums={t: 5}),
        "b": ClientState(1, frozenset({t}), task_offset_sums={t: 9}),
    }
    assert assign(states, [t], {t})["b"].active_tasks == {t}


@pytest.mark.parametrize("num_standby", [1, 2, 3, 5])
def test_standbys_never_share_a_client_with_the_active_or_another_copy(num_standby: int) -> None:
    rng = random.Random(num_standby)
    for n_clients in range(1, 6):
        all_tasks = tasks(4, subtopologies=2)
        stateful = set(all_tasks[:5])
        states = {
            f"p{i}": ClientState(1, frozenset(rng.sample(all_tasks, 2)), frozenset(rng.sample(all_tasks, 2)))
            for i in range(n_clients)
        }
        result = assign(states, all_tasks, stateful, num_standby)
        copies = min(num_standby, n_clients - 1)
        for task in all_tasks:
            holders = [c for c, a in result.items() if task in a.standby_tasks]
            active = [c for c, a in result.items() if task in a.active_tasks]
            assert len(active) == 1 and active[0] not in holders
            assert len(holders) == (copies if task in stateful else 0)


def test_standby_prefers_client_with_local_state() -> None:
    t = TaskId(0, 0)
    others = tasks(3, subtopologies=1)[1:]
    states = {
        "a": ClientState(1, frozenset({t})),
        "b": ClientState(1),
        "c": ClientState(1, prev_standby_tasks=frozenset({t})),
    }
    result = assign(states, [t, *others], {t}, num_standby=1)
    assert result["a"].active_tasks == {t}
    assert result["c"].standby_tasks == {t}


def test_standbys_are_spread() -> None:
    all_tasks = tasks(6)
    result = assign(clients("a", "b", "c"), all_tasks, set(all_tasks), num_standby=1)
    assert sorted(len(a.standby_tasks) for a in result.values()) == [2, 2, 2]


def test_subtopology_tasks_are_spread_across_clients() -> None:
    result = assign(clients("a", "b"), tasks(2, subtopologies=2))
    for assignment in result.values():
        assert sorted(t.subtopology for t in assignment.active_tasks) == [0, 1]


def test_deterministic_whatever_the_input_order() -> None:
    rng = random.Random(9)
    all_tasks = tasks(5, subtopologies=2)
    states = {
        f"p{i}": ClientState(
            rng.randrange(1, 3), frozenset(rng.sample(all_tasks, 3)), frozenset(rng.sample(all_tasks, 2))
        )
        for i in range(4)
    }
    expected = assign(states, all_tasks, set(all_tasks[:6]), 1)
    for order in itertools.islice(itertools.permutations(states), 6):
        shuffled_tasks = list(all_tasks)
        rng.shuffle(shuffled_tasks)
        assert assign({c: states[c] for c in order}, shuffled_tasks, set(all_tasks[:6]), 1) == expected


def test_no_clients() -> None:
    assert assign({}, []) == {}
    with pytest.raises(ValueError):
        assign({}, tasks(1))


def test_more_clients_than_tasks() -> None:
    result = assign(clients("a", "b", "c"), tasks(2))
    assert sorted(active_counts(result).values()) == [0, 1, 1]


def test_members_get_balanced_sticky_shares_of_their_client() -> None:
    all_tasks = tasks(5)
    client = ClientAssignment(frozenset(all_tasks), frozenset({TaskId(1, 0), TaskId(1, 1)}))
    members = {
        "m1": ClientState(1, frozenset(all_tasks[0:3]), frozenset({TaskId(1, 1)})),
        "m2": ClientState(1, frozenset({all_tasks[3]})),
    }
    result = assign_tasks_to_members(client, members)
    assert {len(a.active_tasks) for a in result.values()} == {2, 3}
    assert result["m2"].active_tasks >= {all_tasks[3]}
    assert len(result["m1"].active_tasks & frozenset(all_tasks[0:3])) == 3
    assert TaskId(1, 1) in result["m1"].standby_tasks
    assert {len(a.standby_tasks) for a in result.values()} == {1}
    assert frozenset().union(*(a.active_tasks for a in result.values())) == client.active_tasks


def test_members_balance_property() -> None:
    rng = random.Random(4)
    for _ in range(200):
        all_tasks = tasks(rng.randrange(0, 13))
        n = rng.randrange(1, 5)
        members = {f"m{i}": ClientState(1, frozenset(rng.sample(all_tasks, min(len(all_tasks), 3)))) for i in range(n)}
        result = assign_tasks_to_members(ClientAssignment(frozenset(all_tasks)), members)
        counts = [len(a.active_tasks) for a in result.values()]
        assert max(counts) - min(counts) <= 1 and sum(counts) == len(all_tasks)
