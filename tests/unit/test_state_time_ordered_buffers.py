"""The DSL's time-ordered buffers as stores: Kafka's changelog layout, flush of dirty keys, restore.

The suppression buffer (`InMemoryTimeOrderedKeyValueChangeBuffer`) restores Java's v3 changelog
records byte for byte (TimeOrderedKeyValueBufferTest's data, captured from Java), and what it
logs restores to the same buffer; the stream-table join buffer logs Java's time-first keys.
A close without a flush loses only what was never flushed: the changelog is the store.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import Serdes
from streams_core.common.change import Change
from streams_core.common.task_id import TaskId
from streams_core.processor.processor import Record
from streams_core.state.internals.buffer_value import CHANGELOG_HEADERS, BufferValue, RecordContext
from streams_core.state.internals.in_memory_time_ordered_key_value_change_buffer import (
    InMemoryTimeOrderedKeyValueChangeBuffer,
)
from streams_core.state.internals.time_ordered_key_value_buffer import TimeOrderedKeyValueBuffer

S = Serdes.String()
TOPIC = "app-buf-changelog"
LogRecord = tuple[str, bytes, bytes | None, int, Any, int]


class Context:
    """What a store's init uses of its task: ids, default serdes, the record collector and register."""

    application_id = "app"
    task_id = TaskId(0, 3)
    key_serde = S
    value_serde = S

    def __init__(self) -> None:
        self.sent: list[LogRecord] = []
        self.restore: Any = None
        self.record_collector = self

    def send(self, topic: str, key: bytes, value: bytes | None, timestamp: int, headers: Any, partition: int) -> None:
        self.sent.append((topic, key, value, timestamp, headers, partition))

    def register(self, store: Any, restore_callback: Any) -> None:
        self.restore = restore_callback

    def changelog(self) -> list[tuple[bytes, bytes | None]]:
        return [(key, value) for _, key, value, *_ in self.sent]


def suppression_buffer(context: Context, count_bytes: bool = True) -> InMemoryTimeOrderedKeyValueChangeBuffer[str, str]:
    buffer: InMemoryTimeOrderedKeyValueChangeBuffer[str, str] = InMemoryTimeOrderedKeyValueChangeBuffer(
        "buf", None, None, True, count_bytes
    )
    buffer.init(context, buffer)  # type: ignore[arg-type]
    return buffer


def drain(buffer: InMemoryTimeOrderedKeyValueChangeBuffer[str, str]) -> list[tuple[str, Change[str], int, str | None]]:
    out = []
    while (entry := buffer.evict_oldest()) is not None:
        out.append((entry.record.key, entry.record.value, entry.record.timestamp, entry.prior))
    return out


# Java 2.4-3.x v3 values (TimeOrderedKeyValueBufferTest.shouldRestoreV3Format): record context
# (timestamp, offset 0, topic "topic", partition 0, no headers), prior, old, new, buffer time.
JAVA_V3 = [
    (b"todelete", "0000000000000000000000000000000000000005746F70696300000000FFFFFFFFFFFFFFFFFFFFFFFF00000006646F6F6D65640000000000000000"),
    (b"asdf", "0000000000000001000000000000000000000005746F70696300000000FFFFFFFFFFFFFFFFFFFFFFFF00000004717765720000000000000002"),
    (b"zxcv", "0000000000000002000000000000000000000005746F70696300000000FFFFFFFF0000000870726576696F75730000000749474E4F52454400000005336F34696D0000000000000001"),
    (b"zxcv", "0000000000000003000000000000000000000005746F70696300000000FFFFFFFF0000000870726576696F757300000005336F34696D000000046E6578740000000000000001"),
]  # fmt: skip


def test_restores_kafkas_v3_changelog_records() -> None:
    buffer = suppression_buffer(Context())
    buffer.restore_batch([(key, bytes.fromhex(value)) for key, value in JAVA_V3])
    assert (buffer.num_records, buffer.min_timestamp, buffer.buffer_size) == (3, 0, 142)  # Java's figures
    buffer.restore_batch([(b"todelete", None)])
    assert (buffer.num_records, buffer.min_timestamp, buffer.buffer_size) == (2, 1, 95)
    zxcv = buffer.buffered("zxcv")
    assert zxcv is not None and zxcv.prior == "previous"
    assert zxcv.context == RecordContext(3, 0, "topic", 0, ())
    assert buffer.buffered("todelete") is None
    assert buffer.restored_stream_time == 3, "the largest record timestamp restored"
    # in buffer time order; the record's own timestamp, not the buffer time
    assert drain(buffer) == [("zxcv", Change("next", "3o4im"), 3, "previous"), ("asdf", Change("qwer", None), 1, None)]


def test_buffer_value_writes_what_it_reads() -> None:
    for _, value in JAVA_V3:
        data = bytes.fromhex(value)
        parsed = BufferValue.deserialize(data)
        # Java's old layout has header count -1; we write 0 for no headers, the rest is the same
        assert parsed.serialize() == data.replace(bytes.fromhex("FFFFFFFF"), bytes.fromhex("00000000"), 1)
    value = BufferValue(RecordContext(7, 9, "in", 2, (("h", b"1"), ("n", None))), b"p", b"p", None, 11)  # type: ignore[arg-type]
    assert BufferValue.deserialize(value.serialize()) == value


def put(buffer: InMemoryTimeOrderedKeyValueChangeBuffer[str, str], time: int, key: str, new: str | None,
        old: str | None, timestamp: int) -> None:  # fmt: skip
    buffer.put(time, Record(key, Change(new, old), timestamp), RecordContext(timestamp, timestamp * 10, "in", 3, ()))


