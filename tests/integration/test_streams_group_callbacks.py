"""Rebalance callbacks longer than the session timeout under `group.protocol=streams` (KIP-1071), on the 4.3.1 broker.

The test broker's session timeout is 10 s (tests/conftest.py, STREAMS_GROUP_TEST_TIMINGS). The word
count's task creation (restoration included) and a task's close are made to take 13 s, once each: the
member heartbeats on while its callbacks run, so the broker never fences it (nothing is lost, no
rejoin), the tasks move only after they were revoked, and the counts stay exact.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streams_core.runtime.tasks.task_manager import TaskManager
from tests.integration.streams_testkit import RecordSender, StreamsApp, instance_tasks
from tests.integration.test_streams_group_runtime import ALL_TASKS, PARTITIONS, counts_reach, lines, word_count
from tests.kafka_utils import create_topic, unique_topic

pytestmark = pytest.mark.broker

SESSION_TIMEOUT_S = 10.0  # the test broker's group.streams.session.timeout.ms
SLOW_S = SESSION_TIMEOUT_S + 3


class Fencings(logging.Handler):
    """Collects the membership's 'fenced' and state-change records (a rejoin goes through JOINING)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.fenced: list[str] = []
        self.joins = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "fenced" in message:
            self.fenced.append(message)
        if "-> JOINING" in message:  # joining, or rejoining after a fencing (FENCED -> JOINING)
            self.joins += 1


@pytest.fixture
def fencings() -> Iterator[Fencings]:
    handler = Fencings()
    logger = logging.getLogger("streams_core.clients.streams_group_membership")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


class SlowOnce:
    """Makes `TaskManager.<name>` sleep SLOW_S the first time `when(args)`, recording when it slept."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str, when: Callable[[tuple[Any, ...]], bool]) -> None:
        self.spans: list[tuple[float, float]] = []
        original = getattr(TaskManager, name)
        slow = self

        async def wrapper(manager: TaskManager, *args: Any, **kwargs: Any) -> Any:
            if not slow.spans and when(args):
                start = time.monotonic()
                slow.spans.append((start, start))
                await asyncio.sleep(SLOW_S)  # the event loop stays free, as an awaited restore or commit leaves it
                slow.spans[0] = (start, time.monotonic())
            return await original(manager, *args, **kwargs)

        monkeypatch.setattr(TaskManager, name, wrapper)


async def test_callbacks_longer_than_the_session_timeout_do_not_get_the_member_fenced(
    bootstrap_servers: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fencings: Fencings
) -> None:
    source, sink = unique_topic("sg-slow-lines"), unique_topic("sg-slow-counts")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    config = {"group.protocol": "streams", "statestore.cache.max.bytes": 0}
    slow_assignment = SlowOnce(monkeypatch, "handle_assignment", lambda args: bool(args[0]))  # tasks to create
    async with StreamsApp(bootstrap_servers, tmp_path, word_count(source, sink), config=config) as app, RecordSender(
        bootstrap_servers
    ) as sender:
        records, expected = lines(0, 40)
        await sender.send(source, records)
        first = await app.start(0)
        await app.wait_settled(ALL_TASKS, timeout=60 + SLOW_S)
        ((start, end),) = slow_assignment.spans
        assert end - start >= SLOW_S, "the first assignment's callback took longer than the session timeout"
        await counts_reach(bootstrap_servers, sink, expected, "read_uncommitted")
        assert fencings.fenced == [], f"fenced while creating its tasks: {fencings.fenced}"

        slow_close = SlowOnce(monkeypatch, "close_task", lambda args: True)  # the revocation of the tasks the second instance gets
        second = await app.start(1)
        split = await app.wait_settled(ALL_TASKS, timeout=60 + SLOW_S)
        assert split[0] and split[1], f"both instances run tasks: {split}"
        ((start, end),) = slow_close.spans
        assert end - start >= SLOW_S, "the revocation took longer than the session timeout"
        records, more = lines(40, 40)
        await sender.send(source, records)
        expected += more
        seen = await counts_reach(bootstrap_servers, sink, expected, "read_uncommitted")
        assert fencings.fenced == [], f"fenced while revoking: {fencings.fenced}"
        assert fencings.joins == 2, "each instance joined once and never rejoined"
        assert instance_tasks(first) | instance_tasks(second) == ALL_TASKS
    for word, values in seen.items():
        assert values == list(range(1, expected[word] + 1)), f"{word}: {values} (a handover lost or repeated records)"
