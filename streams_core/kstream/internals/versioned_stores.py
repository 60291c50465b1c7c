"""The DSL's side of versioned tables: the serdes of the store of versions and its builder.

See `streams_core.state.versioned_key_value_store` for the store itself.
"""

from __future__ import annotations

import struct
from typing import Any

from streams_core.kstream.internals.dsl_serde import WrappingSerde
from streams_core.state.versioned_key_value_store import DELETED, VersionedKeyValueStore

__all__ = ["VersionedKeySerde", "VersionedStoreBuilder", "VersionedValueSerde"]

_TOMBSTONE = b"\x00"


class VersionedKeySerde(WrappingSerde[tuple[Any, int]]):
    """(key, timestamp) as the key's bytes then the timestamp, 8 bytes big-endian (order: key, time)."""

    name = "VersionedKey"
    role = "key"

    def serialize(self, topic: str | None, data: tuple[Any, int] | None) -> bytes | None:
        if data is None:
            return None
        key, timestamp = data
        return (self.inner.serialize(topic, key) or b"") + struct.pack(">q", timestamp)

    def deserialize(self, topic: str | None, data: bytes | None) -> tuple[Any, int] | None:
        if data is None:
            return None
        (timestamp,) = struct.unpack(">q", data[-8:])
        return self.inner.deserialize(topic, data[:-8]), timestamp


class VersionedValueSerde(WrappingSerde[Any]):
    """A version's value: a flag byte (0: tombstone, 1: value) then the value's bytes."""

    name = "VersionedValue"
    role = "value"

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is DELETED:
            return _TOMBSTONE
        return b"\x01" + (self.inner.serialize(topic, data) or b"")

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        if data == _TOMBSTONE:
            return DELETED
        return self.inner.deserialize(topic, data[1:])


class VersionedStoreBuilder:
    """Builds a `VersionedKeyValueStore` over a key-value store builder of versions (no caching)."""

    def __init__(self, builder: Any, history_retention_ms: int) -> None:
        self._builder = builder.with_caching_disabled()
        self._history_retention_ms = history_retention_ms

    @property
    def name(self) -> str:
        return self._builder.name  # type: ignore[no-any-return]

    @property
    def history_retention_ms(self) -> int:
        return self._history_retention_ms

    @property
    def logging_enabled(self) -> bool:
        return self._builder.logging_enabled  # type: ignore[no-any-return]

    @property
    def caching_enabled(self) -> bool:
        return False

    def log_config(self) -> dict[str, str]:
        return self._builder.log_config()  # type: ignore[no-any-return]

    def with_caching_enabled(self) -> VersionedStoreBuilder:
        return self  # a versioned store has no cache, as in Kafka Streams

    def with_caching_disabled(self) -> VersionedStoreBuilder:
        return self

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> VersionedStoreBuilder:
        self._builder.with_logging_enabled(config)
        return self

    def with_logging_disabled(self) -> VersionedStoreBuilder:
        self._builder.with_logging_disabled()
        return self

    def build(self) -> VersionedKeyValueStore:
        return VersionedKeyValueStore(self._builder.build(), self._history_retention_ms)

    def __getattr__(self, name: str) -> Any:
        if name == "_builder":
            raise AttributeError(name)
        return getattr(self._builder, name)
