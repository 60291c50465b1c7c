"""SqliteSessionStore: a persistent bytes session store, one SQLite file per store.

Table `session_store(key, end_ms, start_ms, value)` keyed by (key BLOB, session end, session
start) WITHOUT ROWID, as Kafka Streams orders session keys, plus an index by end for expiry.
Transactions, paging and thread rules as `SqliteKeyValueStore`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from streams_core.common.store import StateStore, StateStoreContext
from streams_core.state.internals.abstract_session_store import AbstractSessionStore
from streams_core.state.internals.not_open import NotOpen
from streams_core.state.internals.sqlite_database import (
    LeadingBounds,
    SqliteStoreFile,
    paged_rows,
)

__all__ = ["SqliteSessionStore"]

_TABLE = "session_store"
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {_TABLE} (key BLOB NOT NULL, end_ms INTEGER NOT NULL, "
    "start_ms INTEGER NOT NULL, value BLOB NOT NULL, PRIMARY KEY (key, end_ms, start_ms)) WITHOUT ROWID",
    f"CREATE INDEX IF NOT EXISTS {_TABLE}_by_end ON {_TABLE} (end_ms)",
)
_PUT = f"INSERT OR REPLACE INTO {_TABLE} (key, start_ms, end_ms, value) VALUES (?, ?, ?, ?)"
_DELETE = f"DELETE FROM {_TABLE} WHERE key = ? AND start_ms = ? AND end_ms = ?"
_GET = f"SELECT value FROM {_TABLE} WHERE key = ? AND start_ms = ? AND end_ms = ?"


class SqliteSessionStore(SqliteStoreFile, AbstractSessionStore):
    """Sessions in `<task dir>/<name>.sqlite`; `flush()` commits, `close()` commits and closes
    (transactional: `commit(offsets)` commits, `close()` rolls back: `SqliteStoreFile`)."""

    _data_table = _TABLE

    def __init__(self, name: str, retention_period: int, segment_interval: int | None = None) -> None:
        super().__init__(name, retention_period, segment_interval)
        self._init_file(name)


    def init(self, context: StateStoreContext, root: StateStore) -> None:
        """Open the file, resume observed stream time from it and register with the task."""
        self._open_file(context.state_dir, _SCHEMA)
        latest = self._conn.execute(f"SELECT max(end_ms) FROM {_TABLE}").fetchone()[0]
        if latest is not None:
            self._observe(latest)
        context.register(root, self.restore_batch)

    def _connection(self) -> sqlite3.Connection | NotOpen:
        return self._conn

    def _write(self, key: bytes, start: int, end: int, value: bytes) -> None:
        self._conn.execute(_PUT, (key, start, end, value))

    def _delete(self, key: bytes, start: int, end: int) -> None:
        self._conn.execute(_DELETE, (key, start, end))

    def _write_batch(self, rows: list[tuple[bytes, int, int, bytes | None]]) -> None:
        self._conn.executemany(_PUT, [row for row in rows if row[3] is not None])
        self._conn.executemany(_DELETE, [row[:3] for row in rows if row[3] is None])

    def _get(self, key: bytes, start: int, end: int) -> bytes | None:
        row = self._conn.execute(_GET, (key, start, end)).fetchone()
        return None if row is None else row[0]

    def _find(
        self, key_from: bytes | None, key_to: bytes | None, earliest_end: int, latest_start: int, reverse: bool
    ) -> Iterator[tuple[bytes, int, int, bytes]]:
        rows = paged_rows(
            self._connection,
            _TABLE,
            ("key", "end_ms", "start_ms", "value"),
            ("key", "end_ms", "start_ms"),
            reverse,
            LeadingBounds.of("key", key_from, key_to, reverse),
            ("end_ms >= ?", "start_ms <= ?"),
            (earliest_end, latest_start),
        )
        return ((key, start, end, value) for key, end, start, value in rows)

    def _drop_expired(self, cutoff: int) -> None:
        self._conn.execute(f"DELETE FROM {_TABLE} WHERE end_ms <= ?", (cutoff,))

    def approximate_num_entries(self) -> int:
        """Rows stored, expired ones not yet dropped included."""
        return int(self._conn.execute(f"SELECT count(*) FROM {_TABLE}").fetchone()[0])


    def __repr__(self) -> str:
        return f"SqliteSessionStore({self._name!r})"
