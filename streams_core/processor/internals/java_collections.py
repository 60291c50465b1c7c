"""The iteration orders of Java's `HashSet<String>` and `TreeSet`, which `describe()` prints.

Kafka Streams' topology description lists stores and topics in `HashSet<String>` order, visits a
sub-topology's nodes in `HashMap<String, ...>` order, and keeps a node's predecessors and
successors in a `TreeSet` whose comparator reads sizes that change after insertion. Both orders
are specified and reproducible (`String.hashCode`, `HashMap`'s buckets, `TreeMap`'s red-black
tree), so the text can match Java's byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

__all__ = ["JavaTreeSet", "java_hash_set_order", "java_string_hash"]

T = TypeVar("T")


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()` over UTF-16 code units, as an unsigned 32-bit int."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_set_order(items: Iterable[str]) -> list[str]:
    """The iteration order of a `HashSet<String>` (or `HashMap` keys) filled with `items` in order.

    By bucket of the spread hash at the final capacity (16, doubled past 3/4 load); names sharing
    a bucket in insertion order, which Java's resizes keep. A bucket of more than eight names
    (which Java would turn into a tree) is not modelled: node names of a topology never collide so.
    """
    names = list(dict.fromkeys(items))
    capacity = 16
    while len(names) > 0.75 * capacity:
        capacity *= 2

    def bucket(name: str) -> int:
        h = java_string_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(names, key=bucket)


class _Entry(Generic[T]):
    __slots__ = ("black", "key", "left", "parent", "right")

    def __init__(self, key: T, parent: _Entry[T] | None) -> None:
        self.key = key
        self.parent = parent
        self.left: _Entry[T] | None = None
        self.right: _Entry[T] | None = None
        self.black = True


class JavaTreeSet(Generic[T]):
    """`java.util.TreeSet` with a comparator: `TreeMap`'s red-black tree, insertion and rebalancing.

    The comparator is called only while adding, against the elements' state at that moment, so a
    comparator over mutable state gives the order Java gives (Kafka's `NODE_COMPARATOR` reads
    sub-topology sizes that grow while the description is being linked).
    """

    __slots__ = ("_compare", "_root")

    def __init__(self, compare: Callable[[T, T], int]) -> None:
        self._compare = compare
        self._root: _Entry[T] | None = None

    def add(self, key: T) -> bool:
        node = self._root
        if node is None:
            self._root = _Entry(key, None)
            return True
        while True:
            cmp = self._compare(key, node.key)
            if cmp == 0:
                return False
            child = node.left if cmp < 0 else node.right
            if child is None:
                break
            node = child
        entry = _Entry(key, node)
        if cmp < 0:
            node.left = entry
        else:
            node.right = entry
        self._fix_after_insertion(entry)
        return True

    def __iter__(self) -> Iterator[T]:
        stack: list[_Entry[T]] = []
        node = self._root
        while stack or node is not None:
            while node is not None:
                stack.append(node)
                node = node.left
            node = stack.pop()
            yield node.key
            node = node.right

    def _fix_after_insertion(self, x: _Entry[T]) -> None:
        x.black = False
        while x is not self._root and x.parent is not None and not x.parent.black:
            parent = x.parent
            grand = parent.parent
            assert grand is not None  # a red node is never the root
            on_left = parent is grand.left
            uncle = grand.right if on_left else grand.left
            if uncle is not None and not uncle.black:
                parent.black = uncle.black = True
                grand.black = False
                x = grand
                continue
            if x is (parent.right if on_left else parent.left):
                x = parent
                (self._rotate_left if on_left else self._rotate_right)(x)
            self._recolor_and_rotate(x, self._rotate_right if on_left else self._rotate_left)
        assert self._root is not None
        self._root.black = True

    @staticmethod
    def _recolor_and_rotate(x: _Entry[T], rotate: Callable[[_Entry[T]], None]) -> None:
        parent = x.parent
        assert parent is not None and parent.parent is not None
        parent.black = True
        parent.parent.black = False
        rotate(parent.parent)

    def _rotate_left(self, p: _Entry[T]) -> None:
        self._rotate(p, "left", "right")

    def _rotate_right(self, p: _Entry[T]) -> None:
        self._rotate(p, "right", "left")

    def _rotate(self, p: _Entry[T], near: str, far: str) -> None:
        """`TreeMap.rotateLeft` (near "left") or `rotateRight`: `p`'s far child takes its place."""
        child: _Entry[T] = getattr(p, far)
        inner: _Entry[T] | None = getattr(child, near)
        setattr(p, far, inner)
        if inner is not None:
            inner.parent = p
        self._replace(p, child)
        setattr(child, near, p)
        p.parent = child

    def _replace(self, old: _Entry[T], new: _Entry[T]) -> None:
        """Put `new` where `old` hangs (a rotation's first half)."""
        new.parent = old.parent
        if old.parent is None:
            self._root = new
        elif old is old.parent.left:
            old.parent.left = new
        else:
            old.parent.right = new
