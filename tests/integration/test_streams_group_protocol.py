"""Streams groups (KIP-1071) on the real 4.3.1 broker: our heartbeats join, get tasks, split them, leave.

The broker holds the topology a member sends and computes the assignment; StreamsGroupDescribe shows
what it recorded. The broker's defaults apply (streams groups are on in 4.2+; the first assignment
waits `group.streams.initial.rebalance.delay.ms`, 3 s), so waits have generous deadlines.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError
from aiokafka.protocol.commit import OffsetCommitRequest

from streams_core import Materialized, Serdes, StreamsBuilder
from streams_core.clients.stable_offsets import fetch_stable_offsets
from streams_core.clients.streams_group_channel import StreamsGroupChannel
from streams_core.clients.streams_group_membership import MemberInfo, MemberState, StreamsGroupMembership
from streams_core.clients.streams_group_offset_commit import STALE_MEMBER_EPOCH
from streams_core.clients.streams_group_protocol import StatusCode, StreamsGroupTopology
from streams_core.common.host_info import HostInfo
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.assignment.streams_group_topology import streams_group_topology
from streams_core.runtime.topology_metadata import TopologyMetadata
from tests.kafka_utils import create_topic, unique_topic, wait_for_topic

pytestmark = pytest.mark.broker

PARTITIONS = 4
DEADLINE_S = 60.0


def word_count_topology(application_id: str, source: str, sink: str) -> StreamsGroupTopology:
    builder = StreamsBuilder()
    (builder.stream(source, key_serde=Serdes.String(), value_serde=Serdes.String())
     .flat_map_values(lambda line: line.lower().split()).group_by(lambda key, word: word)
     .count(Materialized.as_("counts")).to_stream().to(sink, value_serde=Serdes.Long()))  # fmt: skip
    itb = builder.build().internal_topology_builder
    itb.set_application_id(application_id)
    return streams_group_topology(TopologyMetadata(itb, application_id))


async def settle(channel: StreamsGroupChannel, members: list[StreamsGroupMembership], done: Callable[[], bool]) -> None:
    """Heartbeat every member (installing what it is given at once) until `done()`, within DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, f"not settled within {DEADLINE_S} s: {[(m.state, m.owned) for m in members]}"
        for member in members:
            try:
                await channel.heartbeat_once(member)
            except KafkaError as exc:  # the coordinator is still starting (offsets topic): retry
                assert exc.retriable, exc
            assert member.state is not MemberState.FATAL, member.fatal_error
            if member.reconciliation is not None:
                step = member.reconciliation
                member.revoked(step)
                member.assigned(step)
            owned = [t for m in members for t in m.owned.active]
            assert len(owned) == len(set(owned)), f"the broker gave a task to two members: {sorted(owned)}"
        await asyncio.sleep(0.2)


def all_tasks() -> set[TaskId]:
    return {TaskId(s, p) for s in (0, 1) for p in range(PARTITIONS)}


async def test_members_join_split_the_tasks_and_leave(bootstrap_servers: str, admin: AIOKafkaAdminClient) -> None:
    app = unique_topic("sg-app")
    source, sink = unique_topic("sg-in"), unique_topic("sg-out")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    topology = word_count_topology(app, source, sink)
    channel = StreamsGroupChannel(admin, app)

    first = StreamsGroupMembership(
        app, uuid.uuid4().hex, MemberInfo(str(uuid.uuid4()), topology, HostInfo("127.0.0.1", 8081), {"zone": "a"})
    )
    first.join()
    await settle(channel, [first], lambda: first.state is MemberState.STABLE and first.owned.active == all_tasks())
    assert first.member_epoch > 0 and first.heartbeat_interval_ms > 0
    assert not any(s.code == StatusCode.MISSING_SOURCE_TOPICS for s in first.statuses)
    assert StatusCode.ASSIGNMENT_DELAYED not in {s.code for s in first.statuses}, "the delay is over once tasks came"

    # the broker created the internal topics from the topology: one partition per task
    await wait_for_topic(bootstrap_servers, f"{app}-counts-repartition", PARTITIONS, admin=admin)
    await wait_for_topic(bootstrap_servers, f"{app}-counts-changelog", PARTITIONS, admin=admin)
    assert await topic_config(admin, f"{app}-counts-changelog", "cleanup.policy") == "compact"
    assert await topic_config(admin, f"{app}-counts-repartition", "cleanup.policy") == "delete"

    described = await channel.describe()
    assert described.error_code == 0 and described.state == "Stable", described
    assert described.topology is not None
    by_id = {s.subtopology_id: s for s in described.topology.subtopologies}
    assert sorted(by_id) == ["0", "1"]
    assert by_id["0"].source_topics == (source,)
    assert by_id["0"].repartition_sink_topics == (f"{app}-counts-repartition",)
    assert [t.name for t in by_id["1"].repartition_source_topics] == [f"{app}-counts-repartition"]
    assert [t.name for t in by_id["1"].state_changelog_topics] == [f"{app}-counts-changelog"]
    (member,) = described.members
    assert member.member_id == first.member_id and member.process_id == first.info.process_id
    assert member.user_endpoint == HostInfo("127.0.0.1", 8081) and member.client_tags == {"zone": "a"}
    assert member.assignment.active == all_tasks()

    second = StreamsGroupMembership(app, uuid.uuid4().hex, MemberInfo(str(uuid.uuid4()), topology, HostInfo("127.0.0.1", 8082)))
    second.join()

    def split() -> bool:
        a, b = first.owned.active, second.owned.active
        stable = first.state is MemberState.STABLE and second.state is MemberState.STABLE
        return stable and bool(a) and bool(b) and not (a & b) and a | b == all_tasks()

    await settle(channel, [first, second], split)
    assert abs(len(first.owned.active) - len(second.owned.active)) <= 1
    endpoints = {e.endpoint for e in first.endpoints}
    assert endpoints == {HostInfo("127.0.0.1", 8081), HostInfo("127.0.0.1", 8082)}, first.endpoints

    second.leave()
    await channel.heartbeat_once(second)
    assert second.state is MemberState.LEFT
    await settle(channel, [first], lambda: first.state is MemberState.STABLE and first.owned.active == all_tasks())
    described = await channel.describe()
    assert [m.member_id for m in described.members] == [first.member_id]

    first.leave()
    await channel.heartbeat_once(first)
    assert first.state is MemberState.LEFT
    assert (await channel.describe()).members == ()


