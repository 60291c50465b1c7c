"""merged_sorted: a caching store's dirty entries and its store below, as one ordered iterator.

Kafka Streams' `AbstractMergedSortedCacheStoreIterator`: reads of a caching store never flush;
they merge the entries written since the last flush with what the store below holds, in the
read's order. The cached entry wins over a stored one with the same sort key, and a cached
delete (None) hides it. Every caching layer (key-value, window, session) reads through this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

__all__ = ["merged_sorted"]

T = TypeVar("T")


def merged_sorted(
    dirty: Sequence[tuple[Any, T | None]], stored: Iterator[T], sort_key: Callable[[T], Any], reverse: bool
) -> Iterator[T]:
    """Yield `stored` (ordered by `sort_key`, descending if `reverse`) merged with `dirty`.

    `dirty` holds (sort key, item or None for a cached delete), already in the read's order.
    """
    return _merge(dirty, stored, sort_key, reverse) if dirty else stored


def _merge(
    dirty: Sequence[tuple[Any, T | None]], stored: Iterator[T], sort_key: Callable[[T], Any], reverse: bool
) -> Iterator[T]:
    pending = iter(dirty)
    cached = next(pending, None)
    for entry in stored:
        position = sort_key(entry)
        while cached is not None and (cached[0] > position if reverse else cached[0] < position):
            if cached[1] is not None:
                yield cached[1]
            cached = next(pending, None)
        if cached is not None and cached[0] == position:
            if cached[1] is not None:
                yield cached[1]
            cached = next(pending, None)
            continue
        yield entry
    while cached is not None:
        if cached[1] is not None:
            yield cached[1]
        cached = next(pending, None)
