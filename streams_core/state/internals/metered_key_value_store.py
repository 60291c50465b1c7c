"""MeteredKeyValueStore: the typed layer of a key-value store (serdes, counts, opt-in latency)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from streams_core.errors import DeserializationError, SerializationError
from streams_core.serde import Serde
from streams_core.state.internals.metered_state_store import MeteredStateStore
from streams_core.state.store import KeyValue, KeyValueStore, key_value

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["MeteredKeyValueStore"]


class MeteredKeyValueStore(MeteredStateStore[KeyValueStore[bytes, bytes], K, V]):
    """A `KeyValueStore[K, V]` over a bytes store; what processors and queries use.

    Ranges and scans follow the byte order of serialized keys, which is not always the natural
    order of K: with `Serdes.Long()` (signed big-endian) negative numbers sort after positive
    ones; with `Serdes.String()` it is UTF-8 code point order.
    """

    OPERATIONS = (
        "get", "put", "put_if_absent", "put_all", "delete", "range", "reverse_range",
        "prefix_scan", "all", "reverse_all", "approximate_num_entries", "flush",
    )  # fmt: skip

    def get(self, key: K) -> V | None:
        self._counts["get"] += 1
        serdes = self._serdes
        raw = self._wrapped.get(serdes.last_raw_key if key is serdes.last_key else serdes.raw_key(key))
        if raw is None:
            return None
        try:  # StateSerdes.value_from, inlined: this runs once per record of every aggregation
            return serdes.value_serde.deserialize(serdes.topic, raw)
        except DeserializationError:
            raise
        except Exception as exc:
            raise serdes.value_deserialization_error(exc) from exc

    def put(self, key: K, value: V | None) -> None:
        """Store `value` for `key`; None deletes it (a tombstone)."""
        self._counts["put"] += 1
        serdes = self._serdes
        raw_key = serdes.last_raw_key if key is serdes.last_key else serdes.raw_key(key)
        try:  # StateSerdes.raw_value, inlined as in `get`
            raw = serdes.value_serde.serialize(serdes.topic, value)
        except SerializationError:
            raise
        except Exception as exc:
            raise serdes.value_serialization_error(value, exc) from exc
        self._wrapped.put(raw_key, raw)

    def put_if_absent(self, key: K, value: V) -> V | None:
        """Put unless the key has a value; returns the existing value (None if it put)."""
        self._counts["put_if_absent"] += 1
        serdes = self._serdes
        old = self._wrapped.put_if_absent(serdes.raw_key(key), serdes.raw_value(value))  # type: ignore[arg-type]
        return None if old is None else serdes.value_from(old)

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        self._counts["put_all"] += 1
        serdes = self._serdes
        self._wrapped.put_all([(serdes.raw_key(k), serdes.raw_value(v)) for k, v in entries])

    def delete(self, key: K) -> V | None:
        """Remove the key and return its old value."""
        self._counts["delete"] += 1
        serdes = self._serdes
        old = self._wrapped.delete(serdes.raw_key(key))
        return None if old is None else serdes.value_from(old)

    def range(self, from_key: K | None, to_key: K | None) -> Iterator[KeyValue[K, V]]:
        """Entries with from_key <= key <= to_key by serialized bytes (None: unbounded)."""
        self._counts["range"] += 1
        return self._typed(self._wrapped.range(self._bound(from_key), self._bound(to_key)))

    def reverse_range(self, from_key: K | None, to_key: K | None) -> Iterator[KeyValue[K, V]]:
        self._counts["reverse_range"] += 1
        return self._typed(self._wrapped.reverse_range(self._bound(from_key), self._bound(to_key)))

    def prefix_scan(self, prefix: Any, prefix_serde: Serde[Any] | None = None) -> Iterator[KeyValue[K, V]]:
        """Entries whose serialized key starts with the serialized prefix (key serde by default)."""
        self._counts["prefix_scan"] += 1
        return self._typed(self._wrapped.prefix_scan(self._serdes.raw_prefix(prefix, prefix_serde)))

    def all(self) -> Iterator[KeyValue[K, V]]:
        self._counts["all"] += 1
        return self._typed(self._wrapped.all())

    def reverse_all(self) -> Iterator[KeyValue[K, V]]:
        self._counts["reverse_all"] += 1
        return self._typed(self._wrapped.reverse_all())

    def approximate_num_entries(self) -> int:
        return self._wrapped.approximate_num_entries()

    def _bound(self, key: K | None) -> bytes | None:
        return None if key is None else self._serdes.raw_key(key)

    def _typed(self, entries: Iterator[KeyValue[bytes, bytes]]) -> Iterator[KeyValue[K, V]]:
        key_from, value_from = self._serdes.key_from, self._serdes.value_from
        for raw_key, raw_value in entries:
            yield key_value((key_from(raw_key), value_from(raw_value)))