def test_flush_logs_each_dirty_key_once_and_a_tombstone_only_for_logged_keys() -> None:
    context = Context()
    buffer = suppression_buffer(context)
    put(buffer, 2, "asdf", "a1", None, 0)
    put(buffer, 2, "asdf", "a2", "a1", 1)
    put(buffer, 1, "zxcv", "z", "prior", 2)
    put(buffer, 0, "deleteme", "d", None, 3)
    assert context.sent == [], "nothing is logged before a flush"
    assert buffer.evict_oldest() is not None  # deleteme: came and went between two flushes
    buffer.flush()
    # one record per key (its latest state), at the record's timestamp, with Java's header v=3
    assert sorted((t, k, ts, h, p) for t, k, _, ts, h, p in context.sent) == [
        (TOPIC, b"asdf", 1, CHANGELOG_HEADERS, 3),
        (TOPIC, b"zxcv", 2, CHANGELOG_HEADERS, 3),
    ]
    asdf = BufferValue.deserialize(next(v for _, k, v, *_ in context.sent if k == b"asdf") or b"")
    assert asdf == BufferValue(RecordContext(1, 10, "in", 3, ()), None, b"a1", b"a2", 2)
    context.sent.clear()
    buffer.flush()
    assert context.sent == [], "a flush with nothing dirty logs nothing"
    assert buffer.evict_oldest() is not None  # zxcv
    buffer.flush()
    assert [(k, v) for _, k, v, *_ in context.sent] == [(b"zxcv", None)]


def test_a_close_without_flush_loses_only_the_unflushed_changes() -> None:
    context = Context()
    buffer = suppression_buffer(context)
    put(buffer, 5, "a", "1", None, 5)
    put(buffer, 7, "b", "1", "0", 7)
    buffer.flush()
    put(buffer, 5, "a", "2", "1", 8)  # not flushed: lost with the close, as with a crash
    put(buffer, 9, "c", "1", None, 9)
    buffer.close()
    restored = suppression_buffer(Context())
    restored.restore_batch(context.changelog())
    assert drain(restored) == [("a", Change("1", None), 5, None), ("b", Change("1", "0"), 7, "0")]
    assert restored.restored_stream_time == 7


def test_a_restored_buffer_logs_tombstones_for_restored_keys() -> None:
    context = Context()
    buffer = suppression_buffer(context)
    buffer.restore_batch([(key, bytes.fromhex(value)) for key, value in JAVA_V3])
    drain(buffer)
    buffer.flush()
    assert sorted((k, v) for _, k, v, *_ in context.sent) == [(b"asdf", None), (b"todelete", None), (b"zxcv", None)]


# -- the stream-table join buffer -----------------------------------------------------------------


def join_buffer(context: Context) -> TimeOrderedKeyValueBuffer[str, str]:
    buffer: TimeOrderedKeyValueBuffer[str, str] = TimeOrderedKeyValueBuffer("buf", None, None, True)
    buffer.init(context, buffer)  # type: ignore[arg-type]
    return buffer


def join_put(buffer: TimeOrderedKeyValueBuffer[str, str], key: str, value: str, timestamp: int) -> None:
    buffer.put(Record(key, value, timestamp, (("h", b"x"),)), RecordContext(timestamp, 100 + timestamp, "in", 3, (("h", b"x"),)))


def test_join_buffer_logs_kafkas_time_first_keys_and_buffer_values() -> None:
    context = Context()
    buffer = join_buffer(context)
    join_put(buffer, "k", "v1", 10)
    buffer.flush()
    ((topic, key, value, timestamp, headers, partition),) = context.sent
    assert (topic, partition, timestamp, headers) == (TOPIC, 3, 10, ())
    assert key == b"\x00" + (10).to_bytes(8, "big") + b"k" + (1).to_bytes(4, "big")
    assert BufferValue.deserialize(value or b"") == BufferValue(
        RecordContext(10, 110, "in", 3, (("h", b"x"),)), None, None, b"v1", 0
    )


def test_join_buffer_restores_what_was_flushed_in_order_with_its_stream_time() -> None:
    context = Context()
    buffer = join_buffer(context)
    for key, value, timestamp in [("b", "1", 20), ("a", "2", 20), ("a", "3", 5), ("c", "4", 30)]:
        join_put(buffer, key, value, timestamp)
    buffer.flush()
    assert [r.value for r in buffer.evict_until(20)] == ["3", "2", "1"], "by time, then key bytes, then arrival"
    join_put(buffer, "d", "5", 40)  # never flushed
    buffer.flush()  # the three evictions' tombstones
    join_put(buffer, "e", "6", 50)
    buffer.close()
    restored = join_buffer(Context())
    restored.restore_batch(context.changelog())
    assert restored.num_records == 2
    assert restored.restored_stream_time == 40
    join_put(restored, "c", "7", 30)  # a new record of an existing (time, key) gets a new sequence number
    assert [(r.key, r.value, r.timestamp, r.headers) for r in restored.evict_until(100)] == [
        ("c", "4", 30, (("h", b"x"),)),
        ("c", "7", 30, (("h", b"x"),)),
        ("d", "5", 40, (("h", b"x"),)),
    ]


def test_a_store_outside_a_task_logs_nothing() -> None:
    context = Context()
    context.record_collector = None  # type: ignore[assignment]
    buffer = suppression_buffer(context)
    put(buffer, 1, "a", "1", None, 1)
    buffer.flush()
    assert context.sent == []


@pytest.mark.parametrize("make", [suppression_buffer, join_buffer])
def test_restoring_a_closed_buffer_fails(make: Any) -> None:
    buffer = make(Context())
    buffer.close()
    with pytest.raises(Exception, match="not open"):
        buffer.restore_batch([])
