"""The Java collection orders describe() prints: String.hashCode, HashSet iteration, TreeSet."""

from __future__ import annotations

import random

from streams_core.processor.internals.java_collections import JavaTreeSet, java_hash_set_order, java_string_hash


def test_string_hash_is_java_s() -> None:
    """Values of Java's `String.hashCode()` (as unsigned 32 bits), a surrogate pair included."""
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("KSTREAM-SOURCE-0000000000") == 1861603632
    assert java_string_hash("\U0001F600") == 1772899


def test_hash_set_order_by_bucket_then_insertion() -> None:
    """Names sharing a bucket keep their insertion order; the table doubles past 3/4 full. Each
    expected order is what Java 17's HashSet printed after the same adds."""
    assert java_hash_set_order(["BB", "Aa"]) == ["BB", "Aa"]
    assert java_hash_set_order(["Aa", "BB"]) == ["Aa", "BB"]
    assert java_hash_set_order(["b", "a", "c"]) == ["a", "b", "c"]
    thirteen = [f"KSTREAM-NODE-00000000{10 + i * 7}" for i in range(13)]  # past 12: 32 buckets
    assert java_hash_set_order(thirteen) == [f"KSTREAM-NODE-00000000{n}" for n in (59, 38, 17, 10, 87, 66, 45, 24, 94, 73, 52, 31, 80)]


def test_the_tree_set_sorts_as_a_sorted_list_when_its_comparator_is_fixed() -> None:
    """With a comparator that never changes, Java's TreeSet iterates in sorted order, duplicates dropped."""
    rng = random.Random(26)
    for size in range(40):
        values = [rng.randrange(30) for _ in range(size)]
        tree = JavaTreeSet[int](lambda a, b: (a > b) - (a < b))
        added = [tree.add(v) for v in values]
        assert list(tree) == sorted(set(values))
        assert sum(added) == len(set(values))


def test_the_tree_set_keeps_positions_decided_at_insertion() -> None:
    """A comparator over mutable state is read at each add: placed elements do not move."""
    weight = {"a": 1, "b": 2, "c": 3}
    tree = JavaTreeSet[str](lambda x, y: weight[y] - weight[x])  # heavier first
    tree.add("a")
    tree.add("b")
    weight["a"] = 5  # now heavier than "c", but still after "b"
    tree.add("c")
    assert list(tree) == ["b", "a", "c"]
