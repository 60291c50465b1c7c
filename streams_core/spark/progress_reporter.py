"""ProgressReporter: what `SparkRunner.run()` tells its user while queries run.

Per query: micro-batches done, records read, and the rate (records per second of the query's wall
time so far). On a terminal, one line rewritten in place and closed when the query ends; otherwise
(a log file, a service) an INFO log record at most every `interval_s` per query, and one when it
ends. The reports come from Spark's own progress of each micro-batch (`StreamingQuery.recentProgress`),
polled by the runner between its waits on the query.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = ["ProgressReporter", "QueryProgress"]

log = logging.getLogger(__name__)


@dataclass
class QueryProgress:
    """One query's totals so far, and every progress report Spark gave (by batch id, in order)."""

    name: str
    #: The records the deserialization handler skipped so far (the query's accumulator), if known.
    skipped: Callable[[], int] | None = None
    started: float = field(default_factory=time.monotonic)
    batches: int = 0
    records: int = 0
    last_batch: int = -1
    reports: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Records per second of wall time since the query started."""
        elapsed = time.monotonic() - self.started
        return self.records / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        skipped = self.skipped() if self.skipped is not None else 0
        return (f"{self.name}: {self.batches:,} micro-batches, {self.records:,} records, {self.rate:,.0f} records/s"
                + (f", {skipped:,} skipped by the deserialization handler" if skipped else ""))  # fmt: skip


class ProgressReporter:
    """Reports each query's progress to `stream` when it is a terminal, else to the log."""

    def __init__(self, stream: TextIO | None = None, *, enabled: bool = True, interval_s: float = 5.0) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.terminal = enabled and _is_terminal(self._stream)
        self._interval_s = interval_s
        self._logged: dict[str, float] = {}

    def start(self, name: str, skipped: Callable[[], int] | None = None) -> QueryProgress:
        """A query started: its totals, to pass to `poll` and `finish`."""
        return QueryProgress(name, skipped)

    def poll(self, progresses: list[tuple[QueryProgress, Any]]) -> None:
        """Take each (query totals, query handle)'s new micro-batch reports and show the totals."""
        changed = [progress for progress, handle in progresses if _take(progress, handle)]
        if not changed or not self.enabled:
            return
        if self.terminal:
            self._stream.write("\r" + " | ".join(progress.line() for progress, _ in progresses) + "\x1b[K")
            self._stream.flush()
            return
        now = time.monotonic()
        for progress in changed:
            if now - self._logged.get(progress.name, float("-inf")) >= self._interval_s:
                self._logged[progress.name] = now
                log.info("Query %s", progress.line())

    def finish(self, progress: QueryProgress, handle: Any) -> None:
        """The query ended: its last reports, and its totals once more."""
        _take(progress, handle)
        if self.terminal:
            self._stream.write("\r" + progress.line() + " (done)\x1b[K\n")
            self._stream.flush()
        log.info("Query %s (done)", progress.line())


def _take(progress: QueryProgress, handle: Any) -> bool:
    """Add the query's micro-batch reports newer than the last one taken; whether there were any."""
    new = [dict(p) for p in handle.recentProgress if int(p["batchId"]) > progress.last_batch]
    for report in new:
        progress.reports.append(report)
        progress.last_batch = int(report["batchId"])
        progress.batches += 1
        progress.records += int(report.get("numInputRows") or 0)
    return bool(new)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False
