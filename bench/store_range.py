"""Time of one 1,000-key range over the word count's own store, as the REST layer reads it.

    flock /tmp/bench.lock .venv/bin/python bench/store_range.py

The store is the word count's `word-count` store (app/wordcount.py, without the windowed count)
in a TopologyTestDriver: SQLite under the record cache, timestamped and metered, read through the
driver's plain view, as `GET /state/keyvalues/word-count/range/...` reads an instance's part.
Input: `--keys` distinct words, counted once (the driver commits after each input record, so the
record cache holds no writes when the scans run). The figure is the best of `--repeat` rounds of
`--scans` scans, every entry read: a cost to compare commits by, in the same run or close runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.wordcount import INPUT_TOPIC, STORE, build_topology
from streams_core import Serdes, TopologyTestDriver


def _best_scan_ms(store: Any, low: str, high: str, scans: int, repeat: int) -> tuple[float, int]:
    best, entries = float("inf"), 0
    for _ in range(repeat):
        began = time.perf_counter()
        for _ in range(scans):
            entries = sum(1 for _ in store.range(low, high))
        best = min(best, (time.perf_counter() - began) / scans)
    return best * 1e3, entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--scans", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    words = [f"word{i:05d}" for i in range(args.keys)]
    low, high = words[args.keys // 4], words[args.keys // 4 + 999]
    with tempfile.TemporaryDirectory() as state_dir:
        config = {"application.id": "store-range", "bootstrap.servers": "unused:9092", "state.dir": state_dir}
        driver = TopologyTestDriver(build_topology(windowed=False), config)
        try:
            lines = driver.create_input_topic(INPUT_TOPIC, Serdes.String(), Serdes.String())
            for i in range(0, args.keys, 10):
                lines.pipe_input(None, " ".join(words[i : i + 10]))
            store = driver.get_key_value_store(STORE)
            ms, entries = _best_scan_ms(store, low, high, args.scans, args.repeat)
            print(f"{entries} entries per range: {ms:.2f} ms per range (best of {args.repeat} x {args.scans})")
        finally:
            driver.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
