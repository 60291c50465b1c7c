"""The base of store layers (metered, caching, change logging), as Kafka Streams' `WrappedStateStore`.

A layer wraps the next store down and forwards the lifecycle to it; layers override only the
operations their concern touches. Builders stack them: Metered(Caching(ChangeLogging(bytes))).
"""

from __future__ import annotations

from typing import Generic, TypeVar

from streams_core.common.store import StateStore, StateStoreContext

S = TypeVar("S", bound=StateStore)

__all__ = ["WrappedStateStore"]


class WrappedStateStore(Generic[S]):
    """Forwards name, lifecycle and flags to the wrapped store."""

    def __init__(self, wrapped: S) -> None:
        self._wrapped = wrapped

    @property
    def name(self) -> str:
        return self._wrapped.name

    @property
    def persistent(self) -> bool:
        return self._wrapped.persistent

    @property
    def is_open(self) -> bool:
        return self._wrapped.is_open

    def wrapped(self) -> S:
        """The next store down."""
        return self._wrapped

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._wrapped.init(context, root)

    def flush(self) -> None:
        self._wrapped.flush()

    def close(self) -> None:
        self._wrapped.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._wrapped!r})"
