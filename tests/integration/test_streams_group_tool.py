"""Kafka's kafka-streams-groups.sh (StreamsGroupCommand, from the kafka-tools jar of the broker's version) describes our streams group.

Two Python instances of a word count (8 tasks) run with `group.protocol=streams`; the tool, run through
`python -m streams_core.broker streams-groups` as a user would, lists both members with their process
ids, client ids and the active tasks each instance runs, the group's state, and the committed offsets;
after one closes, the other alone with all 8 tasks. About 20 s (slow), mostly the broker's 3 s initial delay
and 5 s heartbeats, and a JVM per tool run.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from streams_core.broker.kafka_tools import kafka_tools_libs
from streams_core.common.task_id import TaskId
from streams_core.runtime.kafka_streams import KafkaStreams
from tests.integration.streams_testkit import RecordSender, StreamsApp, instance_tasks, wait_until
from tests.integration.test_streams_group_runtime import ALL_TASKS, PARTITIONS, lines, word_count
from tests.kafka_utils import create_topic, unique_topic

pytestmark = [pytest.mark.broker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TOOL_DEADLINE_S = 60.0  # one JVM start and a describe, on a loaded machine


@pytest.fixture(scope="module")
def tools() -> Path:
    """kafka-tools' jars, fetched from Maven Central on first use (its own deadline and error)."""
    return kafka_tools_libs()


