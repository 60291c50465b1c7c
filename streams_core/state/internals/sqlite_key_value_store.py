"""SqliteKeyValueStore: a persistent bytes key-value store, one SQLite file per store.

The file is `<task dir>/<store name>.sqlite` with one table, `key_value(key BLOB PRIMARY KEY,
value BLOB) WITHOUT ROWID`: SQLite compares BLOBs with memcmp, so `ORDER BY key` is unsigned byte
order. Access is through the sqlite3 module on one connection; docs/state.md explains why not
sqlitedict (its per-call thread hand-off made reads ~14x slower, and a second connection on the
same file neither sees its uncommitted writes nor may write beside them).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Iterator

from streams_core.common.store import KeyValue, StateStore, StateStoreContext, key_value
from streams_core.errors import InvalidStateStoreError
from streams_core.state.internals.byte_order import is_inverted_range
from streams_core.state.internals.key_value_scans import KeyValueScans
from streams_core.state.internals.not_open import NotOpen
from streams_core.state.internals.sqlite_database import (
    LeadingBounds,
    SqliteStoreFile,
    paged_rows,
)

__all__ = ["SqliteKeyValueStore"]

log = logging.getLogger(__name__)

_SCHEMA = ("CREATE TABLE IF NOT EXISTS key_value (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID",)
_GET = "SELECT value FROM key_value WHERE key = ?"
_PUT = "INSERT OR REPLACE INTO key_value (key, value) VALUES (?, ?)"
_DELETE = "DELETE FROM key_value WHERE key = ?"
_COLUMNS = ("key", "value")
_ORDER = ("key",)


MEMTABLE_ENTRIES = 10_000
"""Keys a store holds written but not yet in SQLite before it writes them all in one call."""


class SqliteKeyValueStore(SqliteStoreFile, KeyValueScans):
    """Keys and values are bytes; iteration is in unsigned byte order of the keys.

    Writes go to a memtable (a dict, as RocksDB's), which a `get` reads first and which goes
    into SQLite in two `executemany` calls when it holds `MEMTABLE_ENTRIES` keys, before a scan
    or count, and at `flush()`: one `execute` per get and put cost a word count without the record
    cache a quarter of its CPU (docs/state.md, "SQLite stores"). The writes join one SQLite transaction that
    `flush()` commits (and `close()`, so a clean close keeps everything). Iterators read a page
    of rows per query (`PAGE_SIZE`) after the last key they yielded, the memtable written first,
    so writes during iteration are safe; writes ahead of the position may or may not be seen.
    Owned by one task: no locking, use from one thread at a time.
    """

    _data_table = "key_value"

    def __init__(self, name: str) -> None:
        self._name = name
        self._init_file(name)
        self._memtable: dict[bytes, bytes | None] = {}

    @property
    def name(self) -> str:
        return self._name

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        """Open `<state_dir>/<name>.sqlite` and register with the task (restore: `restore_batch`)."""
        self._open_file(context.state_dir, _SCHEMA)
        log.debug("store %s opened %s", self._name, self._path)
        context.register(root, self.restore_batch)

    def get(self, key: bytes) -> bytes | None:
        memtable = self._memtable
        if key in memtable:
            return memtable[key]
        row = self._conn.execute(_GET, (key,)).fetchone()
        return None if row is None else row[0]

    def put(self, key: bytes, value: bytes | None) -> None:
        if not self.is_open:
            raise InvalidStateStoreError(f"store {self._name!r} is not open")
        memtable = self._memtable
        memtable[key] = value
        if len(memtable) >= MEMTABLE_ENTRIES:
            self._write_memtable()

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        existing = self.get(key)
        if existing is None:
            self.put(key, value)
        return existing

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Write a batch; for a key given twice the last value wins, as with single puts."""
        self._write_memtable()
        self._write(dict(entries))

    def delete(self, key: bytes) -> bytes | None:
        old = self.get(key)
        if old is not None:
            self.put(key, None)
        return old

    def _write_memtable(self) -> None:
        """Move the memtable into SQLite (the open transaction; `flush` or `commit` commits it)."""
        if self._memtable:
            latest, self._memtable = self._memtable, {}
            self._write(latest)

    _write_buffers = _write_memtable

    def _discard_buffers(self) -> None:
        self._memtable = {}

    def _write(self, latest: dict[bytes, bytes | None]) -> None:
        self._conn.executemany(_PUT, [(k, v) for k, v in latest.items() if v is not None])
        self._conn.executemany(_DELETE, [(k,) for k, v in latest.items() if v is None])

    def _scan(
        self, lower: bytes | None, upper: bytes | None, upper_exclusive: bool, reverse: bool
    ) -> Iterator[KeyValue[bytes, bytes]]:
        if not self.is_open:
            raise InvalidStateStoreError(f"store {self._name!r} is not open")
        if is_inverted_range(self._name, lower, upper):
            return iter(())
        bounds = LeadingBounds.of("key", lower, upper, reverse, upper_exclusive)
        rows = paged_rows(self._connection, "key_value", _COLUMNS, _ORDER, reverse, bounds)
        return map(key_value, rows)

    def _connection(self) -> sqlite3.Connection | NotOpen:
        """The connection a scan's next page reads, with the memtable written into it first."""
        if self.is_open:
            self._write_memtable()
        return self._conn

    def approximate_num_entries(self) -> int:
        """The exact count (a full index scan: meant for metrics and tests, not the hot path)."""
        self._write_memtable()
        return int(self._conn.execute("SELECT count(*) FROM key_value").fetchone()[0])

    def __repr__(self) -> str:
        return f"SqliteKeyValueStore({self._name!r})"
