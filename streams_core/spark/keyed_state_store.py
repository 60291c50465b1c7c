"""KeyedStateStore: the bytes store under a DSL key-value store of the keyed stage, one key's entries.

The keyed stage groups records by key bytes, so every store access of a call is for that one
key: the store is loaded from the key's Spark state before the call and dumped after it. It sits
where the store's own bytes store would (under the metered layer that applies the serdes), so
what it holds, and what the stage saves, are the store's changelog records: key bytes to value
bytes (a timestamped store's value-and-timestamp bytes). A store with caching keeps its caching
layer above it, flushed after each key's call, so tables forward one update per key and
micro-batch (Kafka Streams' record cache per commit); without caching every update at once. An access to another key means a
processor looks beyond its own key (e.g. a foreign-key lookup): that cannot be right here, so it
raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from streams_core.common.store import KeyValue, StateStore
from streams_core.errors import StreamsError
from streams_core.spark.errors import UnsupportedOnSparkError
from streams_core.state.internals.caching_key_value_store import CachingKeyValueStore
from streams_core.state.internals.metered_key_value_store import MeteredKeyValueStore

__all__ = ["KeyedStateStore", "keyed_store"]


class KeyedStateStore:
    """An in-memory bytes store scoped to the key being processed."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._entries: dict[bytes, bytes] = {}
        self._key: bytes | None = None
        self._scoped = False

    # -- what the store layers above see ------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def persistent(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        return True

    def init(self, context: Any, root: Any) -> None:
        context.register(root)

    def flush(self) -> None:
        """Saved by the keyed stage after each key."""

    def close(self) -> None:
        self._entries.clear()

    def get(self, key: bytes) -> bytes | None:
        self._check(key)
        return self._entries.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self._check(key)
        if value is None:
            self._entries.pop(key, None)
        else:
            self._entries[key] = value

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        existing = self.get(key)
        if existing is None:
            self.put(key, value)
        return existing

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        self._check(key)
        return self._entries.pop(key, None)

    def all(self) -> Iterator[KeyValue[bytes, bytes]]:
        for key, value in sorted(self._entries.items()):
            yield KeyValue(key, value)

    def reverse_all(self) -> Iterator[KeyValue[bytes, bytes]]:
        for key, value in sorted(self._entries.items(), reverse=True):
            yield KeyValue(key, value)

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[KeyValue[bytes, bytes]]:
        raise self._across_keys("range")

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[KeyValue[bytes, bytes]]:
        raise self._across_keys("reverse_range")

    def prefix_scan(self, prefix: Any, prefix_serde: Any = None) -> Iterator[KeyValue[bytes, bytes]]:
        raise self._across_keys("prefix_scan")

    def approximate_num_entries(self) -> int:
        return len(self._entries)

    # -- what the keyed stage uses ------------------------------------------------------------

    def load(self, entries: dict[bytes, bytes]) -> None:
        """Start a key's call with its saved entries (changelog key -> value bytes)."""
        self._entries = entries
        self._key = next(iter(entries), None)
        self._scoped = bool(entries)

    def dump(self) -> dict[bytes, bytes]:
        """The key's entries at the end of its call."""
        return self._entries

    def _check(self, key: bytes) -> None:
        if not self._scoped:
            self._key, self._scoped = key, True
        elif key != self._key:
            raise self._across_keys(f"key {key!r}")

    def _across_keys(self, what: str) -> StreamsError:
        return StreamsError(
            f"store {self._name!r} was asked for {what} while processing key {self._key!r}: "
            "the Spark runner keeps state per key and cannot serve lookups of other keys"
        )


def keyed_store(built: StateStore) -> tuple[StateStore, KeyedStateStore]:
    """The store a processor of the keyed stage gets in place of `built` (a DSL key-value store, with
    or without its timestamped view): the same serdes, view and caching layer over a
    `KeyedStateStore`, no logging layer; and that `KeyedStateStore`. The stage flushes the cache at
    the end of each key's call: one update per key and micro-batch, as Kafka Streams' record cache
    forwards per commit."""
    view: Any = built
    metered = getattr(view, "timestamped", view)
    if not isinstance(metered, MeteredKeyValueStore):
        raise UnsupportedOnSparkError(type(metered).__name__, built.name, "the keyed stage runs key-value stores only")
    inner = KeyedStateStore(built.name)
    below: Any = CachingKeyValueStore(inner) if _caching(metered) else inner
    typed: Any = MeteredKeyValueStore(below, metered.key_serde, metered.value_serde)
    return (type(view)(typed) if metered is not view else typed), inner


def _caching(store: Any) -> bool:
    """Whether a caching layer is among `store`'s layers."""
    while store is not None:
        if isinstance(store, CachingKeyValueStore):
            return True
        wrapped = getattr(store, "wrapped", None)
        store = wrapped() if callable(wrapped) else wrapped  # a method on the metered layer, a property below
    return False
