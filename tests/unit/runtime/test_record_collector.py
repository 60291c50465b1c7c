"""RecordCollectorImpl over FakeProducer: partitioning, batching, delivery offsets, the production
handler, and transactions (offsets committed with the output, aborted on a dirty close)."""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import clients
from streams_core.common.partitioner import default_partition
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.tasks.record_collector_impl import ProductionError, RecordCollectorImpl
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeProducer

IN0 = TopicPartition("in", 0)


async def collector_on(
    cluster: FakeKafkaCluster, *, transactional_id: str | None = None, handler: str = "fail", batch_size: int = 16_384
) -> RecordCollectorImpl:
    producer = FakeProducer(cluster, client_id="p", transactional_id=transactional_id, batch_size=batch_size)
    await producer.start()
    return RecordCollectorImpl(producer, production_handler=handler, transactional=transactional_id is not None)


def new_cluster(partitions: int = 3) -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    cluster.create_topic("out", partitions)
    return cluster


async def test_keyed_records_go_by_murmur2_and_keyless_round_robin() -> None:
    cluster = new_cluster()
    collector = await collector_on(cluster)
    for i in range(6):
        collector.send("out", b"key-%d" % i, b"v", i, (), None)
    for i in range(3):
        collector.send("out", None, b"n%d" % i, 10 + i, (), None)
    collector.send("out", b"x", b"explicit", 20, (("h", b"1"),), 2)
    await collector.flush()
    records = cluster.records("out")
    keyed = [r for r in records if r.key and r.key.startswith(b"key-")]
    assert all(r.partition == default_partition(r.key or b"", 3) for r in keyed)
    assert sorted(r.partition for r in records if r.key is None) == [0, 1, 2]
    (explicit,) = [r for r in records if r.value == b"explicit"]
    assert (explicit.partition, explicit.headers, explicit.timestamp) == (2, (("h", b"1"),), 20)
    assert collector.sent_records == 10


async def test_send_only_queues_until_send_pending() -> None:
    cluster = new_cluster(1)
    collector = await collector_on(cluster)
    collector.send("out", b"k", b"v", 1, (), None)
    assert collector.pending == 1 and cluster.records("out") == []
    await collector.send_pending()
    assert collector.pending == 0
    await collector.flush()
    assert len(cluster.records("out")) == 1


async def test_offsets_note_the_last_delivered_record_per_partition() -> None:
    cluster = new_cluster(2)
    collector = await collector_on(cluster, batch_size=64)
    for i in range(7):
        collector.send("out", None, b"%d" % i, i, (), 1)
    collector.send("out", None, b"p0", 0, (), 0)
    await collector.flush()
    assert len([e for e in cluster.events_of("produce") if e["partition"] == 1]) > 1, "several batches"
    assert collector.offsets == {TopicPartition("out", 1): 6, TopicPartition("out", 0): 0}
    assert [r.value for r in cluster.records("out", partition=1)] == [b"%d" % i for i in range(7)]


async def test_delivery_failure_with_the_fail_handler_raises_at_flush() -> None:
    cluster = new_cluster(1)
    collector = await collector_on(cluster)
    cluster.fail_delivery("out")
    collector.send("out", b"k", b"v", 1, (), None)
    with pytest.raises(ProductionError):
        await collector.flush()
    collector.send("out", b"k", b"v2", 1, (), None)
    await collector.flush()
    assert [r.value for r in cluster.records("out")] == [b"v2"]


async def test_delivery_failure_with_the_continue_handler_is_dropped_and_counted() -> None:
    cluster = new_cluster(1)
    collector = await collector_on(cluster, handler="continue")
    cluster.fail_delivery("out")
    collector.send("out", b"k", b"lost", 1, (), None)
    collector.send("out", b"k", b"lost-too", 1, (), None)
    await collector.flush()
    collector.send("out", b"k", b"kept", 1, (), None)
    await collector.flush()
    assert collector.dropped_records == 2, "the whole failed batch"
    assert [r.value for r in cluster.records("out")] == [b"kept"]


async def test_unknown_topic_is_a_production_error() -> None:
    collector = await collector_on(new_cluster())
    collector.send("nowhere", b"k", b"v", 1, (), None)
    with pytest.raises(ProductionError):
        await collector.send_pending()


async def test_transaction_commits_output_and_offsets_together() -> None:
    cluster = new_cluster(1)
    collector = await collector_on(cluster, transactional_id="app-0_0")
    collector.send("out", b"k", b"v", 1, (), None)
    await collector.send_pending()
    assert cluster.kinds("txn_begin") == ["txn_begin"], "the first send opens the transaction"
    await collector.commit_transaction({IN0: 5}, "app")
    assert cluster.committed("app") == {IN0: 5}
    assert [r.value for r in cluster.records("out")] == [b"v"]
    assert cluster.kinds("txn_begin", "produce", "producer_flush", "txn_offsets", "txn_commit") == [
        "txn_begin", "produce", "producer_flush", "txn_offsets", "txn_commit",
    ]


