"""The iteration order of Java's `HashSet`, for the co-partition groups a streams group member sends.

The broker stores a group's topology as the first member sent it and refuses (INVALID_REQUEST) a member
whose topology is not equal, lists compared in order. Kafka Streams sorts every topic list it sends, but a
co-partition group goes out in the iteration order of Java `HashSet`s: the groups of a sub-topology are a
`HashSet<Set<String>>` (`StreamThread`'s broker topology) and each group a `HashSet<String>`
(`InternalTopologyBuilder.copartitionGroups`), whose topic indices the heartbeat lists in that order. So we
compute that order: `String.hashCode`, `HashMap.hash` spreading, the table size a default `HashSet` grows
to, and insertion order within a bucket.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

__all__ = ["java_hash_set_order", "java_set_hash_code", "java_string_hash_code"]

T = TypeVar("T")

_INT_MASK = 0xFFFFFFFF


def java_string_hash_code(value: str) -> int:
    """`String.hashCode()` as an unsigned 32-bit value: 31·h + c over the UTF-16 code units."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _INT_MASK
    return h


def java_set_hash_code(values: Iterable[str]) -> int:
    """`Set<String>.hashCode()` (`AbstractSet`): the sum of its elements' hash codes, as an unsigned 32-bit value."""
    return sum(java_string_hash_code(v) for v in values) & _INT_MASK


def _table_size(size: int) -> int:
    """The table length of a `new HashSet<>()` after `size` additions (16, doubled past a 0.75 load)."""
    n = 16
    while size > n * 3 // 4:
        n *= 2
    return n


def java_hash_set_order(inserted: Sequence[T], hash_code: Callable[[T], int]) -> list[T]:
    """The iteration order of a `new HashSet<>()` after adding `inserted` in order (duplicates keep the first).

    Buckets in index order (`(h ^ h >>> 16) & (n - 1)`), insertion order within a bucket; resizing keeps
    that relative order, so only the final table length matters.
    """
    unique = list(dict.fromkeys(inserted))
    mask = _table_size(len(unique)) - 1

    def bucket(item: T) -> int:
        h = hash_code(item) & _INT_MASK
        return (h ^ (h >> 16)) & mask

    return sorted(unique, key=bucket)  # stable: ties keep insertion order
