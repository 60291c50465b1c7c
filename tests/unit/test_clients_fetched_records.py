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
