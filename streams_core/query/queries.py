"""The key-value queries of IQv2 (KIP-796, KIP-805, KIP-969, KIP-992): immutable values a store answers.

- `KeyQuery.with_key(k)`: the key's value (a timestamped store answers the plain value).
- `RangeQuery.with_range(lo, hi)` / `with_lower_bound` / `with_upper_bound` / `with_no_bounds`:
  the entries with keys in the bounds (inclusive, either may be open), as an iterator of
  `KeyValue`s; `with_descending_keys()` / `with_ascending_keys()` choose the `ResultOrder`
  (ANY, the default, is the store's key order: ascending serialized keys).
- `TimestampedKeyQuery` / `TimestampedRangeQuery`: the same, answering `ValueAndTimestamp`s;
  only stores that keep timestamps (KTable stores) know them (else UNKNOWN_QUERY_TYPE).

Every builder method returns a new query, as Kafka's do.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any, Generic, Self, TypeVar

__all__ = [
    "KeyQuery",
    "Query",
    "RangeQuery",
    "ResultOrder",
    "TimestampedKeyQuery",
    "TimestampedRangeQuery",
]

R = TypeVar("R")


class Query(Generic[R]):
    """A query a store may answer with a result of type R (Kafka's marker interface `Query<R>`)."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as its class and fields, rebuilt by its constructor: a query goes to a worker process with
        every query of its store there, and a frozen dataclass's own pickling costs several times more."""
        fields: dict[str, Any] = getattr(self, "__dataclass_fields__", {})
        return type(self), tuple(getattr(self, name) for name in fields)


class ResultOrder(enum.Enum):
    """The order of a range query's results: ANY (the store's own: ascending keys), ASCENDING, DESCENDING."""

    ANY = "ANY"
    ASCENDING = "ASCENDING"
    DESCENDING = "DESCENDING"


@dataclass(frozen=True, slots=True)
class _KeyQuery(Query[Any]):
    _key: Any

    @classmethod
    def with_key(cls, key: Any) -> Self:
        if key is None:
            raise ValueError("the key of a key query cannot be None")
        return cls(key)

    def key(self) -> Any:
        return self._key


@dataclass(frozen=True, slots=True)
class KeyQuery(_KeyQuery):
    """The value of one key (None when absent)."""

    skip_cache_flag: bool = False

    def skip_cache(self) -> KeyQuery:
        """Kafka's hint to read past the record cache; accepted and ignored here (reads see the cache)."""
        return replace(self, skip_cache_flag=True)

    def is_skip_cache(self) -> bool:
        return self.skip_cache_flag


@dataclass(frozen=True, slots=True)
class TimestampedKeyQuery(_KeyQuery):
    """The `ValueAndTimestamp` of one key (None when absent); timestamped stores only."""


@dataclass(frozen=True, slots=True)
class _RangeQuery(Query[Any]):
    _lower: Any = None
    _upper: Any = None
    _order: ResultOrder = ResultOrder.ANY

    @classmethod
    def with_range(cls, lower: Any, upper: Any) -> Self:
        """Keys from `lower` to `upper`, both inclusive; None leaves that end open."""
        return cls(lower, upper)

    @classmethod
    def with_lower_bound(cls, lower: Any) -> Self:
        return cls(lower, None)

    @classmethod
    def with_upper_bound(cls, upper: Any) -> Self:
        return cls(None, upper)

    @classmethod
    def with_no_bounds(cls) -> Self:
        return cls()

    def lower_bound(self) -> Any:
        """The lower bound, or None when open (Kafka's Optional.empty())."""
        return self._lower

    def upper_bound(self) -> Any:
        return self._upper

    def result_order(self) -> ResultOrder:
        return self._order

    def with_descending_keys(self) -> Self:
        return replace(self, _order=ResultOrder.DESCENDING)

    def with_ascending_keys(self) -> Self:
        return replace(self, _order=ResultOrder.ASCENDING)


@dataclass(frozen=True, slots=True)
class RangeQuery(_RangeQuery):
    """The entries whose keys lie in the bounds, as an iterator of `KeyValue(key, value)`."""


@dataclass(frozen=True, slots=True)
class TimestampedRangeQuery(_RangeQuery):
    """The entries in the bounds as `KeyValue(key, ValueAndTimestamp)`; timestamped stores only."""
