"""Store get/put cost: sqlitedict (configured for speed) vs sqlite3 on one connection vs our stores.

    .venv/bin/python bench/state_sqlite.py [N]     (default 100000 keys)

sqlitedict comes with the `bench` extra (`pip install -e '.[bench]'`, part of `dev`); no store uses it.
"""

from __future__ import annotations

import os
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlitedict import SqliteDict


def timed(label: str, n: int, fn: Callable[[], object]) -> None:
    start = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - start
    print(f"{label:55s} {elapsed / n * 1e6:7.2f} us/op {n / elapsed:10.0f} ops/s")


def identity(x: bytes) -> bytes:
    return x


def raw_engines(n: int, tmp: str) -> None:
    rnd = random.Random(7)
    keys = [rnd.randbytes(16) for _ in range(n)]
    lookups = rnd.sample(keys, n)
    value = rnd.randbytes(100)

    d = SqliteDict(os.path.join(tmp, "sd.sqlite"), encode=identity, decode=identity,
                   autocommit=False, journal_mode="WAL", outer_stack=False)

    def sd_put() -> None:
        for k in keys:
            d[k] = value
        d.commit()

    def sd_get() -> None:
        for k in lookups:
            d[k]

    def sd_get_put() -> None:
        for k in lookups:
            d[k] = d[k]
        d.commit()

    timed("sqlitedict: put (one commit at the end)", n, sd_put)
    timed("sqlitedict: get", n, sd_get)
    timed("sqlitedict: get+put of the same key", n, sd_get_put)
    d.close()

    for label, ddl in (
        ("sqlite3, sqlitedict's table", "CREATE TABLE t (key TEXT PRIMARY KEY, value BLOB)"),
        ("sqlite3, BLOB key WITHOUT ROWID", "CREATE TABLE t (key BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID"),
    ):
        conn = sqlite3.connect(os.path.join(tmp, f"{len(label)}.sqlite"))
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(ddl)
        ex = conn.execute

        def put() -> None:
            for k in keys:
                ex("INSERT OR REPLACE INTO t VALUES (?, ?)", (k, value))
            conn.commit()

        def get() -> None:
            for k in lookups:
                ex("SELECT value FROM t WHERE key = ?", (k,)).fetchone()

        def get_put() -> None:
            for k in lookups:
                v = ex("SELECT value FROM t WHERE key = ?", (k,)).fetchone()[0]
                ex("INSERT OR REPLACE INTO t VALUES (?, ?)", (k, v))
            conn.commit()

        def scan() -> None:
            ex("SELECT key, value FROM t ORDER BY key").fetchall()

        timed(f"{label}: put (one commit)", n, put)
        timed(f"{label}: get", n, get)
        timed(f"{label}: get+put", n, get_put)
        timed(f"{label}: ordered scan, per row", n, scan)
        conn.close()


def stores(n: int, tmp: str) -> None:
    from streams_core.common.task_id import TaskId
    from streams_core.serde import Serdes
    from streams_core.state import Stores
    from streams_core.state.internals.processor_state_manager import ProcessorStateManager

    rnd = random.Random(7)
    words = [rnd.randbytes(8).hex() for _ in range(n)]
    lookups = rnd.sample(words, n)
    raw_keys = [w.encode() for w in words]
    value = (1).to_bytes(8, "big")
    manager = ProcessorStateManager(TaskId(0, 0), "bench", Path(tmp) / "0_0")
    for factory in (Stores.persistent_key_value_store, Stores.in_memory_key_value_store):
        typed = Stores.key_value_store_builder(factory(factory.__name__), Serdes.String(), Serdes.Long()).build()
        typed.init(manager.context, typed)
        raw = typed.wrapped()
        kind = "SqliteKeyValueStore" if raw.persistent else "InMemoryKeyValueStore"

        def raw_put() -> None:
            for k in raw_keys:
                raw.put(k, value)
            raw.flush()

        def raw_get() -> None:
            for k in raw_keys:
                raw.get(k)

        def typed_count() -> None:
            for w in lookups:
                typed.put(w, (typed.get(w) or 0) + 1)
            typed.flush()

        def scan() -> None:
            for _ in raw.range(None, None):
                pass

        timed(f"{kind}: put (bytes)", n, raw_put)
        timed(f"{kind}: get (bytes)", n, raw_get)
        timed(f"{kind}: ordered scan (bytes), per row", n, scan)
        timed(f"Metered over {kind}: get+put, String/Long", n, typed_count)
    manager.close()


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    print(f"N={count}, Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}")
    with tempfile.TemporaryDirectory() as directory:
        raw_engines(count, directory)
        stores(count, directory)
