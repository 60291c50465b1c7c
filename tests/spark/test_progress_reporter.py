"""ProgressReporter: run()'s per-query progress, on a terminal and through logging (no Spark)."""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest

from streams_core.spark.progress_reporter import ProgressReporter


class FakeQuery:
    """A StreamingQuery's `recentProgress`: Spark keeps the last reports only."""

    def __init__(self) -> None:
        self.recentProgress: list[dict[str, Any]] = []

    def batch(self, batch_id: int, rows: int) -> None:
        self.recentProgress = [*self.recentProgress[-1:], {"batchId": batch_id, "numInputRows": rows}]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_one_line_rewritten_per_micro_batch_and_closed_at_the_end() -> None:
    out = Terminal()
    reporter = ProgressReporter(out)
    query = FakeQuery()
    totals = reporter.start("app-subtopology-0")
    for batch_id, rows in enumerate((4_000, 4_000, 1_500)):
        query.batch(batch_id, rows)
        reporter.poll([(totals, query)])
    reporter.poll([(totals, query)])  # nothing new: nothing written
    reporter.finish(totals, query)
    lines = out.getvalue().split("\r")[1:]
    assert len(lines) == 4
    assert lines[0].startswith("app-subtopology-0: 1 micro-batches, 4,000 records, ")
    assert lines[-1].startswith("app-subtopology-0: 3 micro-batches, 9,500 records, ") and lines[-1].endswith("(done)\x1b[K\n")
    assert [r["numInputRows"] for r in totals.reports] == [4_000, 4_000, 1_500], "every report kept, beyond Spark's last few"


def test_without_a_terminal_progress_goes_to_the_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="streams_core.spark.progress_reporter")
    out = io.StringIO()
    reporter = ProgressReporter(out, interval_s=3600)
    query = FakeQuery()
    totals = reporter.start("q")
    for batch_id in range(3):
        query.batch(batch_id, 10)
        reporter.poll([(totals, query)])
    reporter.finish(totals, query)
    assert out.getvalue() == ""
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, "throttled: the first report, then the end"
    assert messages[0].startswith("Query q: 1 micro-batches, 10 records")
    assert messages[1].startswith("Query q: 3 micro-batches, 30 records") and messages[1].endswith("(done)")


def test_progress_off_writes_nothing_but_keeps_the_reports(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="streams_core.spark.progress_reporter")
    out = Terminal()
    reporter = ProgressReporter(out, enabled=False)
    query = FakeQuery()
    totals = reporter.start("q")
    query.batch(0, 5)
    reporter.poll([(totals, query)])
    assert out.getvalue() == "" and not caplog.records
    assert totals.records == 5
