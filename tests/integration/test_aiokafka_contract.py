"""Contract tests: what the streams runtime relies on in aiokafka 0.14.0, against a real broker.

Each test pins one behaviour (or one shortcoming and its workaround) of the client so that an
aiokafka upgrade that changes it fails here first, not deep inside the runtime. docs/broker.md
sums up what they found.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.errors import InvalidConfigurationError, OffsetOutOfRangeError, ProducerFenced

from tests.kafka_utils import Consumed, create_topic, produce, read_all, unique_topic, wait_for_topic

pytestmark = pytest.mark.broker

#: Group settings that make rebalances take well under a second on the test broker.
FAST_GROUP: dict[str, Any] = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 200,
    "enable_auto_commit": False,
    "auto_offset_reset": "earliest",
}


async def eventually(
    condition: Callable[[], Awaitable[bool]], timeout: float = 30.0, what: str = "condition"
) -> None:
    """Await ``condition()`` until it is true, failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")


async def poll(
    *consumers: AIOKafkaConsumer, timeout_ms: int = 100
) -> dict[TopicPartition, list[Consumed]]:
    """One getmany() on every consumer at once (each consumer must be polled to make progress)."""
    batches = await asyncio.gather(*(c.getmany(timeout_ms=timeout_ms) for c in consumers))
    merged: dict[TopicPartition, list[Consumed]] = defaultdict(list)
    for batch in batches:
        for tp, records in batch.items():
            merged[tp].extend(records)
    return merged


async def take(
    consumer: AIOKafkaConsumer, tp: TopicPartition, n: int, timeout: float = 15.0
) -> list[Consumed]:
    """Exactly the next ``n`` records of ``tp``."""
    got: list[Consumed] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        if time.monotonic() > deadline:
            pytest.fail(f"got {len(got)} of {n} records from {tp}")
        batch = await consumer.getmany(tp, timeout_ms=200, max_records=n - len(got))
        got.extend(batch.get(tp, []))
    return got


async def read_to_end(
    consumer: AIOKafkaConsumer, tps: Iterable[TopicPartition], timeout: float = 15.0
) -> list[Consumed]:
    """Records of assigned ``tps`` until ``position >= end_offset`` for each (the restore check)."""
    tps = list(tps)
    ends = await consumer.end_offsets(tps)
    got: list[Consumed] = []
    deadline = time.monotonic() + timeout
    while True:
        positions = {tp: await consumer.position(tp) for tp in tps}
        if all(positions[tp] >= ends[tp] for tp in tps):
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"positions {positions} never reached end offsets {ends}")
        batch = await consumer.getmany(*tps, timeout_ms=200)
        for records in batch.values():
            got.extend(records)


