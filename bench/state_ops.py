"""Key-value store ops/s through the store API, caching off and on, against raw sqlite3.

    .venv/bin/python bench/state_ops.py --keys 100000            (the recorded run)
    .venv/bin/python bench/state_ops.py --keys 10000 --repeat 1  (a quick run)

The store is what a processor gets: `Stores.key_value_store_builder(
Stores.persistent_key_value_store(name), Serdes.String(), Serdes.Long())` built and initialised
as a task does (`store.init(manager.context, store)` with a ProcessorStateManager), so the layers
are Metered -> [Caching ->] ChangeLogging -> SqliteKeyValueStore. The change-logging layer is
there but sends nothing: a standalone context has no record collector (in a task each write
would also be handed to the producer, which is not a store cost). With caching on, the context
carries `cache` = ThreadCache(10 MB) and a `timestamp`, as a task's processor context does.

The baseline is raw sqlite3 doing the same work on the same row shape in the same run: one
connection, `key BLOB PRIMARY KEY, value BLOB` WITHOUT ROWID, WAL + synchronous=NORMAL (the
store's pragmas), one commit at the end of each write phase. Raw keys are the UTF-8 bytes of the
same strings, values the same 8-byte big-endian longs, pre-encoded (the raw side does no serde
work except in get+put, where it has to decode, add one and encode, as an aggregation does).

Phases, each timed including its final commit (flush):
  put        N distinct keys, random order, into an empty store, then flush
  get        N gets of existing keys, random order (with caching on these are cache hits: N
             entries of ~90 B fit in 10 MB up to ~115k keys)
  get+put    N read-modify-writes (count + 1) of existing keys, random order, then flush
  range      --scans range(from, to) scans of 1,000 consecutive existing keys, random starts,
             every row read (ops/s = scans/s; rows/s = 1000 x that)
  get+put hot   (extra, not a store-vs-engine case but what the cache is for) N read-modify-
             writes over 1,000 hot keys, uniformly, with a flush (commit) every 10,000 ops, as
             an aggregation over a small key set between two commits

The figures are CPU time of this process (time.process_time) unless `--clock wall`: the machine
these were recorded on is shared and noisy, and CPU time is far less disturbed by other
processes than wall time (SQLite's commits here are WAL writes with synchronous=NORMAL, no
fsync per commit, so nearly all of a phase is CPU). Both are printed.

Each variant gets a fresh file; variants run interleaved per round (raw, cache off, cache on),
`--repeat` rounds; the table shows the median round, the ratio is store ops/s / raw ops/s of the
same round (median over rounds).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from streams_core.common.task_id import TaskId
from streams_core.serde import Serdes
from streams_core.state import Stores
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.internals.thread_cache import ThreadCache

CACHE_BYTES = 10 * 1024 * 1024
SCAN_WIDTH = 1000
PHASES = ("put", "get", "get+put", "range", "get+put hot")
HOT_KEYS = 1000
HOT_FLUSH_EVERY = 10_000
VARIANTS = ("sqlite3", "store, cache off", "store, cache on")


class Data:
    """Keys, values, orders and scan bounds shared by every variant of a run."""

    def __init__(self, n: int, scans: int, seed: int = 7) -> None:
        rnd = random.Random(seed)
        keys: set[str] = set()
        while len(keys) < n:
            keys.add(rnd.randbytes(8).hex())  # 16 ASCII characters, as the existing bench
        self.keys = list(keys)
        rnd.shuffle(self.keys)  # put order
        self.values = [rnd.randrange(1, 1 << 40) for _ in range(n)]
        self.lookups = rnd.sample(self.keys, n)  # get and get+put order
        ordered = sorted(self.keys)  # UTF-8 order = code point order for these ASCII keys
        width = min(SCAN_WIDTH, n)
        starts = [rnd.randrange(0, n - width + 1) for _ in range(scans)]
        self.scans = [(ordered[s], ordered[s + width - 1]) for s in starts]
        self.scan_width = width
        # the raw side's pre-encoded form of the same data
        self.raw_keys = [k.encode() for k in self.keys]
        self.raw_values = [v.to_bytes(8, "big", signed=True) for v in self.values]
        self.raw_lookups = [k.encode() for k in self.lookups]
        self.raw_scans = [(a.encode(), b.encode()) for a, b in self.scans]
        hot = self.keys[: min(HOT_KEYS, n)]
        self.hot = [rnd.choice(hot) for _ in range(n)]
        self.raw_hot = [k.encode() for k in self.hot]


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def run_raw(data: Data, directory: Path) -> dict[str, tuple[float, float]]:
    """Seconds per phase for raw sqlite3 on one connection."""
    conn = sqlite3.connect(directory / "raw.sqlite")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE t (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID")
    conn.commit()
    ex = conn.execute
    put_sql = "INSERT OR REPLACE INTO t (key, value) VALUES (?, ?)"
    get_sql = "SELECT value FROM t WHERE key = ?"
    range_sql = "SELECT key, value FROM t WHERE key >= ? AND key <= ? ORDER BY key"
    width = data.scan_width

    def put() -> None:
        for k, v in zip(data.raw_keys, data.raw_values, strict=False):
            ex(put_sql, (k, v))
        conn.commit()

    def get() -> None:
        for k in data.raw_lookups:
            ex(get_sql, (k,)).fetchone()

    def get_put() -> None:
        from_bytes = int.from_bytes
        for k in data.raw_lookups:
            row = ex(get_sql, (k,)).fetchone()
            count = (0 if row is None else from_bytes(row[0], "big", signed=True)) + 1
            ex(put_sql, (k, count.to_bytes(8, "big", signed=True)))
        conn.commit()

    def scan() -> None:
        for a, b in data.raw_scans:
            rows = ex(range_sql, (a, b)).fetchall()
            assert len(rows) == width

    def hot() -> None:
        from_bytes = int.from_bytes
        for i, k in enumerate(data.raw_hot, 1):
            row = ex(get_sql, (k,)).fetchone()
            count = (0 if row is None else from_bytes(row[0], "big", signed=True)) + 1
            ex(put_sql, (k, count.to_bytes(8, "big", signed=True)))
            if i % HOT_FLUSH_EVERY == 0:
                conn.commit()
        conn.commit()

    try:
        return {"put": timed(put), "get": timed(get), "get+put": timed(get_put), "range": timed(scan),
                "get+put hot": timed(hot)}
    finally:
        conn.close()


def run_store(data: Data, directory: Path, caching: bool) -> tuple[dict[str, tuple[float, float]], str]:
    """Seconds per phase for the typed store built and initialised as a task does."""
    builder = Stores.key_value_store_builder(Stores.persistent_key_value_store("counts"), Serdes.String(), Serdes.Long())
    builder = builder.with_caching_enabled() if caching else builder.with_caching_disabled()
    manager = ProcessorStateManager(TaskId(0, 0), "bench-state-ops", directory / "0_0")
    cache = None
    if caching:
        cache = ThreadCache(CACHE_BYTES)
        context: Any = manager.context
        context.cache = cache  # what TaskManager sets on a task's processor context
        context.timestamp = 0  # the record timestamp a processor's put would carry
    store = builder.build()
    store.init(manager.context, store)
    layers = []
    layer: Any = store
    while layer is not None:
        layers.append(type(layer).__name__)
        layer = layer.wrapped() if hasattr(layer, "wrapped") else None
    width = data.scan_width

    def put() -> None:
        p = store.put
        for k, v in zip(data.keys, data.values, strict=False):
            p(k, v)
        store.flush()

    def get() -> None:
        g = store.get
        for k in data.lookups:
            g(k)

    def get_put() -> None:
        g, p = store.get, store.put
        for k in data.lookups:
            p(k, (g(k) or 0) + 1)
        store.flush()

    def scan() -> None:
        r = store.range
        for a, b in data.scans:
            n = sum(1 for _ in r(a, b))
            assert n == width, n

    def hot() -> None:
        g, p = store.get, store.put
        for i, k in enumerate(data.hot, 1):
            p(k, (g(k) or 0) + 1)
            if i % HOT_FLUSH_EVERY == 0:
                store.flush()
        store.flush()

    try:
        result = {"put": timed(put), "get": timed(get), "get+put": timed(get_put), "range": timed(scan),
                  "get+put hot": timed(hot)}
        extra = ""
        if cache is not None:
            extra = f"; cache: {cache.hits:,} hits, {cache.misses:,} misses, {cache.evictions:,} evictions"
        return result, " -> ".join(layers) + extra
    finally:
        manager.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=100_000, help="N distinct keys (default 100000)")
    parser.add_argument("--scans", type=int, default=200, help="range scans of 1,000 keys (default 200)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the median is shown (default 5)")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="clock of the main table (default cpu)")
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    data = Data(args.keys, args.scans)
    counts = {"put": args.keys, "get": args.keys, "get+put": args.keys, "range": args.scans, "get+put hot": args.keys}
    rounds: list[dict[str, dict[str, tuple[float, float]]]] = []
    notes: dict[str, str] = {}
    for round_ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="bench-state-ops-") as tmp:
            results: dict[str, dict[str, tuple[float, float]]] = {}
            (Path(tmp) / "raw").mkdir()
            results["sqlite3"] = run_raw(data, Path(tmp) / "raw")
            results["store, cache off"], notes["store, cache off"] = run_store(data, Path(tmp) / "off", False)
            results["store, cache on"], notes["store, cache on"] = run_store(data, Path(tmp) / "on", True)
        rounds.append(results)
        line = "; ".join(
            f"{v}: " + " ".join(f"{p} {counts[p] / results[v][p][1]:,.0f}/s" for p in PHASES) for v in VARIANTS
        )
        print(f"round {round_ + 1} (CPU clock): {line}", flush=True)

    def ops(r: dict[str, dict[str, tuple[float, float]]], variant: str, phase: str, clock: int) -> float:
        return counts[phase] / r[variant][phase][clock]

    print(
        f"\n{datetime.date.today()} {platform.python_implementation()} {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} cores; --keys {args.keys} --scans {args.scans} "
        f"--repeat {args.repeat}; load average {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
    )
    main_clock = 1 if args.clock == "cpu" else 0
    other = 1 - main_clock
    names = ("wall", "CPU")
    print(
        f"ops/s on the {names[main_clock]} clock, median over rounds (range: scans of {data.scan_width:,} keys per s); "
        f"ratio = store / sqlite3 of the same round, median (min-max); last column: the ratio on the "
        f"{names[other]} clock\n"
    )
    print(f"| operation | sqlite3 ops/s | cache off ops/s | ratio | cache on ops/s | ratio | {names[other]}-clock ratios off / on |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for phase in PHASES:
        cells = [f"{statistics.median(ops(r, 'sqlite3', phase, main_clock) for r in rounds):,.0f}"]
        others = []
        for variant in VARIANTS[1:]:
            med = statistics.median(ops(r, variant, phase, main_clock) for r in rounds)
            ratios = [ops(r, variant, phase, main_clock) / ops(r, "sqlite3", phase, main_clock) for r in rounds]
            spread = f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
            cells += [f"{med:,.0f}", f"{statistics.median(ratios):.2f}{spread}"]
            others.append(statistics.median(ops(r, variant, phase, other) / ops(r, "sqlite3", phase, other) for r in rounds))
        label = {"range": f"range ({data.scan_width:,} keys)",
                 "get+put hot": f"get+put, {HOT_KEYS:,} hot keys, flush every {HOT_FLUSH_EVERY:,} (extra)"}.get(phase, phase)
        print(f"| {label} | " + " | ".join(cells) + f" | {others[0]:.2f} / {others[1]:.2f} |")
    print()
    for variant, note in notes.items():
        print(f"{variant}: {note}")


if __name__ == "__main__":
    main()
