"""Task offsets and warm-up tasks (KIP-1071) on the 4.3.1 broker: what it takes, pinned.

A member would send TaskOffsets/TaskEndOffsets (its tasks' cumulative changelog offsets) so that
the broker can count a warm-up task as caught up. The 4.3.1 broker has none of it: it refuses a
heartbeat carrying either field (even empty) with INVALID_REQUEST, answers a task offset interval
of 0, never assigns warm-up tasks and refuses a member that reports one. So our member sends none,
as Java's 4.3 client sends none and Java's 4.4 client strips them against a v0 coordinator
(docs/streams-groups.md, "Decisions"). When the test broker is upgraded, this test says what changed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import replace

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from streams_core.clients.streams_group_channel import StreamsGroupChannel
from streams_core.clients.streams_group_membership import INVALID_REQUEST, MemberInfo, MemberState, StreamsGroupMembership
from streams_core.clients.streams_group_protocol import HeartbeatRequestData, HeartbeatResponseData, TaskAssignment
from streams_core.common.task_id import TaskId
from tests.integration.test_streams_group_protocol import DEADLINE_S, PARTITIONS, all_tasks, settle, word_count_topology
from tests.kafka_utils import create_topic, unique_topic

pytestmark = pytest.mark.broker


async def answered(channel: StreamsGroupChannel, data: HeartbeatRequestData) -> HeartbeatResponseData:
    """One heartbeat's answer; retried while the coordinator is still starting (a fresh broker's offsets topic)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return await channel.heartbeat(data)
        except KafkaError as exc:
            assert exc.retriable and time.monotonic() < deadline, exc
            await asyncio.sleep(0.2)


async def test_the_4_3_broker_takes_no_task_offsets_and_assigns_no_warm_up_tasks(
    bootstrap_servers: str, admin: AIOKafkaAdminClient
) -> None:
    app, source, sink = unique_topic("sg-offsets"), unique_topic("sg-offsets-in"), unique_topic("sg-offsets-out")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    topology = word_count_topology(app, source, sink)
    channel = StreamsGroupChannel(admin, app)
    member = StreamsGroupMembership(app, uuid.uuid4().hex, MemberInfo(str(uuid.uuid4()), topology))
    member.join()
    joining = member.heartbeat_request()
    assert joining is not None
    member.on_request_failed()  # sent by hand below, not through the membership

    for offsets in ({TaskId(0, 0): 5}, {}):
        for request, name in (
            (replace(joining, task_offsets=offsets), "TaskOffsets"),
            (replace(joining, task_end_offsets=offsets), "TaskEndOffsets"),
        ):
            answer = await answered(channel, request)
            assert (answer.error_code, answer.error_message) == (INVALID_REQUEST, f"{name} are not supported yet."), answer

    await settle(channel, [member], lambda: member.state is MemberState.STABLE and member.owned.active == all_tasks())
    answer = await answered(channel, HeartbeatRequestData(app, member.member_id, member.member_epoch))
    assert answer.error_code == 0, answer
    assert answer.task_offset_interval_ms == 0, "4.3.1 asks for no task offsets"
    assert member.owned.warmup == frozenset() and member.owned.standby == frozenset()

    reporting_a_warm_up = HeartbeatRequestData(
        app, member.member_id, member.member_epoch, tasks=TaskAssignment(member.owned.active, warmup=frozenset({TaskId(1, 0)}))
    )
    answer = await answered(channel, reporting_a_warm_up)
    assert (answer.error_code, answer.error_message) == (INVALID_REQUEST, "WarmupTasks are not supported yet."), answer
