"""FakeProducer: the `Producer` port over a `FakeKafkaCluster` (batches, delivery futures, transactions).

Batches are delivered on the next loop iteration and `flush` waits for them; a transactional
producer's records are invisible to read_committed consumers until its transaction commits, and a
newer producer with the same transactional id fences it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence

from streams_core import clients
from streams_core.clients.ports import (
    OutgoingRecord,
    ProducerBatch,
    RecordMetadata,
)
from streams_core.common.offset_and_metadata import OffsetAndMetadata
from streams_core.common.topic_partition import TopicPartition
from streams_core.testing.fake_kafka_cluster import (
    FakeKafkaCluster,
    FakeRecordMetadata,
    FakeTransaction,
    Headers,
    as_committed,
)

__all__ = ["FakeBatch", "FakeProducer"]

log = logging.getLogger(__name__)


class FakeBatch:
    """The `ProducerBatch` port: rows for one partition, full at `max_bytes` (the first row always fits)."""

    __slots__ = ("_closed", "_max_bytes", "_size", "rows")

    def __init__(self, max_bytes: int) -> None:
        self.rows: list[tuple[int, bytes | None, bytes | None, Headers]] = []
        self._size = 0
        self._max_bytes = max_bytes
        self._closed = False

    def append(
        self, *, timestamp: int | None, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]
    ) -> object | None:
        if self._closed:
            raise clients.IllegalStateError("append to a closed batch")
        size = 20 + len(key or b"") + len(value or b"") + sum(len(k) + len(v) for k, v in headers)
        if self.rows and self._size + size > self._max_bytes:
            return None
        ts = timestamp if timestamp is not None else time.time_ns() // 1_000_000
        self.rows.append((ts, key, value, tuple(headers)))
        self._size += size
        return len(self.rows)

    def close(self) -> None:
        self._closed = True

    def record_count(self) -> int:
        return len(self.rows)


class FakeProducer:
    """The `Producer` port; transactional with a `transactional_id` (a newer instance fences it)."""

    __slots__ = (
        "_epoch", "_in_flight", "_txn", "_txn_error", "batch_size", "client_id", "cluster", "started", "stopped",
        "transaction_timeout_ms", "transactional_id",
    )

    def __init__(
        self,
        cluster: FakeKafkaCluster,
        *,
        client_id: str,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        batch_size: int = 16_384,
    ) -> None:
        self.cluster = cluster
        self.client_id = client_id
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.batch_size = batch_size
        self._epoch = -1
        self._txn: FakeTransaction | None = None
        self._txn_error: BaseException | None = None
        self._in_flight: set[asyncio.Future[RecordMetadata]] = set()
        self.started = False
        self.stopped = False

    def __repr__(self) -> str:
        return f"FakeProducer({self.transactional_id or self.client_id})"

    @property
    def in_transaction(self) -> bool:
        return self._txn is not None

    @property
    def fenced(self) -> bool:
        return self.transactional_id is not None and self.cluster._epoch(self.transactional_id) != self._epoch

    async def start(self) -> None:
        self._raise_fault("producer_start")
        if self.transactional_id is not None:
            self._epoch = self.cluster._init_producer(self.transactional_id)
        self.started = True

    async def stop(self) -> None:
        """Deliver what is in flight, then close; an open transaction stays open (the broker times it out)."""
        if self.stopped:
            return
        await self._drain()
        self.stopped = True

    def create_batch(self) -> ProducerBatch:
        return FakeBatch(self.batch_size)

    def fill_batch(self, batch: ProducerBatch, records: Sequence[OutgoingRecord], start: int) -> int:
        for index in range(start, len(records)):
            _, key, value, timestamp, headers, _ = records[index]
            if batch.append(timestamp=timestamp, key=key, value=value, headers=list(headers)) is None:
                batch.close()
                return index
        return len(records)

    async def send_batch(self, batch: ProducerBatch, topic: str, *, partition: int) -> asyncio.Future[RecordMetadata]:
        if self.stopped or not self.started:
            raise clients.IllegalStateError(f"{self!r} is not running")
        self._raise_fault("send")
        tp = TopicPartition(topic, partition)
        if not self.cluster.has_partition(tp):
            raise clients.KafkaTimeoutError(f"unknown topic or partition {tp}")
        if self.transactional_id is not None and self._txn is None and not self.fenced:
            raise clients.IllegalStateError("Can't send messages while not in transaction")
        assert isinstance(batch, FakeBatch)
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        self._in_flight.add(future)
        future.add_done_callback(self._in_flight.discard)
        asyncio.get_running_loop().call_soon(self._deliver, batch, tp, future, self._txn)
        return future

    def _deliver(
        self, batch: FakeBatch, tp: TopicPartition, future: asyncio.Future[RecordMetadata], txn: FakeTransaction | None
    ) -> None:
        if future.done():
            return
        error: BaseException | None = None
        if self.fenced or (txn is not None and txn.state != "open"):
            error = clients.ProducerFenced()
        else:
            error = self.cluster._delivery_fault(tp)
        if error is not None:
            if txn is not None:
                self._txn_error = self._txn_error or error
            future.set_exception(error)
            return
        records = self.cluster._append(tp, batch.rows, txn, self.client_id)
        future.set_result(FakeRecordMetadata(tp.topic, tp.partition, records[0].offset))

    async def _drain(self) -> None:
        if self._in_flight:
            await asyncio.gather(*list(self._in_flight), return_exceptions=True)

    async def flush(self) -> None:
        """Wait until every batch sent so far is delivered (or failed)."""
        self._raise_fault("flush")
        await self._drain()
        self.cluster.log_event("producer_flush", self.client_id, transactional_id=self.transactional_id)

    async def partitions_for(self, topic: str) -> set[int]:
        self._raise_fault("partitions_for")
        count = self.cluster.partition_count(topic)
        return set(range(count)) if count else set()

    def _check_transactional(self, *, in_transaction: bool | None) -> FakeTransaction | None:
        if self.transactional_id is None:
            raise clients.IllegalStateError("not a transactional producer")
        if self.fenced:
            raise clients.ProducerFenced()
        if in_transaction is True and self._txn is None:
            raise clients.IllegalStateError("no transaction is open")
        if in_transaction is False and self._txn is not None:
            raise clients.IllegalStateError("a transaction is already open")
        return self._txn

    async def begin_transaction(self) -> None:
        self._check_transactional(in_transaction=False)
        self._raise_fault("begin_transaction")
        assert self.transactional_id is not None
        self._txn = self.cluster._begin(self.transactional_id, self.transaction_timeout_ms)
        self._txn_error = None

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int], group_id: str
    ) -> None:
        txn = self._check_transactional(in_transaction=True)
        self._raise_fault("send_offsets_to_transaction")
        assert txn is not None
        committed = as_committed(offsets)
        txn.offsets.setdefault(group_id, {}).update(committed)
        self.cluster.log_event(
            "txn_offsets", self.client_id, transactional_id=self.transactional_id, group=group_id,
            offsets={tp: c.offset for tp, c in committed.items()},
        )  # fmt: skip

    async def commit_transaction(self) -> None:
        """Deliver the transaction's batches, then write the commit markers and commit its offsets."""
        txn = self._check_transactional(in_transaction=True)
        self._raise_fault("commit_transaction")
        await self._drain()
        assert txn is not None
        if self.fenced or txn.state != "open":
            raise clients.ProducerFenced()
        if self._txn_error is not None:
            raise self._txn_error
        self.cluster._finish(txn, commit=True, client=self.client_id)
        self._txn = None

    async def abort_transaction(self) -> None:
        txn = self._check_transactional(in_transaction=True)
        self._raise_fault("abort_transaction")
        await self._drain()
        assert txn is not None
        self.cluster._finish(txn, commit=False, client=self.client_id)
        self._txn = None
        self._txn_error = None

    def _raise_fault(self, operation: str) -> None:
        fault = self.cluster._fault(operation, self.client_id, self.transactional_id or "")
        if fault is not None:
            raise fault
