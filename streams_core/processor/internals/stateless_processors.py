"""The stateless KStream processors: filter, map, flat-map, select-key, peek, branch, pass-through.

Each holds the user's function and, from `init`, the context's `forward`; `process` is a
couple of calls and one `Record` per output, nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Generic

from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import KR, VR, K, V

_new = tuple.__new__  # Record(...) without the NamedTuple constructor's extra call: these run per record

__all__ = [
    "KStreamBranch",
    "KStreamFilter",
    "KStreamFlatMap",
    "KStreamFlatMapValues",
    "KStreamMap",
    "KStreamMapValues",
    "KStreamPassThrough",
    "KStreamPeek",
    "KStreamSelectKey",
]


class _Stateless(Generic[KR, VR]):
    """Forwards records of keys KR and values VR."""

    __slots__ = ("_forward",)

    def init(self, context: ProcessorContext[KR, VR]) -> None:
        self._forward: Callable[[Record[KR, VR]], None] = context.forward

    def close(self) -> None:
        """Nothing to release."""


class KStreamFilter(_Stateless[K, V]):
    """Forwards the records `predicate(key, value)` accepts (or rejects, for `filter_not`)."""

    __slots__ = ("_keep", "_predicate")

    def __init__(self, predicate: Callable[[K, V], object], negate: bool) -> None:
        self._predicate = predicate
        self._keep = not negate

    def process(self, record: Record[K, V]) -> None:
        if bool(self._predicate(record.key, record.value)) is self._keep:
            self._forward(record)


class KStreamMap(_Stateless[KR, VR], Generic[K, V, KR, VR]):
    """Forwards `mapper(key, value)` -> (new key, new value)."""

    __slots__ = ("_mapper",)

    def __init__(self, mapper: Callable[[K, V], tuple[KR, VR]]) -> None:
        self._mapper = mapper

    def process(self, record: Record[K, V]) -> None:
        key, value = self._mapper(record.key, record.value)
        self._forward(_new(Record, (key, value, record.timestamp, record.headers)))


class KStreamSelectKey(_Stateless[KR, V], Generic[K, V, KR]):
    """Forwards the record with the key `selector(key, value)`."""

    __slots__ = ("_selector",)

    def __init__(self, selector: Callable[[K, V], KR]) -> None:
        self._selector = selector

    def process(self, record: Record[K, V]) -> None:
        key, value, timestamp, headers = record
        self._forward(_new(Record, (self._selector(key, value), value, timestamp, headers)))


class KStreamMapValues(_Stateless[K, VR], Generic[K, V, VR]):
    """Forwards the record with the value `mapper(value)` (or `mapper(key, value)`)."""

    __slots__ = ("_mapper", "_with_key")

    def __init__(self, mapper: Callable[..., VR], with_key: bool) -> None:
        self._mapper = mapper
        self._with_key = with_key

    def process(self, record: Record[K, V]) -> None:
        key, value, timestamp, headers = record
        mapped = self._mapper(key, value) if self._with_key else self._mapper(value)
        self._forward(_new(Record, (key, mapped, timestamp, headers)))


class KStreamFlatMap(_Stateless[KR, VR], Generic[K, V, KR, VR]):
    """Forwards every (key, value) pair `mapper(key, value)` yields."""

    __slots__ = ("_mapper",)

    def __init__(self, mapper: Callable[[K, V], Iterable[tuple[KR, VR]]]) -> None:
        self._mapper = mapper

    def process(self, record: Record[K, V]) -> None:
        key, value, timestamp, headers = record
        forward = self._forward
        for new_key, new_value in self._mapper(key, value):
            forward(_new(Record, (new_key, new_value, timestamp, headers)))


class KStreamFlatMapValues(_Stateless[K, VR], Generic[K, V, VR]):
    """Forwards one record per value `mapper(value)` (or `mapper(key, value)`) yields."""

    __slots__ = ("_mapper", "_with_key")

    def __init__(self, mapper: Callable[..., Iterable[VR]], with_key: bool) -> None:
        self._mapper = mapper
        self._with_key = with_key

    def process(self, record: Record[K, V]) -> None:
        key, value, timestamp, headers = record
        forward = self._forward
        for new_value in self._mapper(key, value) if self._with_key else self._mapper(value):
            forward(_new(Record, (key, new_value, timestamp, headers)))


class KStreamPeek(_Stateless[K, V]):
    """Calls `action(key, value)`; forwards the record unless it is a terminal `foreach`."""

    __slots__ = ("_action", "_forward_downstream")

    def __init__(self, action: Callable[[K, V], object], forward_downstream: bool) -> None:
        self._action = action
        self._forward_downstream = forward_downstream

    def process(self, record: Record[K, V]) -> None:
        self._action(record.key, record.value)
        if self._forward_downstream:
            self._forward(record)


class KStreamPassThrough(_Stateless[K, V]):
    """Forwards every record unchanged (merges and branch children)."""

    __slots__ = ()

    def process(self, record: Record[K, V]) -> None:
        self._forward(record)


class KStreamBranch(Generic[K, V]):
    """Sends a record to the child of the first predicate that accepts it, else to the default child.

    The predicate and child lists are shared with the `split()` that fills them, so branches
    added after the processor node are seen by every processor built later.
    """

    __slots__ = ("_children", "_default", "_forward", "_predicates")

    def __init__(
        self, predicates: Sequence[Callable[[K, V], object]], children: Sequence[str], default: list[str]
    ) -> None:
        self._predicates = predicates
        self._children = children
        self._default = default

    def init(self, context: ProcessorContext[K, V]) -> None:
        self._forward = context.forward
        self._predicates = tuple(self._predicates)
        self._children = tuple(self._children)

    def process(self, record: Record[K, V]) -> None:
        key, value = record.key, record.value
        for predicate, child in zip(self._predicates, self._children, strict=True):
            if predicate(key, value):
                self._forward(record, child)
                return
        if self._default:
            self._forward(record, self._default[0])

    def close(self) -> None:
        """Nothing to release."""
