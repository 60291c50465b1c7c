"""KeyedStateStore: a DSL key-value store holding one key's entry, kept in Spark state between batches.

The keyed stage groups records by key bytes, so every store access of a call is for that one
key: the store is loaded from the key's Spark state before the call and dumped after it. It is
both the store a processor gets and its timestamped view (`.timestamped`), holding
`ValueAndTimestamp`s. It has no caching layer, so tables forward every update at once (Kafka
Streams with caching off). An access to another key means a processor looks beyond its own key
(e.g. a foreign-key lookup): that cannot be right here, so it raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streams_core.errors import StreamsError
from streams_core.state.store import KeyValue

__all__ = ["KeyedStateStore"]


class KeyedStateStore:
    """An in-memory store scoped to the key being processed."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._entries: dict[Any, Any] = {}
        self._key: Any = None
        self._scoped = False

    # -- what the task and processors see -----------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def persistent(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        return True

    @property
    def timestamped(self) -> KeyedStateStore:
        return self

    def init(self, context: Any, root: Any) -> None:
        context.register(root)

    def flush(self) -> None:
        """Saved by the keyed stage after each key."""

    def close(self) -> None:
        self._entries.clear()

    def get(self, key: Any) -> Any:
        self._check(key)
        return self._entries.get(key)

    def put(self, key: Any, value: Any) -> None:
        self._check(key)
        if value is None:
            self._entries.pop(key, None)
        else:
            self._entries[key] = value

    def put_if_absent(self, key: Any, value: Any) -> Any:
        existing = self.get(key)
        if existing is None:
            self.put(key, value)
        return existing

    def delete(self, key: Any) -> Any:
        self._check(key)
        return self._entries.pop(key, None)

    def all(self) -> Iterator[KeyValue[Any, Any]]:
        for key, value in list(self._entries.items()):
            yield KeyValue(key, value)

    def approximate_num_entries(self) -> int:
        return len(self._entries)

    # -- what the keyed stage uses ------------------------------------------------------------

    def load(self, entries: dict[Any, Any]) -> None:
        """Start a key's call with its saved entries."""
        self._entries = entries
        self._key = next(iter(entries), None)
        self._scoped = bool(entries)

    def dump(self) -> dict[Any, Any]:
        """The key's entries at the end of its call."""
        return self._entries

    def _check(self, key: Any) -> None:
        if not self._scoped:
            self._key, self._scoped = key, True
        elif key != self._key:
            raise StreamsError(
                f"store {self._name!r} was asked for key {key!r} while processing key {self._key!r}: "
                "the Spark runner keeps state per key and cannot serve lookups of other keys"
            )
