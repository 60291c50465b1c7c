"""A streams-group member frozen with SIGSTOP (`group.protocol=streams`, exactly-once), on the 4.3.1 broker.

Two counting apps (processes: a count per word into a logged store, each count sent on) share a
streams group. One is stopped with SIGSTOP while input arrives: it cannot heartbeat, so the broker
fences it after the group's session timeout (10 s on the test broker) and the other takes its tasks,
restoring their counts, and goes on. After SIGCONT the frozen one finds itself fenced (its next
heartbeat is refused), loses its tasks without committing, and rejoins with the same member id; the
transactions it had open are fenced or aborted, so no count is repeated: every word's committed
counts are exactly 1..n.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from streams_core.clients.streams_group_channel import StreamsGroupChannel
from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from tests.integration.apps.harness import (
    AppProcess,
    AppProcesses,
    InputFeeder,
    not_one_to_n,
    sequences_by_key,
    wait_all_committed,
)
from tests.integration.streams_testkit import tasks_of, wait_until
from tests.integration.test_streams_group_mixed import describe, tasks_by_endpoint
from tests.integration.test_streams_group_runtime import KEYS, PARTITIONS
from tests.kafka_utils import create_topic, read_all, unique_topic

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SESSION_TIMEOUT_S = 10.0  # the test broker's group.streams.session.timeout.ms (tests/conftest.py)
DEADLINE_S = 90.0
RECORDS = 6_000  # 150 batches of 40 keyed records, 0.1 s apart: input still arrives after the SIGCONT
FROZEN, OTHER = HostInfo("127.0.0.1", 18111), HostInfo("127.0.0.1", 18112)
FENCED = re.compile(r"member (\S+) fenced \((UNKNOWN_MEMBER_ID|FENCED_MEMBER_EPOCH)\)")


@contextmanager
def frozen(process: AppProcess) -> Iterator[None]:
    """SIGSTOP, and SIGCONT on the way out whatever happens (the reaper's SIGKILL works on a stopped process too)."""
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        if process.proc.poll() is None:
            os.kill(process.pid, signal.SIGCONT)


async def test_a_member_stopped_with_sigstop_is_fenced_its_tasks_move_and_it_rejoins_without_duplicates(
    bootstrap_servers: str, admin: AIOKafkaAdminClient, tmp_path: Path
) -> None:
    bootstrap = bootstrap_servers
    app, source, sink = unique_topic("sg-sigstop"), unique_topic("sg-sigstop-in"), unique_topic("sg-sigstop-out")
    for topic in (source, sink):
        await create_topic(bootstrap, topic, PARTITIONS)
    channel = StreamsGroupChannel(admin, app)
    everything = tasks_of(PARTITIONS)
    feeder = InputFeeder(bootstrap, source, KEYS, RECORDS, chunk=40, pause=0.1)
    args = ("--group-protocol", "streams", "--commit-interval-ms", "100")
    try:
        with AppProcesses(tmp_path, bootstrap, app, source, sink) as processes:
            a = processes.start("a", "exactly_once", *args, "--application-server", str(FROZEN))
            await a.wait_running(timeout=DEADLINE_S)
            b = processes.start("b", "exactly_once", *args, "--application-server", str(OTHER))
            await b.wait_running(timeout=DEADLINE_S)
            tasks: dict[HostInfo | None, frozenset[TaskId]] = {}

            async def split() -> bool:
                nonlocal tasks
                tasks = await tasks_by_endpoint(channel)
                ours, theirs = tasks.get(FROZEN, frozenset()), tasks.get(OTHER, frozenset())
                return bool(ours) and bool(theirs) and not ours & theirs and ours | theirs == everything

            await wait_until(split, DEADLINE_S, interval=0.3, message=lambda: f"tasks {tasks}\n{a.log_tail()}\n{b.log_tail()}")
            described = await describe(channel)
            assert described is not None
            (member_id,) = [m.member_id for m in described.members if m.user_endpoint == FROZEN]

            feeder.start()
            await wait_until(lambda: feeder.produced >= 800, DEADLINE_S, message=lambda: "the feeder is slow")
            with frozen(a):
                stopped = time.monotonic()
                produced_at_stop = feeder.produced

                async def other_runs_everything() -> bool:
                    nonlocal tasks
                    tasks = await tasks_by_endpoint(channel)
                    return tasks == {OTHER: everything}

                await wait_until(other_runs_everything, DEADLINE_S, interval=0.3, message=lambda: f"tasks {tasks}\n{b.log_tail()}")
                takeover_s = time.monotonic() - stopped
                produced_at_takeover = feeder.produced
                assert produced_at_takeover > produced_at_stop, "input arrived while the member was frozen"
                log_at_cont = a.log_path.stat().st_size
            assert not feeder.done, "the input ended before the SIGCONT: feed more records"

            def fenced_lines() -> list[tuple[str, str]]:
                with open(a.log_path, errors="replace") as log:
                    log.seek(log_at_cont)
                    return FENCED.findall(log.read())

            await wait_until(lambda: bool(fenced_lines()), DEADLINE_S, message=a.log_tail)
            assert {found_id for found_id, _ in fenced_lines()} == {member_id}, fenced_lines()
            await wait_until(split, DEADLINE_S, interval=0.3, message=lambda: f"tasks {tasks}\n{a.log_tail()}")
            described = await describe(channel)
            assert described is not None
            assert [m.member_id for m in described.members if m.user_endpoint == FROZEN] == [member_id], "rejoined with its member id"
            truth = await feeder.wait(timeout=DEADLINE_S)
            await wait_all_committed(bootstrap, app, source, timeout=DEADLINE_S)
            assert a.proc.poll() is None and b.proc.poll() is None, f"{a.log_tail()}\n{b.log_tail()}"
            assert await a.terminate() == 0, a.log_tail()
            assert await b.terminate() == 0, b.log_tail()
    finally:
        await feeder.aclose()
    committed = await read_all(bootstrap, sink, isolation_level="read_committed", timeout=30)
    wrong = not_one_to_n(sequences_by_key(committed), truth)
    assert not wrong, f"words whose committed counts are not exactly 1..n: (outputs, n) = {wrong}"
    assert len(committed) == sum(truth.values())
    assert takeover_s >= SESSION_TIMEOUT_S * 0.8, f"the tasks moved {takeover_s:.1f} s after the SIGSTOP, before the session timeout"
    print(
        f"\nSIGSTOP after {produced_at_stop} of {RECORDS} records: the other member ran all {len(everything)} tasks "
        f"{takeover_s:.1f} s later; after SIGCONT the frozen one was fenced and rejoined as {member_id}"
    )
