"""The SQLite file of a persistent store: opened with the store pragmas, read in ordered pages.

One connection per store, used for reads and writes alike, so reads see the store's own
uncommitted writes. Writes open a transaction implicitly (the sqlite3 module's default) and
`flush()` commits it: a commit per flush, not per put. Pragmas: WAL journal, synchronous=NORMAL
(a crash can lose the last commits but never corrupts the file; the changelog restores them).

Damage done while the instance is down is detected on open and raised as TaskCorruptedError
(the task manager then wipes and restores the task): a clean close leaves a CRC-32 of the file
beside it (`<store>.sqlite.crc32`), checked and removed on the next open; without one (after a
crash) `PRAGMA quick_check` checks the file's structure. SQLite keeps no page checksums, so a
changed byte inside a row after a crash can pass quick_check: docs/state.md says so.

Under exactly-once a store is transactional (KIP-892/KIP-1035 in SQLite form): the changelog
offsets its committed data reflects live in the same file (table `changelog_offsets`), written
in the same SQLite transaction as the data by `commit(offsets)`, which the task calls only after
the Kafka transaction carrying those changelog records committed; `flush()` then commits
nothing and `close()` rolls back what no commit covered. docs/state.md says why such a store can
be behind the committed changelog after a crash, never ahead of it.
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import ProcessorStateError, TaskCorruptedError
from streams_core.state.internals.not_open import NotOpen, refuse_reinit

__all__ = [
    "DIGEST_SUFFIX",
    "FORMAT_VERSION",
    "PAGE_SIZE",
    "STORE_FILE_SUFFIX",
    "LeadingBounds",
    "SqliteStoreFile",
    "file_digest",
    "open_database",
    "paged_rows",
    "stored_changelog_offsets",
    "write_digest",
]

log = logging.getLogger(__name__)

FORMAT_VERSION = 2
"""Stored as `PRAGMA user_version`; a file of an unknown version is refused. Version 2 added the
`changelog_offsets` table; a version-1 file is upgraded in place (it has no stored offsets)."""

_READABLE_VERSIONS = frozenset({0, 1, FORMAT_VERSION})

_OFFSETS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS changelog_offsets (topic TEXT NOT NULL, partition INTEGER NOT NULL, "
    "next_offset INTEGER NOT NULL, PRIMARY KEY (topic, partition)) WITHOUT ROWID"
)
_PUT_OFFSET = "INSERT OR REPLACE INTO changelog_offsets (topic, partition, next_offset) VALUES (?, ?, ?)"

PAGE_SIZE = 1000
"""Rows read per query by iterators; no SQLite cursor stays open between two pages."""

STORE_FILE_SUFFIX = ".sqlite"
"""A persistent store's file is `<task dir>/<store name>.sqlite`."""

DIGEST_SUFFIX = ".crc32"
"""Appended to a store file's name for the CRC-32 a clean close leaves beside it."""

_CORRUPT_CODES = frozenset({11, 26})
"""SQLITE_CORRUPT and SQLITE_NOTADB: the file is damaged (not locked, not unreadable)."""


def file_digest(path: Path) -> str:
    """CRC-32 of the store file and of its WAL if one is left, as the text kept in the digest file."""
    crc = 0
    for part in (path, path.with_name(path.name + "-wal")):
        try:
            with open(part, "rb") as f:
                while chunk := f.read(1 << 20):
                    crc = zlib.crc32(chunk, crc)
        except FileNotFoundError:
            continue
    return f"{crc:08x} {_size(path)}"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return -1


def write_digest(path: Path) -> None:
    """Leave the digest of a closed store file beside it (a clean close)."""
    digest = path.with_name(path.name + DIGEST_SUFFIX)
    temp = digest.with_name(digest.name + ".tmp")
    temp.write_text(file_digest(path) + "\n", encoding="ascii")
    os.replace(temp, digest)


def _take_digest(path: Path) -> str | None:
    """The digest a clean close left for `path` (removed: the file changes once opened), or None."""
    digest = path.with_name(path.name + DIGEST_SUFFIX)
    try:
        text = digest.read_text(encoding="ascii", errors="replace").strip()
    except FileNotFoundError:
        return None
    digest.unlink()
    return text


