"""The versioned-store queries of IQv2 (KIP-960, KIP-968): a key's value as of a time, or its versions over a range.

- `VersionedKeyQuery.with_key(k)` (`.as_of(t)`): the `VersionedRecord` valid at `t` (the
  latest without `as_of`), None when there is none (absent, deleted, or older than the history).
- `MultiVersionedKeyQuery.with_key(k)` (`.from_time(t1)`, `.to_time(t2)`): every version valid at
  some time in `[t1, t2]` (a version valid from 5 to 15 counts for a range from 10), as an
  iterator of `VersionedRecord`s; `with_ascending_timestamps()` / `with_descending_timestamps()`
  order them; ANY, the default, is newest first (as Kafka's RocksDB versioned store answers).

Versioned stores answer only these (a KeyQuery of one is UNKNOWN_QUERY_TYPE, as in Kafka).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from streams_core.query.queries import Query, ResultOrder

__all__ = ["MultiVersionedKeyQuery", "VersionedKeyQuery"]



@dataclass(frozen=True, slots=True)
class VersionedKeyQuery(Query[Any]):
    """The version of a key valid at a time (`as_of`), or its latest."""

    _key: Any
    _as_of: int | None = None

    @classmethod
    def with_key(cls, key: Any) -> VersionedKeyQuery:
        if key is None:
            raise ValueError("the key of a versioned key query cannot be None")
        return cls(key)

    def as_of(self, as_of_timestamp: int) -> VersionedKeyQuery:
        return replace(self, _as_of=as_of_timestamp)

    def key(self) -> Any:
        return self._key

    def as_of_timestamp(self) -> int | None:
        """The time, or None for the latest version (Kafka's Optional.empty())."""
        return self._as_of


@dataclass(frozen=True, slots=True)
class MultiVersionedKeyQuery(Query[Any]):
    """A key's versions valid at some time in `[from_time, to_time]` (either end open when None)."""

    _key: Any
    _from: int | None = None
    _to: int | None = None
    _order: ResultOrder = ResultOrder.ANY

    @classmethod
    def with_key(cls, key: Any) -> MultiVersionedKeyQuery:
        if key is None:
            raise ValueError("the key of a multi-versioned key query cannot be None")
        return cls(key)

    def from_time(self, from_time: int) -> MultiVersionedKeyQuery:
        return replace(self, _from=from_time)

    def to_time(self, to_time: int) -> MultiVersionedKeyQuery:
        return replace(self, _to=to_time)

    def with_descending_timestamps(self) -> MultiVersionedKeyQuery:
        return replace(self, _order=ResultOrder.DESCENDING)

    def with_ascending_timestamps(self) -> MultiVersionedKeyQuery:
        return replace(self, _order=ResultOrder.ASCENDING)

    def key(self) -> Any:
        return self._key

    def get_from_time(self) -> int | None:
        return self._from

    def get_to_time(self) -> int | None:
        return self._to

    def result_order(self) -> ResultOrder:
        return self._order
