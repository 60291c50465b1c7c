"""The fake Kafka behaves as the contract the runtime relies on (tests/integration/test_aiokafka_contract.py
pins the same facts against a real broker): logs and offsets, getmany waiting and limits, pauses,
eager group rebalances through the members' assignor, transactions, fencing, faults."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from streams_core import StreamsConfig, clients
from streams_core.clients.admin import NewTopicSpec
from streams_core.common.partitioner import default_partition
from streams_core.common.topic_partition import TopicPartition
from streams_core.testing import FakeKafkaClientSupplier, FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeConsumer, FakeProducer

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def config(**extra: Any) -> StreamsConfig:
    return StreamsConfig({"application.id": "app", "bootstrap.servers": "fake:9092", **extra})


def manual_consumer(cluster: FakeKafkaCluster, *, read_committed: bool = False, reset: str = "none") -> FakeConsumer:
    return FakeConsumer(cluster, client_id="c", group_id=None, read_committed=read_committed, auto_offset_reset=reset)


async def started_producer(cluster: FakeKafkaCluster, transactional_id: str | None = None) -> FakeProducer:
    producer = FakeProducer(cluster, client_id="p", transactional_id=transactional_id)
    await producer.start()
    return producer


async def send(producer: FakeProducer, tp: TopicPartition, *values: bytes) -> Any:
    batch = producer.create_batch()
    for v in values:
        batch.append(timestamp=1, key=b"k", value=v, headers=[])
    batch.close()
    return await producer.send_batch(batch, tp.topic, partition=tp.partition)


async def read_to_end(consumer: FakeConsumer, tps: Iterable[TopicPartition]) -> list[bytes | None]:
    tps = list(tps)
    ends = await consumer.end_offsets(tps)
    got: list[bytes | None] = []
    for _ in range(50):
        if all([await consumer.position(tp) >= ends[tp] for tp in tps]):
            return got
        for records in (await consumer.getmany(*tps, timeout_ms=10)).values():
            got += [r.value for r in records]
    raise AssertionError(f"never reached {ends}")


# -- logs --------------------------------------------------------------------------------------


async def test_produce_assigns_offsets_and_murmur2_partitions() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("t", 3)
    first = cluster.produce("t", "a", "1", timestamp=5)
    second = cluster.produce("t", "a", "2", timestamp=6, headers=[("h", b"x")])
    assert first.partition == second.partition == default_partition(b"a", 3)
    assert (first.offset, second.offset) == (0, 1)
    assert cluster.records("t") == [first, second]
    assert second.headers == (("h", b"x"),)
    assert cluster.end_offsets("t")[TopicPartition("t", first.partition)] == 2


async def test_getmany_waits_for_data_without_spinning_and_honours_max_records() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("t")
    consumer = manual_consumer(cluster)
    await consumer.start()
    consumer.assign([T0])
    await consumer.seek_to_beginning(T0)
    started = time.monotonic()
    assert await consumer.getmany(timeout_ms=50) == {}
    assert time.monotonic() - started >= 0.045
    asyncio.get_running_loop().call_later(0.02, lambda: [cluster.produce("t", None, str(i), partition=0) for i in range(5)])
    started = time.monotonic()
    batch = await consumer.getmany(timeout_ms=2000, max_records=3)
    assert time.monotonic() - started < 0.5, "woken by the produce, not the timeout"
    assert [r.offset for r in batch[T0]] == [0, 1, 2]
    assert [r.offset for r in (await consumer.getmany(timeout_ms=0))[T0]] == [3, 4]


async def test_getmany_returns_nothing_for_unassigned_partitions() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("t", 2)
    cluster.produce("t", None, "x", partition=1)
    consumer = manual_consumer(cluster, reset="earliest")
    consumer.assign([T0])
    assert await consumer.getmany(T1, timeout_ms=0) == {}
    with pytest.raises(clients.IllegalStateError):
        await consumer.position(T1)


async def test_pause_and_resume() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("t", 2)
    for p in (0, 1):
        cluster.produce("t", None, "x", partition=p)
    consumer = manual_consumer(cluster, reset="earliest")
    consumer.assign([T0, T1])
    consumer.pause(T0)
    assert consumer.paused() == {T0}
    assert set(await consumer.getmany(timeout_ms=0)) == {T1}
    assert await consumer.getmany(timeout_ms=10) == {}
    assert await consumer.position(T0) == 0
    consumer.resume(T0)
    assert set(await consumer.getmany(timeout_ms=0)) == {T0}
    with pytest.raises(clients.IllegalStateError):
        consumer.pause(TopicPartition("other", 0))


async def test_resume_wakes_a_waiting_getmany() -> None:
    cluster = FakeKafkaCluster()
    cluster.produce("t", None, "x", partition=0)
    consumer = manual_consumer(cluster, reset="earliest")
    consumer.assign([T0])
    consumer.pause(T0)
    asyncio.get_running_loop().call_later(0.02, consumer.resume, T0)
    started = time.monotonic()
    assert T0 in await consumer.getmany(timeout_ms=2000)
    assert time.monotonic() - started < 0.5


async def test_restore_from_offset_and_out_of_range() -> None:
    cluster = FakeKafkaCluster()
    for i in range(10):
        cluster.produce("t", f"k{i}", f"v{i}", partition=0)
    consumer = manual_consumer(cluster)
    consumer.assign([T0])
    with pytest.raises(clients.IllegalStateError):
        await consumer.getmany(timeout_ms=0)  # no position and auto.offset.reset none
    consumer.seek(T0, 4)
    assert await read_to_end(consumer, [T0]) == [b"v%d" % i for i in range(4, 10)]
    consumer.seek(T0, 25)
    with pytest.raises(clients.OffsetOutOfRangeError):
        await consumer.getmany(T0, timeout_ms=0)
    cluster.delete_records(T0, 3)
    await consumer.seek_to_beginning(T0)
    assert await consumer.position(T0) == 3
    consumer.seek(T0, 1)
    with pytest.raises(clients.OffsetOutOfRangeError):
        await consumer.getmany(T0, timeout_ms=0)


# -- transactions --------------------------------------------------------------------------------


async def test_transactions_markers_lso_and_visibility() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("t")
    producer = await started_producer(cluster, "tx")
    committed, uncommitted = manual_consumer(cluster, read_committed=True), manual_consumer(cluster)
    for c in (committed, uncommitted):
        c.assign([T0])
        await c.seek_to_beginning(T0)

    await producer.begin_transaction()
    await send(producer, T0, b"0", b"1", b"2")
    await producer.commit_transaction()
    assert (await committed.end_offsets([T0]))[T0] == 4  # 0-2 data, 3 the marker
    assert await read_to_end(committed, [T0]) == [b"0", b"1", b"2"]
    assert await committed.position(T0) == 4

    await producer.begin_transaction()
    await (await send(producer, T0, b"open-0", b"open-1"))
    assert (await committed.end_offsets([T0]))[T0] == 4
    assert (await uncommitted.end_offsets([T0]))[T0] == 6
    assert await read_to_end(committed, [T0]) == []
    assert cluster.values("t") == [b"0", b"1", b"2"]
    assert cluster.values("t", committed_only=False) == [b"0", b"1", b"2", b"open-0", b"open-1"]

    await producer.abort_transaction()
    assert (await committed.end_offsets([T0]))[T0] == 7
    assert await read_to_end(committed, [T0]) == []
    assert await committed.position(T0) == 7
    assert await read_to_end(uncommitted, [T0]) == [b"0", b"1", b"2", b"open-0", b"open-1"]
    assert cluster.kinds("txn_begin", "produce", "txn_commit", "txn_abort") == [
        "txn_begin", "produce", "txn_commit", "txn_begin", "produce", "txn_abort",
    ]


async def test_transaction_offsets_commit_only_with_the_transaction() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("out")
    producer = await started_producer(cluster, "tx")
    await producer.begin_transaction()
    await send(producer, TopicPartition("out", 0), b"x")
    await producer.send_offsets_to_transaction({T0: 3}, "g")
    assert cluster.committed("g") == {}
    await producer.abort_transaction()
    assert cluster.committed("g") == {}
    await producer.begin_transaction()
    await producer.send_offsets_to_transaction({T0: 5}, "g")
    await producer.commit_transaction()
    assert cluster.committed("g") == {T0: 5}


async def test_second_producer_fences_the_first_and_aborts_its_transaction() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("out")
    out = TopicPartition("out", 0)
    old = await started_producer(cluster, "tx")
    await old.begin_transaction()
    await (await send(old, out, b"zombie-1"))
    new = await started_producer(cluster, "tx")
    assert cluster.events_of("txn_abort")[-1]["reason"] == "fenced"
    with pytest.raises(clients.ProducerFenced):
        await old.commit_transaction()
    with pytest.raises(clients.ProducerFenced):
        await old.begin_transaction()
    zombie_send = await send(old, out, b"zombie-2")
    with pytest.raises(clients.ProducerFenced):
        await zombie_send
    await new.begin_transaction()
    await send(new, out, b"fresh")
    await new.commit_transaction()
    assert cluster.values("out") == [b"fresh"]


async def test_transactional_send_needs_an_open_transaction() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("out")
    producer = await started_producer(cluster, "tx")
    with pytest.raises(clients.IllegalStateError):
        await send(producer, TopicPartition("out", 0), b"x")


async def test_open_transaction_times_out() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("out")
    producer = FakeProducer(cluster, client_id="p", transactional_id="tx", transaction_timeout_ms=1)
    await producer.start()
    await producer.begin_transaction()
    await (await send(producer, TopicPartition("out", 0), b"x"))
    await asyncio.sleep(0.01)
    assert cluster.end_offsets("out", committed_only=True)[TopicPartition("out", 0)] == 2
    assert cluster.events_of("txn_abort")[-1]["reason"] == "timeout"


# -- producer ------------------------------------------------------------------------------------


async def test_delivery_future_flush_and_injected_failures() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("out", 2)
    producer = await started_producer(cluster)
    first = await send(producer, TopicPartition("out", 1), b"a", b"b")
    assert not first.done(), "delivered on a later loop iteration, like a real producer"
    await producer.flush()
    assert first.result().offset == 0 and first.result().partition == 1
    assert cluster.kinds("produce", "producer_flush") == ["produce", "producer_flush"]
    cluster.fail_delivery("out", partition=1)
    failed = await send(producer, TopicPartition("out", 1), b"c")
    ok = await send(producer, TopicPartition("out", 0), b"d")
    await producer.flush()
    assert isinstance(failed.exception(), clients.KafkaTimeoutError)
    assert ok.result().offset == 0
    assert cluster.values("out") == [b"d", b"a", b"b"]
    cluster.fail_next("send", clients.KafkaConnectionError("down"))
    with pytest.raises(clients.KafkaConnectionError):
        await send(producer, TopicPartition("out", 0), b"e")
    with pytest.raises(clients.KafkaTimeoutError):
        await send(producer, TopicPartition("missing", 0), b"e")
    assert await producer.partitions_for("out") == {0, 1}
    assert await producer.partitions_for("missing") == set()


async def test_batch_fills_at_its_size() -> None:
    cluster = FakeKafkaCluster()
    producer = FakeProducer(cluster, client_id="p", batch_size=100)
    batch = producer.create_batch()
    assert batch.append(timestamp=1, key=None, value=b"x" * 500, headers=[]) is not None, "the first always fits"
    assert batch.append(timestamp=1, key=None, value=b"y", headers=[]) is None
    assert batch.record_count() == 1


# -- groups --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assigned:
    partitions: list[tuple[str, int]]
    user_data: bytes


class RoundRobinAssignor:
    """A GroupAssignor that records calls; the leader deals partitions out by member order."""

    def __init__(self, name: str, log: list[tuple[str, ...]]) -> None:
        self.name = name
        self.log = log
        self.received: bytes | None = None

    def subscription(self) -> bytes:
        return self.name.encode()

    def assign(self, partition_counts: Mapping[str, int], subscriptions: Mapping[str, bytes]) -> dict[str, Assigned]:
        self.log.append(("assign", self.name, ",".join(sorted(s.decode() for s in subscriptions.values()))))
        tps = [(t, p) for t in sorted(partition_counts) for p in range(partition_counts[t])]
        members = sorted(subscriptions)
        return {
            m: Assigned([tp for i, tp in enumerate(tps) if i % len(members) == k], subscriptions[m] + b"!")
            for k, m in enumerate(members)
        }

    def on_assignment(self, user_data: bytes) -> None:
        self.received = user_data
        self.log.append(("on_assignment", self.name, user_data.decode()))


class Listener:
    def __init__(self, name: str, log: list[tuple[str, ...]]) -> None:
        self.name = name
        self.log = log

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        self.log.append(("revoked", self.name, str(sorted(revoked))))

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        self.log.append(("assigned", self.name, str(sorted(assigned))))


def member(cluster: FakeKafkaCluster, name: str, log: list[tuple[str, ...]]) -> FakeConsumer:
    consumer = FakeConsumer(cluster, client_id=name, group_id="g", assignor=RoundRobinAssignor(name, log))
    consumer.subscribe(["t"], Listener(name, log))
    return consumer


async def test_eager_rebalance_runs_through_the_assignor() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("t", 2)
    log: list[tuple[str, ...]] = []
    a, b = member(cluster, "a", log), member(cluster, "b", log)
    await a.start()
    await cluster.wait_stable("g")
    assert a.assignment() == {T0, T1}
    log.clear()
    await b.start()
    await cluster.wait_stable("g")
    assert len(a.assignment()) == len(b.assignment()) == 1
    assert a.assignment() | b.assignment() == {T0, T1}
    kinds = [entry[0] for entry in log]
    assert sorted(log[:2]) == [("revoked", "a", str([T0, T1])), ("revoked", "b", "[]")]
    assert kinds.count("assign") == 1 and kinds.index("assign") == 2
    assert ("assign", "a", "a,b") in log, "the oldest member leads and sees every subscription"
    for name in "ab":
        mine = [e for e in log if e[1] == name and e[0] in ("on_assignment", "assigned")]
        assert [e[0] for e in mine] == ["on_assignment", "assigned"]
        assert mine[0][2] == f"{name}!"
    assert cluster.kinds("rebalance") == ["rebalance", "rebalance"]
    await b.stop()
    await cluster.wait_stable("g")
    assert a.assignment() == {T0, T1}
    await a.stop()


async def test_pauses_are_forgotten_across_a_rebalance() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("t", 2)
    log: list[tuple[str, ...]] = []
    a, b = member(cluster, "a", log), member(cluster, "b", log)
    await a.start()
    await cluster.wait_stable("g")
    a.pause(T0)
    await b.start()
    await cluster.wait_stable("g")
    await b.stop()
    await cluster.wait_stable("g")
    assert a.assignment() == {T0, T1}
    assert a.paused() == frozenset()
    await a.stop()


async def test_group_positions_come_from_committed_offsets_and_stale_members_fail_to_commit() -> None:
    cluster = FakeKafkaCluster()
    for i in range(5):
        cluster.produce("t", None, str(i), partition=0)
    log: list[tuple[str, ...]] = []
    a = member(cluster, "a", log)
    await a.start()
    await cluster.wait_stable("g")
    await a.commit({T0: 3})
    assert cluster.committed("g") == {T0: 3}
    assert [r.offset for r in (await a.getmany(timeout_ms=0))[T0]] == [3, 4]
    b = member(cluster, "b", log)
    await b.start()
    await cluster.wait_stable("g")
    cluster.kick("g", a.member_id)
    await cluster.wait_stable("g")
    with pytest.raises(clients.CommitFailedError):
        await a.commit({T0: 5})
    assert b.assignment() == {T0}
    await a.getmany(timeout_ms=0)  # notices it was kicked and rejoins
    await cluster.wait_stable("g")
    assert cluster.members("g") == [b.member_id, a.member_id]
    await a.commit({T0: 5})
    await asyncio.gather(a.stop(), b.stop())


async def test_latest_reset_starts_a_new_group_member_at_the_end() -> None:
    cluster = FakeKafkaCluster()
    for i in range(3):
        cluster.produce("t", None, str(i), partition=0)
    consumer = FakeConsumer(cluster, client_id="c", group_id="g", auto_offset_reset="latest")
    consumer.subscribe(["t"], Listener("c", []))
    await consumer.start()
    await cluster.wait_stable("g")
    assert await consumer.position(T0) == 3
    cluster.produce("t", None, "new", partition=0)
    assert [r.value for r in (await consumer.getmany(T0, timeout_ms=100))[T0]] == [b"new"]
    await consumer.stop()


async def test_commit_during_a_rebalance_is_retriable() -> None:
    cluster = FakeKafkaCluster()
    cluster.create_topic("t")
    blocker = asyncio.Event()
    log: list[tuple[str, ...]] = []

    class SlowListener(Listener):
        async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
            await blocker.wait()

    a = member(cluster, "a", log)
    await a.start()
    await cluster.wait_stable("g")
    b = FakeConsumer(cluster, client_id="b", group_id="g", assignor=RoundRobinAssignor("b", log))
    b.subscribe(["t"], SlowListener("b", log))
    await b.start()
    await asyncio.sleep(0.01)
    await a.commit({T0: 1})  # the old generation still commits while members revoke
    blocker.set()
    await cluster.wait_stable("g")
    assert cluster.generation("g") == 2
    a.generation = 1
    with pytest.raises(clients.CommitFailedError):
        await a.commit({T0: 1})
    await asyncio.gather(a.stop(), b.stop())


async def test_injected_faults() -> None:
    cluster = FakeKafkaCluster()
    cluster.produce("t", None, "x", partition=0)
    consumer = manual_consumer(cluster, reset="earliest")
    consumer.assign([T0])
    cluster.fail_fetch(T0, clients.KafkaConnectionError("fetch"))
    with pytest.raises(clients.KafkaConnectionError):
        await consumer.getmany(timeout_ms=0)
    assert T0 in await consumer.getmany(timeout_ms=0)
    grouped = FakeConsumer(cluster, client_id="x-consumer", group_id="g")
    cluster.fail_next("commit", clients.CommitFailedError(), client="other")
    cluster.fail_next("commit", clients.RebalanceInProgressError("x"), client="x-consumer")
    with pytest.raises(clients.RebalanceInProgressError):
        await grouped.commit({T0: 1})
    assert cluster.kinds("commit") == []


# -- supplier and admin --------------------------------------------------------------------------


async def test_supplier_configures_clients_from_streams_config() -> None:
    cluster = FakeKafkaCluster()
    supplier = FakeKafkaClientSupplier(cluster)
    alo = config()
    eos = config(**{"processing.guarantee": "exactly_once_v2", "main.consumer.auto.offset.reset": "latest"})
    log: list[tuple[str, ...]] = []
    main = supplier.get_main_consumer(alo, assignor=RoundRobinAssignor("a", log), thread_index=2)
    assert (main.group_id, main.read_committed, main.auto_offset_reset) == ("app", False, "earliest")
    assert main.client_id == "app-StreamThread-2-consumer"
    eos_main = supplier.get_main_consumer(eos, assignor=RoundRobinAssignor("a", log))
    assert (eos_main.read_committed, eos_main.auto_offset_reset) == (True, "latest")
    restore = supplier.get_restore_consumer(eos)
    assert (restore.group_id, restore.read_committed, restore.auto_offset_reset) == (None, True, "none")
    producer = supplier.get_producer(eos, transactional_id="app-0_0")
    assert producer.transactional_id == "app-0_0" and producer.transaction_timeout_ms == 10_000
    assert supplier.main_consumers == [main, eos_main] and supplier.restore_consumers == [restore]


async def test_admin_ensures_counts_and_deletes() -> None:
    cluster = FakeKafkaCluster()
    admin = FakeKafkaClientSupplier(cluster).get_admin(config())
    cluster.create_topic("src", 2)
    assert await admin.partition_counts(["src", "nope"]) == {"src": 2, "nope": None}
    created = await admin.ensure_topics([NewTopicSpec("app-s-changelog", 2, {"cleanup.policy": "compact"}), NewTopicSpec("src", 2)])
    assert created == ["app-s-changelog"]
    assert cluster.topic_config("app-s-changelog") == {"cleanup.policy": "compact"}
    with pytest.raises(clients.InternalTopicError):
        await admin.ensure_topics([NewTopicSpec("src", 3)])
    producer = await started_producer(cluster, "t")
    await producer.begin_transaction()
    await producer.send_offsets_to_transaction({TopicPartition("src", 0): 7}, "app")
    await producer.commit_transaction()
    assert await admin.committed_offsets("app", [TopicPartition("src", 0), TopicPartition("src", 1)]) == {
        TopicPartition("src", 0): 7,
        TopicPartition("src", 1): None,
    }
    await admin.delete_topics(["src"])
    assert "src" not in cluster.topics()
