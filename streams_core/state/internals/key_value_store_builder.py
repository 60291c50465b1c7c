"""KeyValueStoreBuilder: builds `MeteredKeyValueStore`s over a key-value bytes store supplier."""

from __future__ import annotations

from typing import Any

from streams_core.common.store import KeyValueStore
from streams_core.serde import Serde
from streams_core.state.internals.abstract_store_builder import AbstractStoreBuilder
from streams_core.state.internals.caching_key_value_store import CachingKeyValueStore
from streams_core.state.internals.change_logging_stores import ChangeLoggingKeyValueBytesStore
from streams_core.state.internals.metered_key_value_store import MeteredKeyValueStore
from streams_core.state.internals.state_serdes import timestamped_values
from streams_core.state.store_supplier import KeyValueBytesStoreSupplier

__all__ = ["KeyValueStoreBuilder"]


class KeyValueStoreBuilder(AbstractStoreBuilder[MeteredKeyValueStore[Any, Any]]):
    """One fresh store per `build()` (one per task)."""

    def __init__(
        self, supplier: KeyValueBytesStoreSupplier, key_serde: Serde[Any] | None, value_serde: Serde[Any] | None
    ) -> None:
        super().__init__(supplier.name, key_serde, value_serde)
        self._supplier = supplier

    @property
    def supplier(self) -> KeyValueBytesStoreSupplier:
        return self._supplier

    def build(self) -> MeteredKeyValueStore[Any, Any]:
        store = self._supplier.get()
        if self._logging_enabled:
            store = self._wrap_logging(store)
        if self._caching_enabled:
            store = self._wrap_caching(store)
        return MeteredKeyValueStore(store, self._key_serde, self._value_serde, self._supplier.metrics_scope)

    def _wrap_logging(self, store: KeyValueStore[bytes, bytes]) -> KeyValueStore[bytes, bytes]:
        """Log every write to the changelog topic (Kafka Streams' ChangeLogging layer)."""
        return ChangeLoggingKeyValueBytesStore(store, timestamped=timestamped_values(self._value_serde))

    def _wrap_caching(self, store: KeyValueStore[bytes, bytes]) -> KeyValueStore[bytes, bytes]:
        """Put the thread's record cache in front of the store (Kafka Streams' Caching layer)."""
        return CachingKeyValueStore(store)