async def streams_groups(*args: str) -> str:
    """`python -m streams_core.broker streams-groups ARGS` (kafka-streams-groups.sh); its standard output."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "streams_core.broker", "streams-groups", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(process.communicate(), TOOL_DEADLINE_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"streams-groups {' '.join(args)} took over {TOOL_DEADLINE_S} s") from None
    assert process.returncode == 0, f"streams-groups {' '.join(args)} exited {process.returncode}:\n{err.decode()}"
    return out.decode()


@dataclass(frozen=True)
class Member:
    """One row of `--describe --members --verbose`."""

    member_id: str
    protocol: str
    member_epoch: int
    target_epoch: int
    process_id: str
    client_id: str
    tasks: dict[str, frozenset[TaskId]]  # ACTIVE, TARGET-ACTIVE, STANDBY... -> tasks


def parse_tasks(assignments: str) -> dict[str, frozenset[TaskId]]:
    """`ACTIVE: 0:[0,2]; 1:[0,2]; TARGET-ACTIVE: 0:[0,2]; ...` -> {"ACTIVE": {0_0, 0_2, 1_0, 1_2}, ...}."""
    sections = re.findall(r"([A-Z-]+): ((?:\d+:\[[\d,]*\]; )*)", assignments + " ")
    assert sections, f"no assignment sections in {assignments!r}"
    return {
        kind: frozenset(TaskId(int(sub), int(p)) for sub, parts in re.findall(r"(\d+):\[([\d,]*)\]", body)
                        for p in parts.split(",") if p)
        for kind, body in sections
    }  # fmt: skip


def parse_members(output: str, group: str) -> list[Member]:
    lines_ = [line for line in output.splitlines() if line.strip()]
    header = lines_[0].split()
    assert header[:8] == ["GROUP", "TARGET-ASSIGNMENT-EPOCH", "TOPOLOGY-EPOCH", "MEMBER", "MEMBER-PROTOCOL",
                          "MEMBER-EPOCH", "PROCESS", "CLIENT-ID"], output  # fmt: skip
    members = []
    for line in lines_[1:]:
        name, target, _topology, member, protocol, epoch, process, client, assignments = line.split(maxsplit=8)
        assert name == group, line
        members.append(Member(member, protocol, int(epoch), int(target), process, client, parse_tasks(assignments)))
    return members


def rows(output: str) -> list[dict[str, str]]:
    """A table the tool prints (one header line, space-separated columns without spaces) as dicts."""
    lines_ = [line for line in output.splitlines() if line.strip()]
    header = lines_[0].replace("COORDINATOR (ID)", "COORDINATOR").split()
    return [dict(zip(header, line.replace(" (", "(").split(), strict=True)) for line in lines_[1:]]


async def describe(bootstrap: str, group: str, *what: str) -> str:
    return await streams_groups("--bootstrap-server", bootstrap, "--describe", "--group", group, *what)


async def members_match(bootstrap: str, group: str, instances: dict[str, KafkaStreams]) -> list[Member]:
    """Describe the members until each instance (by client.id) is one member whose active tasks are the ones
    it runs and whose assignment is reconciled (epoch = target epoch, active = target active)."""
    seen: list[Member] = []

    async def done() -> bool:
        seen[:] = parse_members(await describe(bootstrap, group, "--members", "--verbose"), group)
        expected = {(s.process_id, client_id, instance_tasks(s)) for client_id, s in instances.items()}
        described = {(m.process_id, m.client_id.split("-StreamThread-")[0], m.tasks.get("ACTIVE")) for m in seen}
        reconciled = all(m.member_epoch == m.target_epoch and m.tasks.get("ACTIVE") == m.tasks.get("TARGET-ACTIVE")
                         for m in seen)  # fmt: skip
        return len(seen) == len(instances) and described == expected and reconciled

    await wait_until(done, 60, interval=1.0, message=lambda: f"the tool's members {seen} != the instances' tasks "
                     f"{ {c: (s.process_id, sorted(instance_tasks(s))) for c, s in instances.items()} }")  # fmt: skip
    return seen


async def test_streams_groups_describe_lists_our_members_with_their_tasks(
    bootstrap_servers: str, tmp_path: Path, tools: Path
) -> None:
    source, sink = unique_topic("sgtool-lines"), unique_topic("sgtool-counts")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    config = {"group.protocol": "streams", "statestore.cache.max.bytes": 0}
    async with (
        StreamsApp(bootstrap_servers, tmp_path, word_count(source, sink), config=config) as app,
        RecordSender(bootstrap_servers) as sender,
    ):
        group = app.application_id
        first = await app.start(0, **{"client.id": "sgtool-first"})
        second = await app.start(1, **{"client.id": "sgtool-second"})
        split = await app.wait_settled(ALL_TASKS, timeout=60)
        assert split[0] and split[1], f"both instances run tasks: {split}"

        members = await members_match(bootstrap_servers, group, {"sgtool-first": first, "sgtool-second": second})
        assert {m.protocol for m in members} == {"streams"}
        assert all(m.client_id.endswith("-consumer-streams-group") for m in members), members
        assert frozenset().union(*(m.tasks["ACTIVE"] for m in members)) == ALL_TASKS
        [state] = rows(await describe(bootstrap_servers, group, "--state"))
        assert (state["STATE"], state["#MEMBERS"]) == ("Stable", "2"), state

        records, _ = lines(0, 40)  # 40 lines of 3 words: 40 source records, 120 repartition records
        await sender.send(source, records)
        offsets: list[dict[str, str]] = []

        async def committed() -> bool:
            offsets[:] = rows(await describe(bootstrap_servers, group, "--offsets", "--verbose"))
            by_topic: dict[str, int] = {}
            for row in offsets:
                if row["OFFSET-LAG"] == "0":
                    by_topic[row["TOPIC"]] = by_topic.get(row["TOPIC"], 0) + int(row["CURRENT-OFFSET"])
            return by_topic == {source: 40, f"{group}-counts-repartition": 120} and len(offsets) == 2 * PARTITIONS

        await wait_until(committed, 60, interval=1.0, message=lambda: f"the tool's offsets {offsets}")

        await app.stop(0)
        await app.wait_settled(ALL_TASKS, timeout=60)
        [alone] = await members_match(bootstrap_servers, group, {"sgtool-second": second})
        assert alone.tasks["ACTIVE"] == ALL_TASKS
