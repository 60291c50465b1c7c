"""MeteredWindowStore: the typed layer of a window store (serdes, counts, opt-in latency)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

from streams_core.common.store import KeyValue
from streams_core.state.internals.metered_state_store import MeteredStateStore
from streams_core.state.window_store import WindowStore
from streams_core.state.windowed import Windowed

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["MeteredWindowStore"]


class MeteredWindowStore(MeteredStateStore[WindowStore[bytes, bytes], K, V]):
    """A `WindowStore[K, V]` over a bytes window store; see `streams_core.state.window_store`."""

    OPERATIONS = ("put", "fetch", "backward_fetch", "fetch_all", "backward_fetch_all", "all", "backward_all", "flush")

    @property
    def window_size(self) -> int:
        return self._wrapped.window_size

    @property
    def retention_period(self) -> int:
        return self._wrapped.retention_period

    @property
    def retain_duplicates(self) -> bool:
        return self._wrapped.retain_duplicates

    def put(self, key: K, value: V | None, window_start_timestamp: int) -> None:
        self._counts["put"] += 1
        serdes = self._serdes
        self._wrapped.put(serdes.raw_key(key), serdes.raw_value(value), window_start_timestamp)

    def fetch(self, *args: Any) -> Any:
        """fetch(key, start) -> value; fetch(key, from, to); fetch(key_from, key_to, from, to)."""
        self._counts["fetch"] += 1
        serdes = self._serdes
        if len(args) == 2:
            raw = self._wrapped.fetch(serdes.raw_key(args[0]), args[1])
            return None if raw is None else serdes.value_from(raw)
        return self._iterate(self._wrapped.fetch, args)

    def backward_fetch(self, *args: Any) -> Any:
        self._counts["backward_fetch"] += 1
        return self._iterate(self._wrapped.backward_fetch, args)

    def _iterate(self, fetch: Any, args: tuple[Any, ...]) -> Iterator[Any]:
        serdes = self._serdes
        if len(args) == 3:
            key, time_from, time_to = args
            return self._by_time(fetch(serdes.raw_key(key), time_from, time_to))
        if len(args) == 4:
            key_from, key_to, time_from, time_to = args
            raw_from = None if key_from is None else serdes.raw_key(key_from)
            raw_to = None if key_to is None else serdes.raw_key(key_to)
            return self._windowed(fetch(raw_from, raw_to, time_from, time_to))
        raise TypeError(f"fetch takes 2, 3 or 4 arguments ({len(args)} given)")

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[KeyValue[Windowed[K], V]]:
        self._counts["fetch_all"] += 1
        return self._windowed(self._wrapped.fetch_all(time_from, time_to))

    def backward_fetch_all(self, time_from: int, time_to: int) -> Iterator[KeyValue[Windowed[K], V]]:
        self._counts["backward_fetch_all"] += 1
        return self._windowed(self._wrapped.backward_fetch_all(time_from, time_to))

    def all(self) -> Iterator[KeyValue[Windowed[K], V]]:
        self._counts["all"] += 1
        return self._windowed(self._wrapped.all())

    def backward_all(self) -> Iterator[KeyValue[Windowed[K], V]]:
        self._counts["backward_all"] += 1
        return self._windowed(self._wrapped.backward_all())

    def _by_time(self, entries: Iterator[KeyValue[int, bytes]]) -> Iterator[KeyValue[int, V]]:
        value_from = self._serdes.value_from
        for start, raw_value in entries:
            yield KeyValue(start, value_from(raw_value))  # type: ignore[arg-type]

    def _windowed(self, entries: Iterator[KeyValue[Windowed[bytes], bytes]]) -> Iterator[KeyValue[Windowed[K], V]]:
        key_from, value_from = self._serdes.key_from, self._serdes.value_from
        for windowed, raw_value in entries:
            yield KeyValue(Windowed(key_from(windowed.key), windowed.window), value_from(raw_value))  # type: ignore[arg-type]
