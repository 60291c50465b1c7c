"""ThreadMetrics: one stream thread's counters and the snapshot `KafkaStreams.metrics()` lists.

The loop records its polls, processing slices, punctuations and commits here; everything else in
the snapshot is read, at the moment it is asked for, from what counts it (the task manager, the
collectors, the dead-letter sink, the run mode), never copied.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.autostop.run_end import ThreadRunEnd
from streams_core.runtime.tasks.dead_letter_sink import DeadLetterSink
from streams_core.runtime.tasks.record_collector_impl import RecordCollectorImpl
from streams_core.runtime.tasks.task_manager import TaskManager

__all__ = ["ThreadMetrics"]


class ThreadMetrics:
    """Counters of one thread's loop, and its metrics snapshot."""

    __slots__ = (
        "_collector",
        "_dead_letters",
        "_highwater",
        "_run_end",
        "_tasks",
        "commit_count",
        "commit_latency_ms_total",
        "poll_count",
        "poll_latency_ms_total",
        "process_latency_ms_total",
        "punctuate_count",
    )

    def __init__(
        self,
        tasks: TaskManager,
        collector: RecordCollectorImpl,
        dead_letters: DeadLetterSink,
        run_end: ThreadRunEnd,
        highwater: Callable[[TopicPartition], int | None],
    ) -> None:
        self._tasks = tasks
        self._collector = collector
        self._dead_letters = dead_letters
        self._run_end = run_end
        self._highwater = highwater
        self.commit_count = 0
        self.commit_latency_ms_total = 0.0
        self.poll_count = 0
        self.poll_latency_ms_total = 0.0
        self.process_latency_ms_total = 0.0
        self.punctuate_count = 0

    def polled(self, started: float) -> None:
        """A poll that began at `started` (`time.perf_counter()`) returned."""
        self.poll_count += 1
        self.poll_latency_ms_total += (time.perf_counter() - started) * 1000

    def processed(self, started: float) -> None:
        self.process_latency_ms_total += (time.perf_counter() - started) * 1000

    def committed(self, started: float) -> None:
        self.commit_count += 1
        self.commit_latency_ms_total += (time.perf_counter() - started) * 1000

    def snapshot(self, thread: str, state: str) -> dict[str, Any]:
        """The thread's entry in `KafkaStreams.metrics()["threads"]` (docs/metrics.md)."""
        tm = self._tasks
        collectors = [self._collector, *(c for c in tm.record_collectors() if c is not self._collector)]
        return {
            "thread": thread,
            "state": state,
            "tasks": sorted(str(t) for t in tm.tasks),
            "processed_records": tm.processed_records,
            "dropped_records": tm.dropped_records,
            "produced_records": sum(c.sent_records for c in collectors),
            "production_dropped_records": sum(c.dropped_records for c in collectors),
            "standby_tasks": sorted(str(t) for t in tm.standby_tasks),
            "restored_records": tm.restored_records,
            "pause_count": tm.pause_count,
            "resume_count": tm.resume_count,
            "commit_count": self.commit_count,
            "commit_latency_ms_avg": self.commit_latency_ms_total / self.commit_count if self.commit_count else 0.0,
            "poll_count": self.poll_count,
            "autostop": self._run_end.metrics(tm.tasks),
            "poll_latency_ms_total": self.poll_latency_ms_total,
            "process_latency_ms_total": self.process_latency_ms_total,
            "punctuate_count": self.punctuate_count,
            "dead_lettered_records": self._dead_letters.sent_records,
            "cache": {"hits": tm.cache.hits, "misses": tm.cache.misses, "evictions": tm.cache.evictions},
            "task_metrics": tm.task_metrics(self._highwater),
        }