def open_database(path: Path, schema: Sequence[str], store_name: str) -> sqlite3.Connection:
    """Open (creating if needed) the store file at `path` and apply `schema` (idempotent DDL).

    TaskCorruptedError if an existing file is damaged: it differs from the digest its clean close
    left, or (no digest) SQLite cannot read it or `PRAGMA quick_check` finds it malformed.
    """
    existed = _size(path) > 0
    expected = _take_digest(path)
    if existed and expected is not None and file_digest(path) != expected:
        raise TaskCorruptedError(f"store {store_name!r}: {path} changed since its clean close (CRC-32 mismatch)")
    try:
        conn = sqlite3.connect(path, check_same_thread=False)
    except sqlite3.Error as exc:
        raise ProcessorStateError(f"store {store_name!r}: cannot open {path}: {exc}") from exc
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        if existed and expected is None:
            check = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            if check != "ok":
                raise TaskCorruptedError(f"store {store_name!r}: {path} is damaged (quick_check: {check})")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in _READABLE_VERSIONS:
            raise ProcessorStateError(
                f"store {store_name!r}: {path} has format version {version}, this library reads "
                f"version {FORMAT_VERSION}; delete the file to rebuild it from the changelog"
            )
        for ddl in (*schema, _OFFSETS_SCHEMA):
            conn.execute(ddl)
        conn.execute(f"PRAGMA user_version={FORMAT_VERSION}")
        conn.commit()
    except (ProcessorStateError, KeyboardInterrupt, SystemExit):
        conn.close()
        raise
    except sqlite3.Error as exc:
        conn.close()
        if existed and getattr(exc, "sqlite_errorcode", None) in _CORRUPT_CODES:
            raise TaskCorruptedError(f"store {store_name!r}: {path} is damaged: {exc}") from exc
        raise ProcessorStateError(f"store {store_name!r}: {path} is not a usable store file: {exc}") from exc
    except Exception as exc:
        # A damaged schema page can make sqlite3 fail outside its own errors (UnicodeDecodeError
        # decoding a garbled journal mode name): the file is unreadable.
        conn.close()
        raise TaskCorruptedError(f"store {store_name!r}: {path} is damaged: {exc!r}") from exc
    return conn


