"""The window queries of IQv2 (KIP-806): windows of a key by start time, or all keys' windows.

Times are epoch milliseconds (Kafka's take `Instant`s), both ends inclusive.

- `WindowKeyQuery.with_key_and_window_start_range(key, time_from, time_to)`: the key's windows
  starting in the range, as an iterator of `(window_start, value)` pairs (Kafka's
  `WindowStoreIterator`), window stores only.
- `WindowRangeQuery.with_window_start_range(time_from, time_to)`: every key's windows starting in
  the range, as `KeyValue(Windowed(key, window), value)`, window stores only;
  `WindowRangeQuery.with_key(key)`: the key's sessions, session stores only (as in Kafka, a window
  store answers a key-only WindowRangeQuery with UNKNOWN_QUERY_TYPE).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streams_core.query.queries import Query

__all__ = ["WindowKeyQuery", "WindowRangeQuery"]



@dataclass(frozen=True, slots=True)
class WindowKeyQuery(Query[Any]):
    """A key's windows whose start lies in `[time_from, time_to]`."""

    _key: Any
    _time_from: int
    _time_to: int

    @classmethod
    def with_key_and_window_start_range(cls, key: Any, time_from: int, time_to: int) -> WindowKeyQuery:
        if key is None:
            raise ValueError("the key of a window key query cannot be None")
        return cls(key, time_from, time_to)

    def key(self) -> Any:
        return self._key

    def time_from(self) -> int:
        return self._time_from

    def time_to(self) -> int:
        return self._time_to


@dataclass(frozen=True, slots=True)
class WindowRangeQuery(Query[Any]):
    """Every key's windows starting in a range (window stores), or one key's sessions (session stores)."""

    _key: Any = None
    _time_from: int | None = None
    _time_to: int | None = None

    @classmethod
    def with_key(cls, key: Any) -> WindowRangeQuery:
        if key is None:
            raise ValueError("the key of a window range query cannot be None")
        return cls(key)

    @classmethod
    def with_window_start_range(cls, time_from: int, time_to: int) -> WindowRangeQuery:
        return cls(None, time_from, time_to)

    def key(self) -> Any:
        """The key, or None for a window start range (Kafka's Optional.empty())."""
        return self._key

    def time_from(self) -> int | None:
        return self._time_from

    def time_to(self) -> int | None:
        return self._time_to
