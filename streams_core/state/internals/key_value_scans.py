"""KeyValueScans: a bytes key-value store's range, prefix and full scans, from one `_scan`.

Both bytes key-value stores (in memory and SQLite) order keys by unsigned bytes and answer
`range` (inclusive bounds, None unbounded), `prefix_scan` (the prefix up to the next prefix,
exclusive) and `all`, forwards and backwards, as one scan over a key interval.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from streams_core.common.store import KeyValue
from streams_core.state.internals.byte_order import prefix_upper_bound

__all__ = ["KeyValueScans"]


class KeyValueScans:
    """Scans in key order over `_scan(lower, upper, upper_exclusive, reverse)`, and restore as `put_all`."""

    def _scan(
        self, lower: bytes | None, upper: bytes | None, upper_exclusive: bool, reverse: bool
    ) -> Iterator[KeyValue[bytes, bytes]]:
        raise NotImplementedError

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        raise NotImplementedError

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
