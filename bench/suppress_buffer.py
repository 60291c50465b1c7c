"""Per-record cost of `KTableSuppress.process`: until_time_limit(100 ms) over 1,000 keys, 200,000
updates (every one forwarded 100 ms of stream time later), best of 3.

Since the buffer is a changelogged store (issue 35) the run also flushes it every 1,000 records, as
a commit does, into a list (the changelog's serialization is in the figure; the producer is not).
On a tree from before that change (the buffer a dict in the processor) it times the processor
alone, for comparison:

    PYTHONPATH=$PWD .venv/bin/python bench/suppress_buffer.py
"""

from __future__ import annotations

import time
from typing import Any

from streams_core import Serdes
from streams_core.common.change import Change
from streams_core.common.task_id import TaskId
from streams_core.kstream.internals.ktable_suppress import KTableSuppress
from streams_core.processor.processor import Record

S, L = Serdes.String(), Serdes.Long()
RECORDS, KEYS, FLUSH_EVERY = 200_000, 1_000, 1_000


class Context:
    """The processor's and the store's view of a task: forwards and changelog sends are counted."""

    application_id = "app"
    task_id = TaskId(0, 0)
    key_serde, value_serde = S, L
    topic, partition, offset = "in", 0, 0

    def __init__(self) -> None:
        self.forwarded = 0
        self.sent: list[Any] = []
        self.record_collector = self
        self.metadata: dict[str, int] = {}
        self.store: Any = None

    def forward(self, record: Any, child: str | None = None) -> None:
        self.forwarded += 1

    def send(self, *record: Any) -> None:
        self.sent.append(record)

    def register(self, store: Any, restore_callback: Any) -> None:
        pass

    def get_state_store(self, name: str) -> Any:
        return self.store

    def add_processor_metadata_key_value(self, key: str, value: int) -> None:
        self.metadata[key] = value

    def processor_metadata_for_key(self, key: str) -> int | None:
        return self.metadata.get(key)


def main() -> None:
    context = Context()
    try:
        from streams_core.state.internals.in_memory_time_ordered_key_value_change_buffer import (
            InMemoryTimeOrderedKeyValueChangeBuffer,
        )

        store: Any = InMemoryTimeOrderedKeyValueChangeBuffer("buffer", S, L, True, False)
        store.init(context, store)
        context.store = store
        processor: Any = KTableSuppress("suppress", "buffer", 100, False, False, None, None, False)
        variant = f"buffer store, changelog flushed every {FLUSH_EVERY}"
    except ImportError:
        store = None
        processor = KTableSuppress("suppress", 100, False, False, None, None, False, (S, L), None)  # type: ignore[call-arg, arg-type]
        variant = "buffer in a dict (before issue 35)"
    processor.init(context)
    keys = [f"key-{i}" for i in range(KEYS)]
    records = [Record(keys[i % KEYS], Change(i, i - 1), i) for i in range(RECORDS)]
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for i, record in enumerate(records):
            processor.process(record)
            if store is not None and i % FLUSH_EVERY == FLUSH_EVERY - 1:
                store.flush()
        best = min(best, time.perf_counter() - start)
        records = [Record(r.key, r.value, r.timestamp + RECORDS) for r in records]
    print(f"{variant}: {best / RECORDS * 1e6:.2f} µs/record "
          f"({context.forwarded} forwarded, {len(context.sent)} changelog records)")  # fmt: skip


if __name__ == "__main__":
    main()
