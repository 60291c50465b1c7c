"""A rebalance callback that hangs, under `group.protocol=streams` (KIP-1071), on the 4.3.1 broker.

Heartbeats go on while callbacks run, so the broker's session timeout (10 s here) never ends a member
whose assignment callback hangs: the poll timer does (`max.poll.interval.ms`, 4 s here). The second
instance's task creation hangs; 4 s later its member leaves the group with a WARNING naming the
thread, the callback and the timeout, and the first instance runs every task again and counts on.
Once the callback returns, the member loses the tasks it was creating, rejoins at its thread's next
poll, the tasks split again, and every word's counts are exactly 1..n.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from streams_core.runtime.kafka_streams import State
from streams_core.runtime.tasks.task_manager import TaskManager
from tests.integration.streams_testkit import RecordSender, StreamsApp, instance_tasks, wait_until
from tests.integration.test_streams_group_runtime import ALL_TASKS, PARTITIONS, counts_reach, lines, word_count
from tests.kafka_utils import create_topic, unique_topic

pytestmark = pytest.mark.broker

MAX_POLL_MS = 4_000  # below the test broker's 10 s session timeout: the poll timer acts, not the broker
DEADLINE_S = 60.0


async def test_a_hung_assignment_callback_leaves_the_group_after_max_poll_interval(
    bootstrap_servers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="streams_core.clients")
    source, sink = unique_topic("sg-hang-lines"), unique_topic("sg-hang-counts")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    config = {"group.protocol": "streams", "statestore.cache.max.bytes": 0, "main.consumer.max.poll.interval.ms": MAX_POLL_MS}
    release = asyncio.Event()
    hung: list[float] = []
    original = TaskManager.handle_assignment

    async def hanging(manager: TaskManager, *args: Any, **kwargs: Any) -> None:
        if not hung and args[0] and manager.app_state_dir.is_relative_to(app.state_dir(1)):
            hung.append(time.monotonic())  # the second instance's first task creation never ends, until released
            await asyncio.wait_for(release.wait(), DEADLINE_S * 3)
        await original(manager, *args, **kwargs)

    monkeypatch.setattr(TaskManager, "handle_assignment", hanging)
    async with StreamsApp(bootstrap_servers, tmp_path, word_count(source, sink), config=config) as app, RecordSender(
        bootstrap_servers
    ) as sender:
        records, expected = lines(0, 40)
        await sender.send(source, records)
        first = await app.start(0)
        await app.wait_settled(ALL_TASKS, timeout=DEADLINE_S)
        await counts_reach(bootstrap_servers, sink, expected, "read_uncommitted")

        second = await app.start(1)
        await wait_until(lambda: bool(hung), DEADLINE_S, message=lambda: f"the second instance got no task: {app.tasks()}")
        await wait_until(
            lambda: instance_tasks(first) == ALL_TASKS and first.state is State.RUNNING and "-> STALE" in caplog.text,
            DEADLINE_S,
            message=lambda: f"the first instance runs {sorted(map(str, instance_tasks(first)))}",
        )
        moved_s = time.monotonic() - hung[0]
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "max.poll.interval.ms" in r.getMessage()]
        assert len(warnings) == 1, warnings
        assert f"max.poll.interval.ms={MAX_POLL_MS}" in warnings[0] and "StreamThread-1" in warnings[0], warnings[0]
        assert "the rebalance callback assigning active tasks" in warnings[0], warnings[0]
        assert "fenced" not in caplog.text, "the member left by itself: the broker never fenced it"
        records, more = lines(40, 40)
        await sender.send(source, records)
        expected += more
        await counts_reach(bootstrap_servers, sink, expected, "read_uncommitted")  # the first instance counts on

        release.set()  # the callback returns: the member loses those tasks, polls and rejoins
        split = await app.wait_settled(ALL_TASKS, timeout=DEADLINE_S)
        assert split[0] and split[1], f"both instances run tasks again: {split}"
        assert "STALE -> JOINING" in caplog.text, "the stale member rejoined"
        records, more = lines(80, 40)
        await sender.send(source, records)
        expected += more
        seen = await counts_reach(bootstrap_servers, sink, expected, "read_uncommitted")
        assert instance_tasks(first) | instance_tasks(second) == ALL_TASKS
    assert moved_s >= MAX_POLL_MS / 1000, f"the tasks moved {moved_s:.1f} s into the hang, before the poll timer expired"
    for word, values in seen.items():
        assert values == list(range(1, expected[word] + 1)), f"{word}: {values} (records lost or counted twice)"
    print(f"\nhung assignment callback: the first instance ran every task again {moved_s:.1f} s into the hang")
