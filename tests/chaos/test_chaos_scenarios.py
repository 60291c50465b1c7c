"""Issue 15's reliability scenarios, small: three word-count processes under seeded faults.

Each test runs one scenario of tests/chaos/scenarios.py (`SMALL`) through tests/chaos/harness.py
and fails with the seed in its message; `CHAOS_SEED=<seed>` replays the same input and fault plan.
The full-size runs: `bench/chaos/run.py`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.chaos.harness import ChaosReport, chaos_seed, run_scenario
from tests.chaos.scenarios import SMALL

if TYPE_CHECKING:
    from streams_core.broker import LocalKafkaBroker

pytestmark = [pytest.mark.broker, pytest.mark.chaos, pytest.mark.slow]


async def _run(name: str, bootstrap: str, tmp_path: Path, broker_pid: int | None = None) -> ChaosReport:
    report = await run_scenario(SMALL[name], seed=chaos_seed(), bootstrap=bootstrap, tmp_path=tmp_path, broker_pid=broker_pid)
    print(report.figures())
    report.raise_if_failed()
    return report


async def test_exactly_once_under_kill_9_counts_exactly_and_never_twice(bootstrap_servers: str, tmp_path: Path) -> None:
    report = await _run("eos", bootstrap_servers, tmp_path)
    assert report.kills + report.skipped_faults == SMALL["eos"].kills
    assert report.kills >= 1, f"seed {report.seed}: no instance was killed"
    assert report.output_records == report.occurrences, "every committed update is one word occurrence"


async def test_worker_processes_killed_under_exactly_once_are_replaced_and_count_exactly(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """Two instances of two worker processes each: kill -9s of single workers (the instance replaces
    them) and of a whole instance (its workers die with it; restarted): counts exact, never twice."""
    report = await _run("workers", bootstrap_servers, tmp_path)
    assert report.worker_kills >= 1, f"seed {report.seed}: no worker was killed"
    assert report.output_records == report.occurrences, "every committed update is one word occurrence"


async def test_at_least_once_under_kill_9_and_sigterm_never_counts_below_the_truth(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    report = await _run("alos", bootstrap_servers, tmp_path)
    assert report.kills >= 1 and report.restarts >= 1, f"seed {report.seed}: no fault happened"


async def test_a_broker_stall_mid_stream_loses_nothing(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if os.environ.get("STREAMS_TEST_BOOTSTRAP_SERVERS"):
        pytest.skip("an external broker cannot be stalled from here")
    broker: LocalKafkaBroker = request.getfixturevalue("kafka_broker")
    report = await _run("stall", broker.bootstrap_servers, tmp_path, broker_pid=broker.pid)
    assert report.stall_seconds >= SMALL["stall"].stall_seconds


async def test_autostop_under_kill_9_stops_exactly_at_the_runs_stop_offsets(bootstrap_servers: str, tmp_path: Path) -> None:
    report = await _run("autostop", bootstrap_servers, tmp_path)
    assert report.kills >= 1, f"seed {report.seed}: the run ended before any kill"