async def topic_config(admin: AIOKafkaAdminClient, topic: str, name: str) -> str:
    (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {name: None})])
    (resource,) = response.resources
    return str({entry[0]: entry[1] for entry in resource[4]}[name])


async def test_missing_source_topics_are_reported_and_no_tasks_given(admin: AIOKafkaAdminClient) -> None:
    app, source = unique_topic("sg-app"), unique_topic("sg-missing")
    channel = StreamsGroupChannel(admin, app)
    member = StreamsGroupMembership(app, uuid.uuid4().hex, MemberInfo(str(uuid.uuid4()), word_count_topology(app, source, "out")))
    member.join()
    await settle(channel, [member], lambda: bool(member.statuses))
    assert member.owned.active == frozenset()
    missing = [s for s in member.statuses if s.code == StatusCode.MISSING_SOURCE_TOPICS]
    assert missing and source in missing[0].detail, member.statuses
    member.leave()
    await channel.heartbeat_once(member)


async def test_describing_an_unknown_group_says_so(admin: AIOKafkaAdminClient) -> None:
    described = await StreamsGroupChannel(admin, unique_topic("sg-none")).describe()
    assert described.error_code == 69 and described.members == ()  # GROUP_ID_NOT_FOUND


async def test_offsets_are_committed_as_a_member_with_its_epoch(bootstrap_servers: str, admin: AIOKafkaAdminClient) -> None:
    app = unique_topic("sg-app")
    source, sink = unique_topic("sg-in"), unique_topic("sg-out")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    channel = StreamsGroupChannel(admin, app)
    member = StreamsGroupMembership(app, uuid.uuid4().hex, MemberInfo(str(uuid.uuid4()), word_count_topology(app, source, sink)))
    member.join()
    await settle(channel, [member], lambda: member.state is MemberState.STABLE and member.owned.active == all_tasks())
    tp = TopicPartition(source, 0)
    assert await channel.commit_offsets(member, {tp: OffsetAndMetadata(5, "m")}) == {}
    assert await fetch_stable_offsets(admin, app, [tp]) == {tp: 5}

    node = await admin.find_coordinator(app)
    as_aiokafka = OffsetCommitRequest(app, member.member_epoch, member.member_id, -1, [(source, [(0, 9, "")])])
    assert (await admin._send_request(as_aiokafka, node)).topics == [(source, [(0, 35)])]  # UNSUPPORTED_VERSION
    anonymous = OffsetCommitRequest(app, -1, "", -1, [(source, [(0, 9, "")])])
    assert (await admin._send_request(anonymous, node)).topics == [(source, [(0, 25)])]  # UNKNOWN_MEMBER_ID
    member.member_epoch += 1  # an epoch the group never gave
    assert await channel.commit_offsets(member, {tp: 9}) == {tp: STALE_MEMBER_EPOCH}
    member.member_epoch -= 1
    assert await fetch_stable_offsets(admin, app, [tp]) == {tp: 5}, "no refused commit went through"

    # a transactional producer's TxnOffsetCommit, without member id or epoch, is taken (exactly-once as today)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, transactional_id=unique_topic("sg-txn"))
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_offsets_to_transaction({KafkaTopicPartition(source, 1): 11}, app)
    finally:
        await producer.stop()
    other = TopicPartition(source, 1)
    assert await fetch_stable_offsets(admin, app, [tp, other]) == {tp: 5, other: 11}
    member.leave()
    await channel.heartbeat_once(member)


async def test_a_fenced_member_rejoins_with_epoch_zero(bootstrap_servers: str, admin: AIOKafkaAdminClient) -> None:
    app = unique_topic("sg-app")
    source, sink = unique_topic("sg-in"), unique_topic("sg-out")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    channel = StreamsGroupChannel(admin, app)
    member = StreamsGroupMembership(app, uuid.uuid4().hex, MemberInfo(str(uuid.uuid4()), word_count_topology(app, source, sink)))
    member.join()
    await settle(channel, [member], lambda: member.state is MemberState.STABLE)
    member.member_epoch += 5  # an epoch the broker never gave: FENCED_MEMBER_EPOCH
    await channel.heartbeat_once(member)
    assert member.state is MemberState.FENCED
    member.rejoin()
    assert member.member_epoch == 0
    await settle(channel, [member], lambda: member.state is MemberState.STABLE and member.owned.active == all_tasks())
    member.leave()
    await channel.heartbeat_once(member)
