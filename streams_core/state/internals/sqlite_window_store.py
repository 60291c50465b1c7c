"""SqliteWindowStore: a persistent bytes window store, one SQLite file per store.

Table `window_store(key, start_ms, seq, value)` keyed by (key BLOB, window start, seqnum)
WITHOUT ROWID, plus an index by (start_ms, key, seq) for time scans and expiry. `seq` is 0
unless duplicates are retained. Transactions, paging and thread rules as `SqliteKeyValueStore`.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator

from streams_core.common.store import StateStore, StateStoreContext
from streams_core.state.internals.abstract_window_store import AbstractWindowStore
from streams_core.state.internals.not_open import NotOpen
from streams_core.state.internals.sqlite_database import (
    LeadingBounds,
    SqliteStoreFile,
    paged_rows,
)

__all__ = ["SqliteWindowStore"]

log = logging.getLogger(__name__)

_TABLE = "window_store"
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {_TABLE} (key BLOB NOT NULL, start_ms INTEGER NOT NULL, "
    "seq INTEGER NOT NULL, value BLOB NOT NULL, PRIMARY KEY (key, start_ms, seq)) WITHOUT ROWID",
    f"CREATE INDEX IF NOT EXISTS {_TABLE}_by_start ON {_TABLE} (start_ms, key, seq)",
)
_PUT = f"INSERT OR REPLACE INTO {_TABLE} (key, start_ms, seq, value) VALUES (?, ?, ?, ?)"
_DELETE = f"DELETE FROM {_TABLE} WHERE key = ? AND start_ms = ?"
_DELETE_ONE = f"DELETE FROM {_TABLE} WHERE key = ? AND start_ms = ? AND seq = ?"
_GET = f"SELECT value FROM {_TABLE} WHERE key = ? AND start_ms = ? ORDER BY seq DESC LIMIT 1"


class SqliteWindowStore(SqliteStoreFile, AbstractWindowStore):
    """Window entries in `<task dir>/<name>.sqlite`; `flush()` commits, `close()` commits and closes
    (transactional: `commit(offsets)` commits, `close()` rolls back: `SqliteStoreFile`)."""

    _data_table = _TABLE

    def __init__(
        self,
        name: str,
        retention_period: int,
        window_size: int,
        retain_duplicates: bool = False,
        segment_interval: int | None = None,
        time_ordered: bool = False,
    ) -> None:
        super().__init__(name, retention_period, window_size, retain_duplicates, segment_interval, time_ordered)
        self._init_file(name)


    def init(self, context: StateStoreContext, root: StateStore) -> None:
        """Open the file, resume observed stream time and seqnum from it, register with the task."""
        self._open_file(context.state_dir, _SCHEMA)
        latest, seqnum = self._conn.execute(f"SELECT max(start_ms), max(seq) FROM {_TABLE}").fetchone()
        if latest is not None:
            self._observe(latest)
            self._seqnum = seqnum
        context.register(root, self.restore_batch)

    def _connection(self) -> sqlite3.Connection | NotOpen:
        return self._conn

    def _write(self, key: bytes, start: int, seqnum: int, value: bytes) -> None:
        self._conn.execute(_PUT, (key, start, seqnum, value))

    def _delete(self, key: bytes, start: int) -> None:
        self._conn.execute(_DELETE, (key, start))

    def _write_batch(self, rows: list[tuple[bytes, int, int, bytes | None]]) -> None:
        self._conn.executemany(_PUT, [row for row in rows if row[3] is not None])
        self._conn.executemany(_DELETE_ONE, [row[:3] for row in rows if row[3] is None])

    def _fetch_value(self, key: bytes, start: int) -> bytes | None:
        row = self._conn.execute(_GET, (key, start)).fetchone()
        return None if row is None else row[0]

    def _fetch_key(self, key: bytes, time_from: int, time_to: int, reverse: bool) -> Iterator[tuple[int, bytes]]:
        bounds = LeadingBounds.of("start_ms", time_from, time_to, reverse)
        rows = paged_rows(
            self._connection,
            _TABLE,
            ("start_ms", "seq", "value"),
            ("start_ms", "seq"),
            reverse,
            bounds,
            ("key = ?",),
            (key,),
        )
        return ((start, value) for start, _, value in rows)

    def _fetch_key_range(
        self, key_from: bytes | None, key_to: bytes | None, time_from: int, time_to: int, reverse: bool
    ) -> Iterator[tuple[bytes, int, bytes]]:
        bounds = LeadingBounds.of("key", key_from, key_to, reverse)
        rows = paged_rows(
            self._connection,
            _TABLE,
            ("key", "start_ms", "seq", "value"),
            ("key", "start_ms", "seq"),
            reverse,
            bounds,
            ("start_ms >= ?", "start_ms <= ?"),
            (time_from, time_to),
        )
        return ((key, start, value) for key, start, _, value in rows)

    def _fetch_time_range(self, time_from: int, time_to: int, reverse: bool) -> Iterator[tuple[bytes, int, bytes]]:
        bounds = LeadingBounds.of("start_ms", time_from, time_to, reverse)
        rows = paged_rows(
            self._connection, _TABLE, ("start_ms", "key", "seq", "value"), ("start_ms", "key", "seq"), reverse, bounds
        )
        return ((key, start, value) for start, key, _, value in rows)

    def _drop_expired(self, cutoff: int) -> None:
        deleted = self._conn.execute(f"DELETE FROM {_TABLE} WHERE start_ms <= ?", (cutoff,)).rowcount
        if deleted:
            log.debug("store %s: dropped %d expired window entries (start <= %d)", self._name, deleted, cutoff)

    def approximate_num_entries(self) -> int:
        """Rows stored, expired ones not yet dropped included."""
        return int(self._conn.execute(f"SELECT count(*) FROM {_TABLE}").fetchone()[0])


    def __repr__(self) -> str:
        return f"SqliteWindowStore({self._name!r})"
