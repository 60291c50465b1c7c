"""Buffers are stores on the real broker: kill -9 and task migration lose no buffered record.

The scenarios of tests/chaos/buffer_kills.py, small (their full size: bench/chaos/buffers.py):
a suppressed windowed count killed three times under each guarantee, and a versioned
stream-table join with grace through a task migration and a kill. Before the buffers were
stores, 6 and 9 windows of 102 were never emitted in the first scenario.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.buffer_kills import join_migration_and_kills, suppress_kills

pytestmark = [pytest.mark.broker, pytest.mark.chaos, pytest.mark.slow]


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
async def test_suppressed_final_results_survive_three_kill_9(bootstrap_servers: str, tmp_path: Path, guarantee: str) -> None:
    report = await suppress_kills(bootstrap_servers, tmp_path, guarantee, seconds=60, kills=3)
    print(f"\n{report}")
    report.raise_if_failed()
    assert report.figures["windows"] == 480 and len(report.kills) == 3


async def test_join_grace_buffer_survives_a_task_migration_and_a_kill_9(bootstrap_servers: str, tmp_path: Path) -> None:
    report = await join_migration_and_kills(bootstrap_servers, tmp_path, records=1_200, kills=1)
    print(f"\n{report}")
    report.raise_if_failed()
    assert report.figures["joined"] == 1_200
