"""StoreMetrics: operation counts of one store, and total latency per operation when enabled.

Counting is a dict increment per operation. Latency is opt-in (`MeteredKeyValueStore(...,
record_latency=True)` or `set_record_latency(True)`, for Kafka Streams' DEBUG recording level):
it wraps the store's operation methods with a timer, so it costs nothing when off. For
operations returning iterators it times creating the iterator, not consuming it.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["StoreMetrics"]


class StoreMetrics:
    """Metrics of one store: `counts[op]` always, `latency_ns[op]` (total) when recording."""

    __slots__ = ("counts", "latency_ns", "scope", "store_name")

    def __init__(self, scope: str, store_name: str) -> None:
        self.scope = scope
        self.store_name = store_name
        self.counts: Counter[str] = Counter()
        self.latency_ns: Counter[str] = Counter()

    def snapshot(self) -> dict[str, Any]:
        """A plain copy for exporters (Prometheus, logs)."""
        return {
            "scope": self.scope,
            "store": self.store_name,
            "counts": dict(self.counts),
            "latency_ns_total": dict(self.latency_ns),
        }

    def set_timed(self, store: Any, operations: Iterable[str], enabled: bool) -> None:
        """Install (or remove) timing wrappers over `store`'s operation methods."""
        for op in operations:
            if enabled:
                setattr(store, op, self._timed(op, getattr(type(store), op).__get__(store)))
            else:
                store.__dict__.pop(op, None)

    def _timed(self, op: str, method: Callable[..., Any]) -> Callable[..., Any]:
        latency = self.latency_ns
        clock = time.perf_counter_ns

        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return method(*args, **kwargs)
            finally:
                latency[op] += clock() - start

        return timed

    def __repr__(self) -> str:
        return f"StoreMetrics({self.scope}/{self.store_name}, {dict(self.counts)})"
