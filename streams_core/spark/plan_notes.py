"""What `SparkRunner.plan()` says about each operator it does not run natively: where, why, what it writes.

A user whose aggregation runs in a Python stage instead of Spark's own operators should learn from
`plan()` why (the first condition of the native path it failed, `find_native_count`'s reason) and
what that costs in output: how many records the operator writes per update it receives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams_core.processor.internals.processor_node import ProcessorNode

__all__ = ["STAGE_LABELS", "stage_reason", "writes"]

#: The stage of a query as `plan()` names it.
STAGE_LABELS: Mapping[str, str] = {
    "stateless": "stateless stage (python, fused, per Arrow batch)",
    "keyed": "keyed stage (python, per key)",
    "task": "task stage (python, per task)",
}

#: Operators whose output is a table's updates: coalesced per key by a caching store.
_TABLE_UPDATES = frozenset({
    "KStreamAggregate", "KStreamReduce", "KTableSource", "KTableAggregate", "KTableReduce", "KTableFilter",
    "KTableMapValues", "KTableKTableJoin", "KTableKTableJoinMerger",
})  # fmt: skip
_WINDOWED = frozenset({"KStreamWindowAggregate", "KStreamSlidingWindowAggregate", "KStreamSessionWindowAggregate"})
_FIXED: Mapping[str, str] = {
    "KStreamKTableJoin": "one record per stream record that finds its key in the table (left join: per stream record)",
    "KStreamKStreamJoin": "one record per matching pair (left/outer: an unmatched record once its window closes)",
    "KStreamJoinWindow": "nothing downstream (it fills the join's window store)",
    "KTableSuppress": "what suppress releases (a key's latest once its window closes or time limit passes)",
}


def stage_reason(stage: str, task_operator: str | None, source_topics: int) -> str:
    """Why a sub-topology runs in `stage` (`task_operator`: the DSL name of an operator needing the task)."""
    if stage == "stateless":
        return "no state stores"
    if task_operator is not None:
        return f"{task_operator} needs the whole task (its stream time, or its stores across keys)"
    if stage == "task":
        return (f"it reads {source_topics} topics with state: the task waits for the topic behind "
                "(docs/spark.md, 'Joins and micro-batches')")  # fmt: skip
    return "its stores are read and written for the record's own key only"


def writes(node: ProcessorNode, caching: Mapping[str, bool]) -> str:
    """How many records `node` writes per update it receives (`caching`: store name -> caching on)."""
    processor: Any = node.processor
    kind = type(processor).__name__
    cached = any(caching.get(store, False) for store in node.store_names)
    if kind in _FIXED:
        return _FIXED[kind]
    if kind in _WINDOWED:
        strategy = getattr(processor, "_emit_strategy", None)
        if strategy is not None and strategy.emits_on_close:
            return "one record per window, when it closes"
        return "one record per changed window and micro-batch" if cached else "one record per update (caching off)"
    if kind in _TABLE_UPDATES and node.store_names:
        return "one record per changed key and micro-batch (the record cache per commit)" if cached else \
            "one record per update (caching off)"  # fmt: skip
    if type(processor).__module__.startswith("streams_core.") and kind != "KStreamFixedKeyProcessor":
        return "per record it receives, what its function returns"
    return "what its process() and its punctuations forward"