async def test_commit_transaction_with_nothing_to_commit_does_nothing() -> None:
    cluster = new_cluster(1)
    collector = await collector_on(cluster, transactional_id="app-0_0")
    await collector.commit_transaction({}, "app")
    assert cluster.kinds("txn_begin", "txn_commit") == []


async def test_dirty_close_aborts_the_open_transaction() -> None:
    cluster = new_cluster(1)
    collector = await collector_on(cluster, transactional_id="app-0_0")
    collector.send("out", b"k", b"v", 1, (), None)
    await collector.send_pending()
    await collector.close(clean=False)
    assert cluster.kinds("txn_abort") == ["txn_abort"]
    assert cluster.records("out") == [] and len(cluster.records("out", committed_only=False)) == 1
    assert isinstance(collector.producer, FakeProducer) and collector.producer.stopped


@pytest.mark.parametrize("handler", ["fail", "continue"])
async def test_a_fenced_delivery_is_a_task_migration_whatever_the_production_handler(handler: str) -> None:
    """A newer producer took the transactional id (the task's new owner, after this instance was
    thought dead): the send fails with ProducerFenced, which must reach the thread as such (it then
    closes its tasks dirty and rejoins, Kafka Streams' TaskMigratedException), not as a fatal
    ProductionError, and never be dropped by the `continue` handler. Seen under chaos: exactly-once
    instances died (exit 4) after their tasks had moved while they were slow."""
    cluster = new_cluster(1)
    collector = await collector_on(cluster, transactional_id="app-0_0", handler=handler)
    collector.send("out", b"k", b"v", 1, (), None)
    await collector.send_pending()
    newer = FakeProducer(cluster, client_id="newer", transactional_id="app-0_0")
    await newer.start()  # fences the collector's producer; its open transaction is aborted
    collector.send("out", b"k", b"v2", 2, (), None)
    with pytest.raises(clients.ProducerFenced):
        await collector.flush()
    assert collector.dropped_records == 0


def test_the_aiokafka_port_fills_aiokafka_batches_in_order_and_counts_them() -> None:
    from aiokafka.producer.message_accumulator import BatchBuilder
    from aiokafka.record.default_records import DefaultRecordBatch

    from streams_core.clients.aiokafka_supplier import AioKafkaProducer

    class Stub:
        def create_batch(self) -> BatchBuilder:
            return BatchBuilder(1024, 0)

    port = AioKafkaProducer(Stub())
    records = [("out", b"k%d" % i, b"v" * (i % 7), 100 + i, (("h", b"%d" % i),) if i % 3 else (), None) for i in range(200)]
    written: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
    index = batches = 0
    while index < len(records):
        batches += 1
        batch: Any = port.create_batch()
        filled = port.fill_batch(batch, records, index)
        assert filled > index and batch.record_count() == filled - index
        assert batch.closed() == (filled < len(records)), "a full batch is closed, the last one left open"
        written += [(r.timestamp, r.key, r.value, list(r.headers)) for r in DefaultRecordBatch(batch._build())]
        index = filled
    assert written == [(t, k, v, list(h)) for _, k, v, t, h, _ in records]
    assert batches > 3, "1 kB batches: the records span several"


class _OrderSpy(FakeProducer):
    """Notes the partition of every batch handed over."""

    def __init__(self, cluster: FakeKafkaCluster) -> None:
        super().__init__(cluster, client_id="p", batch_size=300)
        self.order: list[int] = []

    async def send_batch(self, batch: Any, topic: str, *, partition: int) -> Any:
        self.order.append(partition)
        return await super().send_batch(batch, topic, partition=partition)


async def test_batches_of_the_partitions_are_handed_over_in_turn() -> None:
    """aiokafka queues one batch per partition: a partition's second batch goes after the first of every other."""
    cluster = new_cluster(2)
    producer = _OrderSpy(cluster)
    await producer.start()
    collector = RecordCollectorImpl(producer)
    for partition in (0, 1):
        for i in range(5):  # two records a batch of 300 bytes: three batches each
            collector.send("out", b"k", b"%d" % i + b"x" * 99, i, (), partition)
    await collector.flush()
    assert producer.order == [0, 1, 0, 1, 0, 1]
    assert [[r.value[:1] for r in cluster.records("out") if r.partition == p] for p in (0, 1)] == [[b"0", b"1", b"2", b"3", b"4"]] * 2
