"""SortedIndex: lazily sorted keys agree with sorted(set) under any mix of adds and removes."""

from __future__ import annotations

import random

from streams_core.state.internals.sorted_index import SortedIndex


def test_matches_a_sorted_set_under_random_changes() -> None:
    rnd = random.Random(3)
    index: SortedIndex[bytes] = SortedIndex()
    present: set[bytes] = set()
    for step in range(5000):
        key = bytes([rnd.randrange(40)]) * rnd.randrange(1, 3)
        if key in present:
            index.remove(key)
            present.discard(key)
        else:
            index.add(key)
            present.add(key)
        if step % rnd.choice((1, 7, 150)) == 0:
            assert index.settled() == sorted(present)
        assert len(index) == len(present)
    assert index.settled() == sorted(present)


def test_many_changes_at_once_are_applied_in_one_pass() -> None:
    index: SortedIndex[int] = SortedIndex()
    for i in range(1000, 0, -1):
        index.add(i)
    assert index.settled() == list(range(1, 1001))
    for i in range(1, 1001, 2):
        index.remove(i)
    index.add(0)
    assert index.settled() == [0, *range(2, 1001, 2)]


def test_remove_then_add_before_settling_keeps_one_copy() -> None:
    index: SortedIndex[str] = SortedIndex()
    index.add("a")
    index.settled()
    index.remove("a")
    index.add("a")
    index.add("b")
    index.remove("b")
    assert index.settled() == ["a"]
    index.clear()
    assert index.settled() == [] and len(index) == 0
