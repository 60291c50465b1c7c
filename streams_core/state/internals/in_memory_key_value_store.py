"""InMemoryKeyValueStore: a bytes key-value store in a dict with a lazily sorted key index."""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from typing import Any

from streams_core.errors import InvalidStateStoreError
from streams_core.state.internals.byte_order import is_inverted_range, prefix_upper_bound
from streams_core.state.internals.not_open import refuse_reinit
from streams_core.state.internals.sorted_index import SortedIndex
from streams_core.state.store import KeyValue, StateStore, StateStoreContext, key_value

__all__ = ["InMemoryKeyValueStore"]

log = logging.getLogger(__name__)


class InMemoryKeyValueStore:
    """Keys and values are bytes; iteration is in unsigned byte order of the keys.

    Not persistent: its content is rebuilt from the changelog when the task starts. Iterators
    snapshot the keys of their range when they start and read values as they go: writes during
    iteration are safe; a key deleted before it is reached is skipped, a key added is not seen.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._map: dict[bytes, bytes] = {}
        self._keys: SortedIndex[bytes] = SortedIndex()
        self._open = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def persistent(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        return self._open

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        """Open the store and register it with the task, restoring through `restore_batch`."""
        refuse_reinit(self)
        self._open = True
        context.register(root, self.restore_batch)

    def _check_open(self) -> None:
        if not self._open:
            raise InvalidStateStoreError(f"store {self._name!r} is not open")

    def get(self, key: bytes) -> bytes | None:
        self._check_open()
        return self._map.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self._check_open()
        if value is None:
            self._remove(key)
            return
        if key not in self._map:
            self._keys.add(key)
        self._map[key] = value

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        self._check_open()
        existing = self._map.get(key)
        if existing is None:
            self.put(key, value)
        return existing

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        self._check_open()
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        self._check_open()
        return self._remove(key)

    def _remove(self, key: bytes) -> bytes | None:
        old = self._map.pop(key, None)
        if old is not None:
            self._keys.remove(key)
        return old

    def restore_batch(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply changelog records (key, value or None to delete) in order."""
        self.put_all(records)

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[KeyValue[bytes, bytes]]:
        """Entries with from_key <= key <= to_key (None: unbounded), in key order."""
        return self._scan(from_key, to_key, False, False)

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[KeyValue[bytes, bytes]]:
        return self._scan(from_key, to_key, False, True)

    def prefix_scan(self, prefix: bytes, prefix_serde: Any = None) -> Iterator[KeyValue[bytes, bytes]]:
        """Entries whose key starts with the bytes `prefix`, in key order."""
        return self._scan(prefix, prefix_upper_bound(prefix), True, False)

    def all(self) -> Iterator[KeyValue[bytes, bytes]]:
        return self._scan(None, None, False, False)

    def reverse_all(self) -> Iterator[KeyValue[bytes, bytes]]:
        return self._scan(None, None, False, True)

    def _scan(
        self, lower: bytes | None, upper: bytes | None, upper_exclusive: bool, reverse: bool
    ) -> Iterator[KeyValue[bytes, bytes]]:
        self._check_open()
        if is_inverted_range(self._name, lower, upper):
            return iter(())
        keys = self._keys.settled()
        start = 0 if lower is None else bisect_left(keys, lower)
        if upper is None:
            end = len(keys)
        else:
            end = bisect_left(keys, upper) if upper_exclusive else bisect_right(keys, upper)
        snapshot = keys[start:end]
        if reverse:
            snapshot.reverse()
        return self._entries(snapshot)

    def _entries(self, keys: list[bytes]) -> Iterator[KeyValue[bytes, bytes]]:
        for key in keys:
            if not self._open:
                raise InvalidStateStoreError(f"store {self._name!r} was closed during iteration")
            value = self._map.get(key)
            if value is not None:
                yield key_value((key, value))

    def approximate_num_entries(self) -> int:
        self._check_open()
        return len(self._map)

    def flush(self) -> None:
        """Nothing to write: the content lives in memory only."""

    def close(self) -> None:
        self._map = {}
        self._keys.clear()
        self._open = False

    def __repr__(self) -> str:
        return f"InMemoryKeyValueStore({self._name!r})"