# -- (a) custom assignor: subscription user data and assignment user data ---------------------
class UserDataAssignor(AbstractPartitionAssignor):
    """Sends per-member user data; the leader hands back a global partitions-by-host map.

    This is the shape of the runtime's StreamsPartitionAssignor: aiokafka calls these methods
    on the instance given in ``partition_assignment_strategy``, so per-instance state works.
    """

    name = "streams-contract"

    def __init__(
        self, process_id: str, application_server: str, events: list[tuple[Any, ...]]
    ) -> None:
        self.process_id = process_id
        self.application_server = application_server
        self.events = events
        self.led_rounds: dict[str, dict[str, dict[str, str]]] = {}
        self.received: dict[str, Any] | None = None

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        user_data = {"process_id": self.process_id, "application_server": self.application_server}
        return ConsumerProtocolMemberMetadata(1, sorted(topics), json.dumps(user_data).encode())

    def assign(
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        seen = {member_id: json.loads(meta.user_data) for member_id, meta in members.items()}
        round_id = uuid.uuid4().hex
        self.led_rounds[round_id] = seen
        topics = sorted({t for meta in members.values() for t in meta.subscription})
        tps = [(t, p) for t in topics for p in sorted(cluster.partitions_for_topic(t) or ())]
        order = sorted(members, key=lambda m: seen[m]["process_id"])
        owned: dict[str, list[tuple[str, int]]] = {m: [] for m in order}
        for i, tp in enumerate(tps):
            owned[order[i % len(order)]].append(tp)
        by_host = {seen[m]["application_server"]: sorted(owned[m]) for m in order}
        assignments = {}
        for member_id in order:
            per_topic: dict[str, list[int]] = defaultdict(list)
            for topic, partition in owned[member_id]:
                per_topic[topic].append(partition)
            user_data = {
                "round": round_id,
                "process_id": seen[member_id]["process_id"],
                "partitions_by_host": by_host,
            }
            assignments[member_id] = ConsumerProtocolMemberAssignment(
                1, sorted(per_topic.items()), json.dumps(user_data).encode()
            )
        return assignments

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        self.received = json.loads(assignment.user_data)
        self.events.append(("on_assignment", self.received["round"]))


class RecordingListener(ConsumerRebalanceListener):
    """Notes which assignment round the assignor had seen when partitions were assigned."""

    def __init__(self, assignor: UserDataAssignor) -> None:
        self.assignor = assignor

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.assignor.events.append(("revoked", sorted(revoked)))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        round_id = self.assignor.received["round"] if self.assignor.received else None
        self.assignor.events.append(("assigned", round_id, sorted(assigned)))


async def test_assignor_user_data_round_trip(bootstrap_servers: str) -> None:
    topic = unique_topic("assignor")
    await create_topic(bootstrap_servers, topic, partitions=6)
    group = unique_topic("assignor-group")
    assignors = [UserDataAssignor(f"process-{i}", f"127.0.0.1:70{i:02d}", []) for i in range(3)]
    consumers = [
        AIOKafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            group_id=group,
            partition_assignment_strategy=(assignor,),
            **FAST_GROUP,
        )
        for assignor in assignors
    ]
    for consumer, assignor in zip(consumers, assignors, strict=True):
        consumer.subscribe([topic], listener=RecordingListener(assignor))
    await asyncio.gather(*(c.start() for c in consumers))
    try:

        async def settled() -> bool:
            await poll(*consumers)
            rounds = {a.received["round"] if a.received else None for a in assignors}
            owned = [c.assignment() for c in consumers]
            return (
                len(rounds) == 1
                and None not in rounds
                and all(owned)
                and len(set().union(*owned)) == 6
                and sum(len(o) for o in owned) == 6
            )

        await eventually(settled, what="a stable 3-member group")
        final_round = assignors[0].received["round"]  # type: ignore[index]

        # The leader (exactly one member) saw every member's subscription user data.
        leaders = [a for a in assignors if final_round in a.led_rounds]
        assert len(leaders) == 1
        seen = leaders[0].led_rounds[final_round]
        assert sorted(seen.values(), key=lambda d: d["process_id"]) == [
            {"process_id": a.process_id, "application_server": a.application_server}
            for a in assignors
        ]

        # Every member got the leader's user data: its own identity and the global map.
        by_host = assignors[0].received["partitions_by_host"]  # type: ignore[index]
        for consumer, assignor in zip(consumers, assignors, strict=True):
            assert assignor.received is not None
            assert assignor.received["process_id"] == assignor.process_id
            assert assignor.received["partitions_by_host"] == by_host
            mine = {TopicPartition(t, p) for t, p in by_host[assignor.application_server]}
            assert consumer.assignment() == mine

            # on_assignment() ran before the listener's on_partitions_assigned, every round.
            for i, event in enumerate(assignor.events):
                if event[0] == "assigned":
                    assert assignor.events[i - 1] == ("on_assignment", event[1]), assignor.events
            last_assigned = [e for e in assignor.events if e[0] == "assigned"][-1]
            assert last_assigned[1] == final_round
            assert {TopicPartition(t, p) for t, p in last_assigned[2]} == mine
    finally:
        await asyncio.gather(*(c.stop() for c in consumers))


# -- (b) pause / resume --------------------------------------------------------------------------
async def test_pause_and_resume_single_partition(bootstrap_servers: str) -> None:
    topic = unique_topic("pause")
    await create_topic(bootstrap_servers, topic, partitions=2)
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    await produce(bootstrap_servers, topic, [(b"a%d" % i, b"x", 0) for i in range(5)])
    await produce(bootstrap_servers, topic, [(b"b%d" % i, b"y", 1) for i in range(5)])
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([p0, p1])
        await consumer.seek_to_beginning(p0, p1)
        consumer.pause(p0)
        assert consumer.paused() == {p0}
        got: dict[TopicPartition, list[Consumed]] = defaultdict(list)

        async def p1_drained() -> bool:
            for tp, records in (await poll(consumer)).items():
                got[tp].extend(records)
            return len(got[p1]) == 5

        await eventually(p1_drained, what="the unpaused partition's records")
        for _ in range(3):  # a few more polls: still nothing from the paused partition
            for tp, records in (await poll(consumer, timeout_ms=200)).items():
                got[tp].extend(records)
        assert got[p0] == []
        assert await consumer.position(p0) == 0

        consumer.resume(p0)
        assert consumer.paused() == set()

        async def p0_drained() -> bool:
            for tp, records in (await poll(consumer)).items():
                got[tp].extend(records)
            return len(got[p0]) == 5

        await eventually(p0_drained, what="the resumed partition's records")
        assert [r.offset for r in got[p0]] == list(range(5))
        assert [r.offset for r in got[p1]] == list(range(5))
    finally:
        await consumer.stop()


