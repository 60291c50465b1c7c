"""A stateless chain into a tumbling or hopping `aggregate()` or `reduce()`, compiled to one
vectorized query (kind "window-aggregate").

`stream(...)` → fused stateless operators → `group_by`/`group_by_key` →
`windowed_by(TimeWindows)` → `aggregate(initializer, aggregator)` or `reduce(reducer)` (caching
on, emit per update) → `to_stream()` → fused stateless operators → `to(topic)` becomes the
session aggregation's query (native_session_count.py) with `TaskWindows` (task_windows.py) as the
per-task step:

    Kafka source → mapInArrow(SessionKeys: the chain per record; each aggregated record's task,
                   key, timestamp, place in its Kafka partition and value as bytes)
                 → groupBy(task).transformWithStateInPandas(SessionTask: the task's records in
                   Kafka Streams' order through `TaskWindows`, KStreamWindowAggregate's algorithm
                   over the task's stream time, the user's functions per record and window; the
                   record cache's flush, one row per changed window, through `SessionOutput`:
                   Windowed(key, TimeWindow(start, start + size)) and the aggregate through the
                   tail and the sinks' serdes; state: the window store's compacted changelog, key
                   bytes, start, timestamp, the store's value bytes, in a list state; the stream
                   time in a value state)
                 → Kafka sink

The windowed count keeps its own query on Spark's aggregation (native_window_count.py).
docs/spark.md ("Windowed aggregate and reduce natively") gives the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streams_core.config import StreamsConfig
from streams_core.kstream.internals.kstream_window_aggregate import KStreamWindowAggregate
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.spark.native_count import AGGREGATIONS, NO_AGGREGATION
from streams_core.spark.native_session_count import NativeSessionAggregation, TaskAggregation, task_aggregation
from streams_core.spark.task_sessions import AggregateFunctions
from streams_core.spark.task_windows import TaskWindows
from streams_core.state.windowed import TimeWindow, Window

__all__ = ["WindowAggregation", "find_native_window_aggregate"]


@dataclass(frozen=True, kw_only=True)
class WindowAggregation(TaskAggregation):
    """A tumbling or hopping aggregation's windows, and what follows it."""

    size: int
    advance: int

    def task_store(self, functions: AggregateFunctions) -> TaskWindows:
        return TaskWindows(self.size, self.advance, self.grace, functions)

    def window(self, start: int, column: int) -> tuple[Window, int]:
        """The window [start, start + size), stamped with its largest record timestamp."""
        return TimeWindow(start, start + self.size), column


def find_native_window_aggregate(sid: int, built: ProcessorTopology, builder: Any, config: StreamsConfig,
                                 readback: frozenset[str]) -> NativeSessionAggregation | str:  # fmt: skip
    """`NativeSessionAggregation` of kind "window-aggregate" when sub-topology `sid` aggregates or
    reduces time windows of a stateless chain as the native query can, else why not
    (`NO_AGGREGATION` without a windowed aggregate or reduce: the windowed count is
    `find_native_count`'s)."""
    windowed = [n for n in built.processors
                if isinstance(n.processor, KStreamWindowAggregate) and n.processor.operation != "count"]  # fmt: skip
    if not windowed:
        return NO_AGGREGATION
    if len([n for n in built.processors if isinstance(n.processor, AGGREGATIONS)]) > 1:
        return "several aggregations in one sub-topology"
    (agg,) = windowed
    processor: KStreamWindowAggregate[Any, Any, Any] = agg.processor

    def aggregation(fields: dict[str, Any], store: Any) -> TaskAggregation:
        return WindowAggregation(size=processor._size, advance=processor._advance, grace=processor._grace, **fields)

    return task_aggregation(sid, built, builder, config, readback, agg, "window-aggregate", aggregation)
