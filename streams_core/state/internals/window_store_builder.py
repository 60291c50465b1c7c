"""WindowStoreBuilder: builds `MeteredWindowStore`s over a window bytes store supplier."""

from __future__ import annotations

import logging
from typing import Any

from streams_core.serde import Serde
from streams_core.state.internals.abstract_store_builder import AbstractStoreBuilder
from streams_core.state.internals.caching_window_store import CachingWindowStore
from streams_core.state.internals.change_logging_stores import ChangeLoggingWindowBytesStore
from streams_core.state.internals.metered_window_store import MeteredWindowStore
from streams_core.state.internals.state_serdes import timestamped_values
from streams_core.state.store_supplier import WindowBytesStoreSupplier
from streams_core.state.window_store import WindowStore

__all__ = ["WindowStoreBuilder"]

log = logging.getLogger(__name__)


class WindowStoreBuilder(AbstractStoreBuilder[MeteredWindowStore[Any, Any]]):
    """One fresh store per `build()`; caching stays off for stores that retain duplicates."""

    def __init__(
        self, supplier: WindowBytesStoreSupplier, key_serde: Serde[Any] | None, value_serde: Serde[Any] | None
    ) -> None:
        super().__init__(supplier.name, key_serde, value_serde)
        self._supplier = supplier
        if supplier.retain_duplicates:  # a compacted changelog would keep one of a key's values (Java's WindowStoreBuilder)
            self._log_config = {"cleanup.policy": "delete"}

    @property
    def supplier(self) -> WindowBytesStoreSupplier:
        return self._supplier

    @property
    def retention_period(self) -> int:
        return self._supplier.retention_period

    def with_caching_enabled(self) -> WindowStoreBuilder:
        if self._supplier.retain_duplicates:
            log.warning("store %s retains duplicates: caching stays disabled", self._name)
            return self
        return super().with_caching_enabled()

    def build(self) -> MeteredWindowStore[Any, Any]:
        store = self._supplier.get()
        if self._logging_enabled:
            store = self._wrap_logging(store)
        if self._caching_enabled:
            store = self._wrap_caching(store)
        return MeteredWindowStore(store, self._key_serde, self._value_serde, self._supplier.metrics_scope)

    def _wrap_logging(self, store: WindowStore[bytes, bytes]) -> WindowStore[bytes, bytes]:
        """Log every write to the changelog topic (Kafka Streams' ChangeLogging layer)."""
        return ChangeLoggingWindowBytesStore(store, timestamped=timestamped_values(self._value_serde))

    def _wrap_caching(self, store: WindowStore[bytes, bytes]) -> WindowStore[bytes, bytes]:
        """Put the thread's record cache in front of the store (Kafka Streams' Caching layer)."""
        return CachingWindowStore(store)
