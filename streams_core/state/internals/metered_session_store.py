"""MeteredSessionStore: the typed layer of a session store (serdes, counts, opt-in latency)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

from streams_core.common.store import KeyValue
from streams_core.state.internals.metered_state_store import MeteredStateStore
from streams_core.state.session_store import SessionStore
from streams_core.state.windowed import Windowed

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["MeteredSessionStore"]


class MeteredSessionStore(MeteredStateStore[SessionStore[bytes, bytes], K, V]):
    """A `SessionStore[K, V]` over a bytes session store; see `streams_core.state.session_store`."""

    OPERATIONS = (
        "put", "remove", "fetch_session", "find_sessions", "backward_find_sessions", "fetch",
        "backward_fetch", "flush",
    )  # fmt: skip

    @property
    def retention_period(self) -> int:
        return self._wrapped.retention_period

    def put(self, session_key: Windowed[K], value: V | None) -> None:
        """Store the session's value; None removes it."""
        self._counts["put"] += 1
        serdes = self._serdes
        raw_key = Windowed(serdes.raw_key(session_key.key), session_key.window)
        self._wrapped.put(raw_key, serdes.raw_value(value))

    def remove(self, session_key: Windowed[K]) -> None:
        self._counts["remove"] += 1
        self._wrapped.remove(Windowed(self._serdes.raw_key(session_key.key), session_key.window))

    def fetch_session(self, key: K, session_start_time: int, session_end_time: int) -> V | None:
        self._counts["fetch_session"] += 1
        serdes = self._serdes
        raw = self._wrapped.fetch_session(serdes.raw_key(key), session_start_time, session_end_time)
        return None if raw is None else serdes.value_from(raw)

    def find_sessions(self, *args: Any) -> Iterator[KeyValue[Windowed[K], V]]:
        """find_sessions(key, earliest_end, latest_start) or (key_from, key_to, earliest_end, latest_start)."""
        self._counts["find_sessions"] += 1
        return self._sessions(self._wrapped.find_sessions, args, 2)

    def backward_find_sessions(self, *args: Any) -> Iterator[KeyValue[Windowed[K], V]]:
        self._counts["backward_find_sessions"] += 1
        return self._sessions(self._wrapped.backward_find_sessions, args, 2)

    def fetch(self, *args: Any) -> Iterator[KeyValue[Windowed[K], V]]:
        """fetch(key) or fetch(key_from, key_to): every live session."""
        self._counts["fetch"] += 1
        return self._sessions(self._wrapped.fetch, args, 0)

    def backward_fetch(self, *args: Any) -> Iterator[KeyValue[Windowed[K], V]]:
        self._counts["backward_fetch"] += 1
        return self._sessions(self._wrapped.backward_fetch, args, 0)

    def _sessions(self, call: Any, args: tuple[Any, ...], times: int) -> Iterator[KeyValue[Windowed[K], V]]:
        serdes = self._serdes
        keys = args[: len(args) - times]
        if len(keys) == 1:
            raw_keys: tuple[bytes | None, ...] = (serdes.raw_key(keys[0]),)
        else:
            raw_keys = tuple(None if k is None else serdes.raw_key(k) for k in keys)
        return self._typed(call(*raw_keys, *args[len(keys) :]))

    def _typed(self, entries: Iterator[KeyValue[Windowed[bytes], bytes]]) -> Iterator[KeyValue[Windowed[K], V]]:
        key_from, value_from = self._serdes.key_from, self._serdes.value_from
        for windowed, raw_value in entries:
            yield KeyValue(Windowed(key_from(windowed.key), windowed.window), value_from(raw_value))  # type: ignore[arg-type]
