"""The interfaces of session stores: one value per (key, session window) for session windows.

A session is keyed by `Windowed(key, SessionWindow(start, end))`. `find_sessions` returns the
sessions of a key (or key range) with `end >= earliest_session_end_time` and
`start <= latest_session_start_time`, ordered by serialized key, then session end, then start.
A session whose end is at or before `observed stream time - retention period` has expired.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, TypeVar, overload

from streams_core.common.store import KeyValue, StateStore
from streams_core.state.windowed import Windowed

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["ReadOnlySessionStore", "SessionStore"]

SessionIterator = Iterator[KeyValue[Windowed[K], V]]


class ReadOnlySessionStore(Protocol[K, V]):
    """Reads of a session store; what interactive queries are given."""

    @overload
    def find_sessions(
        self, key: K, earliest_session_end_time: int, latest_session_start_time: int, /
    ) -> SessionIterator[K, V]: ...

    @overload
    def find_sessions(
        self,
        key_from: K | None,
        key_to: K | None,
        earliest_session_end_time: int,
        latest_session_start_time: int,
        /,
    ) -> SessionIterator[K, V]: ...

    def find_sessions(self, *args: Any) -> SessionIterator[K, V]: ...

    def backward_find_sessions(self, *args: Any) -> SessionIterator[K, V]:
        """`find_sessions` in reverse order (same 3 or 4 arguments)."""
        ...

    @overload
    def fetch(self, key: K, /) -> SessionIterator[K, V]: ...

    @overload
    def fetch(self, key_from: K | None, key_to: K | None, /) -> SessionIterator[K, V]: ...

    def fetch(self, *args: Any) -> SessionIterator[K, V]:
        """Every live session of a key (or inclusive key range)."""
        ...

    def backward_fetch(self, *args: Any) -> SessionIterator[K, V]: ...

    def fetch_session(self, key: K, session_start_time: int, session_end_time: int) -> V | None: ...


class SessionStore(StateStore, ReadOnlySessionStore[K, V], Protocol[K, V]):
    """A read-write session store; `put(windowed, None)` removes the session."""

    @property
    def retention_period(self) -> int: ...

    def put(self, session_key: Windowed[K], value: V | None) -> None: ...

    def remove(self, session_key: Windowed[K]) -> None: ...
