"""InMemoryKeyValueStore: a bytes key-value store in a dict with a lazily sorted key index."""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

from streams_core.common.store import KeyValue, key_value
from streams_core.errors import InvalidStateStoreError
from streams_core.state.internals.byte_order import is_inverted_range
from streams_core.state.internals.in_memory_store import InMemoryStore
from streams_core.state.internals.key_value_scans import KeyValueScans
from streams_core.state.internals.sorted_index import SortedIndex

__all__ = ["InMemoryKeyValueStore"]

log = logging.getLogger(__name__)


class InMemoryKeyValueStore(InMemoryStore, KeyValueScans):
    """Keys and values are bytes; iteration is in unsigned byte order of the keys. Not
    persistent, iterators as `InMemoryStore` says."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._map: dict[bytes, bytes] = {}
        self._keys: SortedIndex[bytes] = SortedIndex()
        self._indexes = (self._keys,)
        self._open = False

    @property
    def name(self) -> str:
        return self._name

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
        return map(key_value, self._live(snapshot))


    def approximate_num_entries(self) -> int:
        self._check_open()
        return len(self._map)

    def __repr__(self) -> str:
        return f"InMemoryKeyValueStore({self._name!r})"