def stored_changelog_offsets(path: Path) -> dict[tuple[str, int], int]:
    """The changelog offsets a store file holds, read without opening the store (read-only: the
    assignor's view of a task directory after a crash); empty when it holds none or cannot be read."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    except sqlite3.Error:
        return {}
    try:
        rows = conn.execute("SELECT topic, partition, next_offset FROM changelog_offsets").fetchall()
    except sqlite3.Error:
        return {}
    finally:
        conn.close()
    return {(topic, partition): offset for topic, partition, offset in rows}


class LeadingBounds(NamedTuple):
    """Inclusive (or exclusive-upper) bounds on the leading order column of a paged scan.

    `begin` is the bound where the scan starts (lower when forward, upper when reverse): only the
    first page needs it, later pages seek to their position instead, which keeps SQLite from
    rescanning from the bound on every page. `end` is where the scan stops, on every page.
    """

    begin: tuple[str, ...]
    begin_params: tuple[Any, ...]
    end: tuple[str, ...]
    end_params: tuple[Any, ...]

    @classmethod
    def of(cls, column: str, lower: Any, upper: Any, reverse: bool, upper_exclusive: bool = False) -> LeadingBounds:
        """Bounds `lower <= column <= upper` (None: unbounded) for a scan in that direction."""
        low = ((f"{column} >= ?",), (lower,)) if lower is not None else ((), ())
        high = ((f"{column} {'<' if upper_exclusive else '<='} ?",), (upper,)) if upper is not None else ((), ())
        begin, end = (high, low) if reverse else (low, high)
        return cls(begin[0], begin[1], end[0], end[1])


@functools.lru_cache(maxsize=256)
def _page_queries(
    table: str,
    columns: tuple[str, ...],
    order: tuple[str, ...],
    reverse: bool,
    begin: tuple[str, ...],
    end: tuple[str, ...],
    where: tuple[str, ...],
) -> tuple[str, str]:
    direction, after = (" DESC", "<") if reverse else ("", ">")
    head = f"SELECT {', '.join(columns)} FROM {table}"
    tail = f" ORDER BY {', '.join(c + direction for c in order)} LIMIT {PAGE_SIZE}"
    position = f"({', '.join(order)}) {after} ({', '.join('?' * len(order))})"
    first_conditions = (*begin, *end, *where)
    first = head + (f" WHERE {' AND '.join(first_conditions)}" if first_conditions else "") + tail
    following = head + f" WHERE {' AND '.join((position, *end, *where))}" + tail
    return first, following


def paged_rows(
    connection: Callable[[], sqlite3.Connection | NotOpen],
    table: str,
    columns: tuple[str, ...],
    order: tuple[str, ...],
    reverse: bool,
    bounds: LeadingBounds,
    where: tuple[str, ...] = (),
    params: tuple[Any, ...] = (),
) -> Iterator[tuple[Any, ...]]:
    """Rows ordered by `order` (columns unique together, a prefix of `columns`), a page per query.

    Keyset pagination: each page starts after the last row yielded, so writes made by the caller
    between pages never break the iteration; rows written ahead of the position may or may not
    be seen. `bounds` limit the first order column, `where` adds other conditions. `connection`
    is called per page, so closing the store mid-iteration raises InvalidStateStoreError at the
    next page.
    """
    first, following = _page_queries(table, columns, order, reverse, bounds.begin, bounds.end, where)
    width = len(order)
    rows = connection().execute(first, (*bounds.begin_params, *bounds.end_params, *params)).fetchall()
    while rows:
        yield from rows
        if len(rows) < PAGE_SIZE:
            return
        rows = connection().execute(following, (*rows[-1][:width], *bounds.end_params, *params)).fetchall()


class SqliteStoreFile:
    """The file side every SQLite store shares: one `<name>.sqlite` in the task directory, opened
    on init, committed on flush and closed on close (idempotent), holding the changelog offsets
    its data reflects (KIP-1035's store-managed offsets).

    Two modes. By default (at-least-once) `flush()` commits, clearing any stored offsets (the data
    moves past them; the task's `.checkpoint` says how far it is), and `close()` commits. Once
    `set_transactional()` (exactly-once), only `commit(offsets)` commits, data and offsets in one
    SQLite transaction; `flush()` leaves the transaction open and `close()` rolls it back.
    Subclasses name their data table (`_data_table`) and may buffer writes (`_write_buffers`,
    `_discard_buffers`).
    """

    _name: str
    _data_table: str

    def _init_file(self, name: str) -> None:
        self._conn: sqlite3.Connection | NotOpen = NotOpen(name)
        self._path: Path | None = None
        self._transactional = False
        self._stored_offsets: dict[TopicPartition, int] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def persistent(self) -> bool:
        return True

    @property
    def is_open(self) -> bool:
        return not isinstance(self._conn, NotOpen)

    @property
    def path(self) -> Path | None:
        """The store file, once initialised."""
        return self._path

    @property
    def manages_offsets(self) -> bool:
        """The store keeps its changelog offsets in its own file (KIP-1035's `managesOffsets`)."""
        return True

    @property
    def transactional(self) -> bool:
        return self._transactional

    def _open_file(self, state_dir: Path, schema: Sequence[str]) -> sqlite3.Connection:
        refuse_reinit(self)
        self._path = Path(state_dir) / f"{self._name}{STORE_FILE_SUFFIX}"
        conn = self._conn = open_database(self._path, schema, self._name)
        try:
            rows = conn.execute("SELECT topic, partition, next_offset FROM changelog_offsets").fetchall()
        except sqlite3.DatabaseError as exc:  # a damaged page quick_check did not reach
            self._conn = NotOpen(self._name)
            conn.close()
            raise TaskCorruptedError(f"store {self._name!r}: {self._path} is damaged: {exc}") from exc
        self._stored_offsets = {TopicPartition(topic, partition): offset for topic, partition, offset in rows}
        return conn

    def _write_buffers(self) -> None:
        """Move writes held in memory into the open SQLite transaction (none by default)."""

    def _discard_buffers(self) -> None:
        """Forget writes held in memory (a rollback)."""

    def set_transactional(self) -> None:
        """Exactly-once: from now on only `commit(offsets)` commits (see the class docstring)."""
        self._transactional = True

    def committed_offsets(self) -> dict[TopicPartition, int]:
        """Per changelog partition, the next offset the committed data reflects (a copy; KIP-1035's
        `committedOffset`). Empty when the data was committed without offsets."""
        return dict(self._stored_offsets)

    def is_empty(self) -> bool:
        """Whether the store holds no data (its writes since the last commit included)."""
        self._write_buffers()
        return self._conn.execute(f"SELECT 1 FROM {self._data_table} LIMIT 1").fetchone() is None

    def commit(self, changelog_offsets: Mapping[TopicPartition, int]) -> None:
        """Commit the writes so far with the changelog offsets they reflect, in one SQLite transaction.

        Offsets of other partitions stay as stored. Does nothing when neither the data nor the
        offsets changed since the last commit.
        """
        self._write_buffers()
        conn = self._conn
        changed = {tp: o for tp, o in changelog_offsets.items() if self._stored_offsets.get(tp) != o}
        if not changed and not conn.in_transaction:
            return
        if changed:
            conn.executemany(_PUT_OFFSET, [(tp.topic, tp.partition, o) for tp, o in changed.items()])
        conn.commit()
        self._stored_offsets.update(changed)

    def flush(self) -> None:
        """Commit the writes since the last flush (transactional: nothing; `commit` commits)."""
        if self._transactional:
            return
        self._write_buffers()
        if self._stored_offsets:
            # the data moves past the stored offsets: a later crash must not trust them
            self._conn.execute("DELETE FROM changelog_offsets")
            self._stored_offsets = {}
        self._conn.commit()

    def close(self) -> None:
        """Commit (transactional: roll back what no commit covered) and close the file, then leave
        its digest; closing a closed store does nothing."""
        if self.is_open:
            conn = self._conn
            try:
                if self._transactional:
                    self._discard_buffers()
                else:
                    self.flush()
            finally:
                self._conn = NotOpen(self._name)
                conn.close()  # closing never commits: a transactional store's open transaction is rolled back
            if self._path is not None:
                try:
                    write_digest(self._path)
                except OSError as exc:
                    log.warning("store %s: cannot write the digest of %s: %s", self._name, self._path, exc)
