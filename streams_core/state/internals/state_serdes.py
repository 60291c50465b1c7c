"""StateSerdes: a store's key and value serdes bound to its changelog topic (as Kafka Streams').

Serdes receive the changelog topic name, as they do in Java. Every failure surfaces as a
SerializationError or DeserializationError naming the store; a serde's own errors of those
types pass through unchanged.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from streams_core.errors import DeserializationError, SerializationError
from streams_core.serde import Serde

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["StateSerdes", "timestamped_values"]

_NO_KEY = object()
_IMMUTABLE_KEYS = frozenset((str, bytes, int))


def timestamped_values(value_serde: object) -> bool:
    """Whether a store of `value_serde`'s values holds value-and-timestamp bytes: the serde alone
    says so (`ValueAndTimestampSerde.timestamped_values`); such a store logs Java's timestamped
    changelog (change_logging_stores) and a restore puts the timestamps back in front."""
    return bool(getattr(value_serde, "timestamped_values", False))


class StateSerdes(Generic[K, V]):
    """Converts a store's keys and values to bytes and back."""

    __slots__ = ("key_serde", "last_key", "last_raw_key", "store_name", "topic", "value_serde")

    def __init__(self, store_name: str, topic: str, key_serde: Serde[K], value_serde: Serde[V]) -> None:
        self.store_name = store_name
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.last_key: object = _NO_KEY
        """The last key `raw_key` serialized when it is of an immutable type (str, bytes, int), else
        a sentinel: a caller that gets the same object again may take `last_raw_key` (a get then a
        put of one key, as an aggregation does, serializes it once)."""
        self.last_raw_key = b""

    def raw_key(self, key: K) -> bytes:
        """The bytes of a key; None is refused (stores have no null keys)."""
        if key is None:
            raise TypeError(f"store {self.store_name!r}: a key cannot be None")
        try:
            raw = self.key_serde.serialize(self.topic, key)
        except SerializationError:
            raise
        except Exception as exc:
            raise self._serialization_error("key", key, self.key_serde, exc) from exc
        if raw is None:
            raise SerializationError(f"store {self.store_name!r}: key serde turned {key!r} into None", topic=self.topic)
        if type(key) in _IMMUTABLE_KEYS:
            self.last_key, self.last_raw_key = key, raw
        return raw

    def raw_prefix(self, prefix: Any, prefix_serde: Serde[Any] | None) -> bytes:
        """The bytes of a prefix-scan prefix, by `prefix_serde` or else by the key serde."""
        if prefix_serde is None:
            return self.raw_key(prefix)
        if prefix is None:
            raise TypeError(f"store {self.store_name!r}: a prefix cannot be None")
        try:
            raw = prefix_serde.serialize(self.topic, prefix)
        except SerializationError:
            raise
        except Exception as exc:
            raise self._serialization_error("prefix", prefix, prefix_serde, exc) from exc
        if raw is None:
            raise SerializationError(f"store {self.store_name!r}: prefix serde turned {prefix!r} into None")
        return raw

    def raw_value(self, value: V | None) -> bytes | None:
        """The bytes of a value; None stays None (a delete)."""
        try:
            return self.value_serde.serialize(self.topic, value)
        except SerializationError:
            raise
        except Exception as exc:
            raise self.value_serialization_error(value, exc) from exc

    def value_serialization_error(self, value: Any, exc: Exception) -> SerializationError:
        """What `raw_value` raises for a value serde's failure other than a SerializationError."""
        return self._serialization_error("value", value, self.value_serde, exc)

    def key_from(self, raw: bytes) -> K:
        try:
            return self.key_serde.deserialize(self.topic, raw)  # type: ignore[return-value]
        except DeserializationError:
            raise
        except Exception as exc:
            raise DeserializationError(
                f"store {self.store_name!r}: cannot deserialize a key: {exc}", topic=self.topic
            ) from exc

    def value_from(self, raw: bytes | None) -> V | None:
        try:
            return self.value_serde.deserialize(self.topic, raw)
        except DeserializationError:
            raise
        except Exception as exc:
            raise self.value_deserialization_error(exc) from exc

    def value_deserialization_error(self, exc: Exception) -> DeserializationError:
        """What `value_from` raises for a value serde's failure other than a DeserializationError."""
        return DeserializationError(f"store {self.store_name!r}: cannot deserialize a value: {exc}", topic=self.topic)

    def _serialization_error(self, what: str, data: Any, serde: Serde[Any], exc: Exception) -> SerializationError:
        return SerializationError(
            f"store {self.store_name!r}: cannot serialize {what} {data!r} with {serde!r}: {exc}", topic=self.topic
        )
