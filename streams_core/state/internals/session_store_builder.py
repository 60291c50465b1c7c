"""SessionStoreBuilder: builds `MeteredSessionStore`s over a session bytes store supplier."""

from __future__ import annotations

from typing import Any

from streams_core.serde import Serde
from streams_core.state.internals.abstract_store_builder import AbstractStoreBuilder
from streams_core.state.internals.caching_session_store import CachingSessionStore
from streams_core.state.internals.change_logging_stores import ChangeLoggingSessionBytesStore
from streams_core.state.internals.metered_session_store import MeteredSessionStore
from streams_core.state.session_store import SessionStore
from streams_core.state.store_supplier import SessionBytesStoreSupplier

__all__ = ["SessionStoreBuilder"]


class SessionStoreBuilder(AbstractStoreBuilder[MeteredSessionStore[Any, Any]]):
    """One fresh store per `build()` (one per task)."""

    def __init__(
        self, supplier: SessionBytesStoreSupplier, key_serde: Serde[Any] | None, value_serde: Serde[Any] | None
    ) -> None:
        super().__init__(supplier.name, key_serde, value_serde)
        self._supplier = supplier

    @property
    def supplier(self) -> SessionBytesStoreSupplier:
        return self._supplier

    @property
    def retention_period(self) -> int:
        return self._supplier.retention_period

    def build(self) -> MeteredSessionStore[Any, Any]:
        store = self._supplier.get()
        if self._logging_enabled:
            store = self._wrap_logging(store)
        if self._caching_enabled:
            store = self._wrap_caching(store)
        return MeteredSessionStore(store, self._key_serde, self._value_serde, self._supplier.metrics_scope)

    def _wrap_logging(self, store: SessionStore[bytes, bytes]) -> SessionStore[bytes, bytes]:
        """Log every write to the changelog topic (Kafka Streams' ChangeLogging layer)."""
        return ChangeLoggingSessionBytesStore(store)

    def _wrap_caching(self, store: SessionStore[bytes, bytes]) -> SessionStore[bytes, bytes]:
        """Put the thread's record cache in front of the store (Kafka Streams' Caching layer)."""
        return CachingSessionStore(store)
