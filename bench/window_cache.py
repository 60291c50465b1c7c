"""Window and session stores under an aggregation's access pattern, record cache off and on.

    flock /tmp/bench.lock .venv/bin/python bench/window_cache.py [N]     (default 100000 records)

The stores are what a DSL aggregation gets (Metered -> [Caching ->] SqliteWindowStore /
SqliteSessionStore, String keys, Long values; logging off: a standalone context has no
producer), initialised with a ThreadCache of 10 MB as a task's are. N records over 1,000 keys (then 50 hot keys),
10 ms apart, a commit (flush) every 10,000 records:
  window   fetch(key, window start) then put(count + 1) in the key's 1-minute window
  session  find_sessions(key, t - 5 s, t + 5 s), remove what it found, put the merged session
Figures are CPU seconds of this process (time.process_time), flushes included.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from streams_core import Serdes, SessionWindow, Stores, TaskId, Windowed
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.internals.thread_cache import ThreadCache

S, L = Serdes.String(), Serdes.Long()


class _TaskContext:
    """The manager's context plus what a processor context adds: the thread cache and a record time."""

    def __init__(self, manager: ProcessorStateManager) -> None:
        self._manager = manager
        self.cache = ThreadCache(10 * 1024 * 1024)
        self.timestamp = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager.context, name)


def run(kind: str, caching: bool, n: int, directory: Path, key_count: int) -> float:
    manager = ProcessorStateManager(TaskId(0, 0), "bench", directory / f"{kind}-{caching}-{key_count}")
    if kind == "window":
        builder: Any = Stores.window_store_builder(Stores.persistent_window_store("w", 10**9, 60_000), S, L)
    else:
        builder = Stores.session_store_builder(Stores.persistent_session_store("s", 10**9), S, L)
    builder = (builder.with_caching_enabled() if caching else builder.with_caching_disabled()).with_logging_disabled()
    store = builder.build()
    context = _TaskContext(manager)
    store.init(context, store)
    rnd = random.Random(1)
    keys = [f"k{i}" for i in range(key_count)]
    started = time.process_time()
    for i in range(n):
        key, now = rnd.choice(keys), i * 10
        context.timestamp = now
        if kind == "window":
            start = now - now % 60_000
            store.put(key, (store.fetch(key, start) or 0) + 1, start)
        else:
            total, first = 1, now
            for session, count in list(store.find_sessions(key, now - 5000, now + 5000)):
                store.remove(session)
                total, first = total + count, min(first, session.window.start)
            store.put(Windowed(key, SessionWindow(first, now)), total)
        if i % 10_000 == 9_999:
            store.flush()
    store.flush()
    elapsed = time.process_time() - started
    manager.close()
    return elapsed


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("window", "session"):
            for key_count in (1000, 50):
                off, on = (run(kind, caching, count, Path(tmp), key_count) for caching in (False, True))
                print(f"{kind:8s} {count} records, {key_count:4d} keys: cache off {count / off:8.0f}/s, "
                      f"cache on {count / on:8.0f}/s")