class RepausingListener(ConsumerRebalanceListener):
    """The workaround: remember what should be paused and pause it again after every assignment."""

    def __init__(self) -> None:
        self.consumer: AIOKafkaConsumer | None = None
        self.wanted_paused: set[TopicPartition] = set()

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        assert self.consumer is not None
        self.consumer.pause(*(self.wanted_paused & assigned))


@pytest.mark.parametrize("reapply", [False, True], ids=["plain", "re-paused-by-listener"])
async def test_pause_is_forgotten_across_rebalance(bootstrap_servers: str, reapply: bool) -> None:
    """aiokafka drops pause state on a rebalance (eager protocol): the runtime must re-pause."""
    topic = unique_topic("pause-rebalance")
    await create_topic(bootstrap_servers, topic, partitions=2)
    p0 = TopicPartition(topic, 0)
    all_tps = {p0, TopicPartition(topic, 1)}
    group = unique_topic("pause-group")
    listener = RepausingListener()
    first = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=group, **FAST_GROUP)
    listener.consumer = first
    if reapply:
        first.subscribe([topic], listener=listener)
    else:
        first.subscribe([topic])
    second = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap_servers, group_id=group, **FAST_GROUP
    )
    await first.start()
    try:

        async def owns_all() -> bool:
            await poll(first)
            return bool(first.assignment() == all_tps)

        await eventually(owns_all, what="the first member to own both partitions")
        first.pause(p0)
        listener.wanted_paused.add(p0)
        assert first.paused() == {p0}

        await second.start()  # rebalance: both partitions revoked, then split over two members

        async def split() -> bool:
            await poll(first, second)
            return len(first.assignment()) == 1 and len(second.assignment()) == 1

        await eventually(split, what="the two-member split")
        await second.stop()  # rebalance again: the first member owns both partitions again
        await eventually(owns_all, what="the first member to own both again")

        await produce(bootstrap_servers, topic, [(b"k", b"v", 0)])
        if reapply:
            assert first.paused() == {p0}
            for _ in range(5):
                assert p0 not in await poll(first, timeout_ms=200)
        else:
            assert first.paused() == set(), "pause survived the rebalance: drop the workaround?"

            async def p0_flows() -> bool:
                return p0 in await poll(first)

            await eventually(p0_flows, what="records of the formerly paused partition")
    finally:
        await first.stop()
        await second.stop()


# -- (c) exactly-once: consume-transform-produce with send_offsets_to_transaction ---------------
async def committed_soon(consumer: AIOKafkaConsumer, tp: TopicPartition, expected: int) -> None:
    """Wait for the group's committed offset: transaction markers land a few ms after
    commit_transaction() returns, and aiokafka's OffsetFetch (v<=3) has no require_stable."""

    async def visible() -> bool:
        return bool(await consumer.committed(tp) == expected)

    await eventually(visible, timeout=10, what=f"committed offset {expected} for {tp}")


