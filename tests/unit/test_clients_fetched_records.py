"""The consumer port's fetched records: aiokafka's own record parsing, with a `FetchedRecord` built in
place of its `ConsumerRecord`, field for field, and only for results without deserializers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from aiokafka.consumer.fetcher import PartitionRecords
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import ConsumerRecord, TopicPartition

from streams_core.clients.aiokafka_supplier import FetchedRecord, _build_fetched_records

FIELDS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers")
TP = TopicPartition("words", 3)


def fetched_bytes() -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=1_000, key=b"a", value=b"one", headers=[])
    builder.append(1, timestamp=1_001, key=None, value=b"two", headers=[("origin", b"x"), ("hop", b"")])
    builder.append(2, timestamp=999, key=b"c", value=None, headers=[])
    return bytes(builder.build())


def partition_records(value_deserializer: Any = None) -> PartitionRecords:
    return PartitionRecords(TP, MemoryRecords(fetched_bytes()), [], 0, None, value_deserializer, False, 0)


def test_fetched_records_carry_every_field_aiokafka_gives() -> None:
    expected = list(partition_records())
    assert all(type(r) is ConsumerRecord for r in expected)
    records = partition_records()
    _build_fetched_records(SimpleNamespace(_fetcher=SimpleNamespace(_records={TP: SimpleNamespace(_partition_records=records)})))
    got = list(records)
    assert all(type(r) is FetchedRecord for r in got)
    assert [tuple(getattr(r, f) for f in FIELDS) for r in got] == [tuple(getattr(r, f) for f in FIELDS) for r in expected]
    assert got[1].headers == (("origin", b"x"), ("hop", b"")) and got[0].headers == ()
    assert records.next_fetch_offset == 3, "aiokafka still moves the position past what it returned"


def test_results_with_a_deserializer_keep_aiokafkas_records() -> None:
    records = partition_records(value_deserializer=lambda v: v and v.upper())
    _build_fetched_records(SimpleNamespace(_fetcher=SimpleNamespace(_records={TP: SimpleNamespace(_partition_records=records)})))
    got = list(records)
    assert all(type(r) is ConsumerRecord for r in got) and got[0].value == b"ONE"


def test_a_consumer_before_start_has_nothing_to_change() -> None:
    _build_fetched_records(SimpleNamespace())


class _Aiokafka:
    """What the port reads of an AIOKafkaConsumer: its fetcher's wait, and getmany answering `answer`."""

    def __init__(self) -> None:
        self._fetcher = SimpleNamespace(_fetch_max_wait_ms=500, _records={})
        self.answer: dict[Any, list[Any]] = {}
        self.waits: list[int] = []

    async def getmany(self, *partitions: Any, timeout_ms: int = 0, max_records: int | None = None) -> dict[Any, list[Any]]:
        self.waits.append(self._fetcher._fetch_max_wait_ms)
        return self.answer


async def test_a_busy_main_consumer_fetches_without_long_broker_waits() -> None:
    """Fetches built while the thread has records to process wait 20 ms at most at the broker, so a
    fetch of partitions at their end does not hold back the ones being drained; idle, the full wait."""
    from streams_core.clients.aiokafka_supplier import BUSY_FETCH_MAX_WAIT_MS, AioKafkaConsumer

    inner = _Aiokafka()
    port = AioKafkaConsumer(inner, busy_fetch_wait_ms=BUSY_FETCH_MAX_WAIT_MS)  # type: ignore[arg-type]
    await port.getmany(timeout_ms=0)
    assert inner.waits == [20], "a caller that does not wait has records to process"
    await port.getmany(timeout_ms=100)
    assert inner._fetcher._fetch_max_wait_ms == 500, "it waited and got nothing: idle, fetch.max.wait.ms again"
    inner.answer = {TP: [object()]}
    await port.getmany(timeout_ms=100)
    assert inner._fetcher._fetch_max_wait_ms == 20, "records came: busy again"
    restore = _Aiokafka()
    await AioKafkaConsumer(restore).getmany(timeout_ms=0)  # type: ignore[arg-type]
    assert restore._fetcher._fetch_max_wait_ms == 500, "other consumers keep their setting"
