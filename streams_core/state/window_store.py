"""The interfaces of window stores: values kept per (key, window start) for windowed operations.

A window store serves windowed aggregations (one value per key and window) and stream-stream
joins (`retain_duplicates`: every record of a window is kept, in insertion order). Times are
epoch milliseconds; time ranges are inclusive and apply to the window start. A window whose
start is at or before `observed stream time - retention period` has expired: it is no longer
returned and is dropped when written.

`fetch` takes 2, 3 or 4 arguments, as Java's overloads:
    fetch(key, window_start)                      -> value or None
    fetch(key, time_from, time_to)                -> KeyValue(window_start, value), by start
    fetch(key_from, key_to, time_from, time_to)   -> KeyValue(Windowed(key, window), value),
                                                     by serialized key, then window start
`all()` and `fetch_all(time_from, time_to)` order by window start, then serialized key.
`backward_*` variants yield the same entries in reverse order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, TypeVar, overload

from streams_core.common.store import KeyValue, StateStore
from streams_core.state.windowed import Windowed

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["ReadOnlyWindowStore", "WindowStore"]


class ReadOnlyWindowStore(Protocol[K, V]):
    """Reads of a window store; what interactive queries are given."""

    @overload
    def fetch(self, key: K, time: int, /) -> V | None: ...

    @overload
    def fetch(self, key: K, time_from: int, time_to: int, /) -> Iterator[KeyValue[int, V]]: ...

    @overload
    def fetch(
        self, key_from: K | None, key_to: K | None, time_from: int, time_to: int, /
    ) -> Iterator[KeyValue[Windowed[K], V]]: ...

    def fetch(self, *args: Any) -> Any: ...

    @overload
    def backward_fetch(self, key: K, time_from: int, time_to: int, /) -> Iterator[KeyValue[int, V]]: ...

    @overload
    def backward_fetch(
        self, key_from: K | None, key_to: K | None, time_from: int, time_to: int, /
    ) -> Iterator[KeyValue[Windowed[K], V]]: ...

    def backward_fetch(self, *args: Any) -> Any: ...

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[KeyValue[Windowed[K], V]]: ...

    def backward_fetch_all(self, time_from: int, time_to: int) -> Iterator[KeyValue[Windowed[K], V]]: ...

    def all(self) -> Iterator[KeyValue[Windowed[K], V]]: ...

    def backward_all(self) -> Iterator[KeyValue[Windowed[K], V]]: ...


class WindowStore(StateStore, ReadOnlyWindowStore[K, V], Protocol[K, V]):
    """A read-write window store; `put(key, None, start)` deletes (unless duplicates are kept)."""

    @property
    def window_size(self) -> int: ...

    @property
    def retention_period(self) -> int: ...

    @property
    def retain_duplicates(self) -> bool: ...

    def put(self, key: K, value: V | None, window_start_timestamp: int) -> None: ...