async def test_consume_transform_produce_in_transactions(bootstrap_servers: str) -> None:
    source, sink = unique_topic("eos-in"), unique_topic("eos-out")
    await create_topic(bootstrap_servers, source)
    await create_topic(bootstrap_servers, sink)
    await produce(bootstrap_servers, source, [(b"k%d" % i, b"v%d" % i) for i in range(12)])
    group = unique_topic("eos-group")
    transactional_id = f"{group}-0_0"  # one producer per task (no KIP-447): app id + task id
    tp = TopicPartition(source, 0)
    consumer = AIOKafkaConsumer(
        source,
        bootstrap_servers=bootstrap_servers,
        group_id=group,
        isolation_level="read_committed",
        **FAST_GROUP,
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers, transactional_id=transactional_id
    )
    await asyncio.gather(consumer.start(), producer.start())
    try:

        async def cycle(abort: bool) -> None:
            batch = await take(consumer, tp, 3)
            await producer.begin_transaction()
            for record in batch:
                value = (b"ABORTED:" if abort else b"") + (record.value or b"").upper()
                await producer.send(sink, key=record.key, value=value)
            await producer.send_offsets_to_transaction({tp: batch[-1].offset + 1}, group)
            if abort:
                await producer.abort_transaction()
            else:
                await producer.commit_transaction()

        await cycle(abort=False)
        await committed_soon(consumer, tp, 3)
        await cycle(abort=True)

        # A new owner of the task starts its producer (InitProducerId) *before* it reads the
        # committed offsets: that fences the old producer and waits until the old
        # transaction's markers are written, so the offsets read next are exact.
        old, producer = (
            producer,
            AIOKafkaProducer(
                bootstrap_servers=bootstrap_servers, transactional_id=transactional_id
            ),
        )
        await producer.start()
        assert await consumer.committed(tp) == 3, "an aborted transaction commits no offsets"
        # The zombie learns it is fenced from its send future; after that commit_transaction()
        # fails an internal assert (state FATAL_ERROR), not with ProducerFenced.
        await old.begin_transaction()
        zombie_send = await old.send(sink, value=b"zombie")
        with pytest.raises(ProducerFenced):
            await asyncio.wait_for(zombie_send, 10)
        with pytest.raises(AssertionError, match="FATAL_ERROR"):
            await old.commit_transaction()
        # Its dead sender task leaves futures holding ProducerFenced that nobody retrieves;
        # asyncio would log "Future exception was never retrieved" when they are collected.
        loop = asyncio.get_running_loop()
        previous_handler = loop.get_exception_handler()

        def ignore_fenced(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            if isinstance(context.get("exception"), ProducerFenced):
                return
            if previous_handler is not None:
                previous_handler(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(ignore_fenced)
        try:
            await old.stop()
            del old, zombie_send
            gc.collect()
        finally:
            loop.set_exception_handler(previous_handler)

        await consumer.seek_to_committed(tp)  # rewind to what the transactions committed
        assert await consumer.position(tp) == 3
        for _ in range(3):  # several transactions on one producer (cf. aiokafka #1098)
            await cycle(abort=False)
        await committed_soon(consumer, tp, 12)
    finally:
        await asyncio.gather(consumer.stop(), producer.stop())

    committed = await read_all(bootstrap_servers, sink, isolation_level="read_committed")
    assert [r.value for r in committed] == [b"V%d" % i for i in range(12)]
    everything = await read_all(bootstrap_servers, sink, isolation_level="read_uncommitted")
    assert [r.value for r in everything if (r.value or b"").startswith(b"ABORTED:")] == [
        b"ABORTED:V3",
        b"ABORTED:V4",
        b"ABORTED:V5",
    ]
    assert not [r for r in everything if r.value == b"zombie"]


async def test_read_committed_never_returns_aborted_records(bootstrap_servers: str) -> None:
    topic = unique_topic("aborted")
    await create_topic(bootstrap_servers, topic, partitions=2)
    tid = unique_topic("aborter")
    await produce(
        bootstrap_servers, topic, [(b"a", b"keep-1", 0), (b"b", b"keep-2", 1)], transactional_id=tid
    )
    await produce(
        bootstrap_servers,
        topic,
        [(b"a", b"drop-1", 0), (b"b", b"drop-2", 1)],
        transactional_id=tid,
        abort=True,
    )
    await produce(bootstrap_servers, topic, [(b"a", b"keep-3", 0)], transactional_id=tid)
    await produce(bootstrap_servers, topic, [(b"c", b"plain", 1)])  # not transactional
    values = [
        r.value for r in await read_all(bootstrap_servers, topic, isolation_level="read_committed")
    ]
    assert values == [b"keep-1", b"keep-3", b"keep-2", b"plain"]


# -- (d) end offsets and the position check under read_committed ---------------------------------
async def test_end_offsets_and_position_with_control_records(bootstrap_servers: str) -> None:
    topic = unique_topic("lso")
    await create_topic(bootstrap_servers, topic)
    tp = TopicPartition(topic, 0)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers, transactional_id=unique_topic("lso-txn")
    )
    committed = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    uncommitted = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    await asyncio.gather(producer.start(), committed.start(), uncommitted.start())
    try:
        committed.assign([tp])
        uncommitted.assign([tp])
        await committed.seek_to_beginning(tp)

        # offsets 0-2 data, 3 the commit marker.
        async with producer.transaction():
            for i in range(3):
                await producer.send(topic, key=b"k", value=b"%d" % i)
        assert (await committed.end_offsets([tp]))[tp] == 4
        records = await read_to_end(committed, [tp])
        assert [r.offset for r in records] == [0, 1, 2]
        assert records[-1].offset + 1 == 3, "last record + 1 never reaches the end offset..."
        assert await committed.position(tp) == 4, "...but the position moves past the marker"

        # An open transaction: offsets 4-5 written, not committed. read_committed's end is the
        # last stable offset (4); read_uncommitted's is the high watermark (6).
        await producer.begin_transaction()
        futures = [await producer.send(topic, key=b"k", value=b"open-%d" % i) for i in range(2)]
        await asyncio.gather(*futures)
        assert (await committed.end_offsets([tp]))[tp] == 4
        assert (await uncommitted.end_offsets([tp]))[tp] == 6
        assert await read_to_end(committed, [tp]) == []
        assert await committed.position(tp) == 4

        # Abort: marker at 6, so the end is 7; the consumer skips the aborted batch and the
        # marker without returning a record, and its position still reaches the end.
        await producer.abort_transaction()
        assert (await committed.end_offsets([tp]))[tp] == 7
        assert await read_to_end(committed, [tp]) == []
        assert await committed.position(tp) == 7
        assert committed.last_stable_offset(tp) == 7
        assert committed.highwater(tp) == 7
    finally:
        await asyncio.gather(producer.stop(), committed.stop(), uncommitted.stop())


# -- (e) compacted topics through the admin client ------------------------------------------------
async def test_create_and_describe_compacted_topic(bootstrap_servers: str) -> None:
    topic = unique_topic("changelog")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        response = await admin.create_topics(
            [
                NewTopic(
                    topic,
                    3,
                    1,
                    topic_configs={"cleanup.policy": "compact", "min.compaction.lag.ms": "0"},
                )
            ]
        )
        assert [(e[0], e[1]) for e in response.topic_errors] == [(topic, 0)]
        # creation is acknowledged before every broker's metadata shows the topic
        await wait_for_topic(bootstrap_servers, topic, 3, admin=admin)
        (described,) = await admin.describe_topics([topic])
        assert described["error_code"] == 0
        assert sorted(p["partition"] for p in described["partitions"]) == [0, 1, 2]

        (config_response,) = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)]
        )
        (resource,) = config_response.to_object()["resources"]
        assert resource["error_code"] == 0 and resource["resource_name"] == topic
        entries = {e["config_names"]: e for e in resource["config_entries"]}
        assert entries["cleanup.policy"]["config_value"] == "compact"
        assert entries["min.compaction.lag.ms"]["config_value"] == "0"
        assert entries["retention.ms"]["config_value"] == "604800000"  # a default, also listed

        # Creating it again is "already exists" (36), not a failure of the request.
        again = await admin.create_topics([NewTopic(topic, 3, 1)])
        assert again.topic_errors[0][1] == 36
    finally:
        await admin.close()
    with pytest.raises(InvalidConfigurationError):
        await create_topic(
            bootstrap_servers, unique_topic("bad"), config={"cleanup.policy": "bogus"}
        )


