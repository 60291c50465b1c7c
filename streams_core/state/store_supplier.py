"""Store suppliers: what `Stores.persistent_key_value_store(...)` and friends return.

A supplier makes a fresh bytes store (`get()`) each time a task needs one; a store builder
wraps it in the typed and optional caching / change-logging layers. Implement these to plug
in a custom bytes store.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from streams_core.common.store import KeyValueStore, StateStore
from streams_core.state.session_store import SessionStore
from streams_core.state.window_store import WindowStore

S = TypeVar("S", bound=StateStore, covariant=True)

__all__ = ["KeyValueBytesStoreSupplier", "SessionBytesStoreSupplier", "StoreSupplier", "WindowBytesStoreSupplier"]


class StoreSupplier(Protocol[S]):
    """Makes new instances of one named bytes store."""

    @property
    def name(self) -> str: ...

    @property
    def metrics_scope(self) -> str:
        """Groups the store's metrics by kind, e.g. "sqlite-state", "in-memory-window-state"."""
        ...

    def get(self) -> S:
        """A new, uninitialised store; every call returns a different instance."""
        ...


class KeyValueBytesStoreSupplier(StoreSupplier[KeyValueStore[bytes, bytes]], Protocol):
    """Supplies bytes key-value stores."""


class WindowBytesStoreSupplier(StoreSupplier[WindowStore[bytes, bytes]], Protocol):
    """Supplies bytes window stores."""

    @property
    def retention_period(self) -> int: ...

    @property
    def window_size(self) -> int: ...

    @property
    def retain_duplicates(self) -> bool: ...

    @property
    def segment_interval(self) -> int: ...


class SessionBytesStoreSupplier(StoreSupplier[SessionStore[bytes, bytes]], Protocol):
    """Supplies bytes session stores."""

    @property
    def retention_period(self) -> int: ...

    @property
    def segment_interval(self) -> int: ...