# -- (f) manual assignment from an offset: changelog restore -------------------------------------
async def test_assigned_consumer_restores_from_offset(bootstrap_servers: str) -> None:
    topic = unique_topic("restore")
    await create_topic(bootstrap_servers, topic, partitions=2, config={"cleanup.policy": "compact"})
    await produce(bootstrap_servers, topic, [(b"other", b"p0", 0)])
    await produce(bootstrap_servers, topic, [(b"k%d" % i, b"v%d" % i, 1) for i in range(10)])
    tp = TopicPartition(topic, 1)
    # No group: assign() only, no offsets committed; "none" so a bad checkpoint is an error.
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="none",
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, 4)  # the checkpointed changelog offset
        records = await read_to_end(consumer, [tp])
        assert [(r.offset, r.key) for r in records] == [(i, b"k%d" % i) for i in range(4, 10)]

        consumer.seek(tp, 10)  # checkpoint at the end: nothing to restore
        assert await read_to_end(consumer, [tp]) == []

        consumer.seek(tp, 25)  # a checkpoint beyond the log (e.g. the topic was recreated)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(50):
                await consumer.getmany(tp, timeout_ms=200)
        await consumer.seek_to_beginning(tp)  # the runtime wipes the store and restores it all
        assert len(await read_to_end(consumer, [tp])) == 10
    finally:
        await consumer.stop()
