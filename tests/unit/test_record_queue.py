"""RecordQueue: FIFO order and the KIP-28 partition time (lowest buffered timestamp, monotonic)."""

from __future__ import annotations

import random
from typing import NamedTuple

from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.tasks.record_queue import UNKNOWN, RecordQueue


class StampedRecord(NamedTuple):
    """A queued record for these tests: where it came from, its timestamp, key and value."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: object
    value: object

TP = TopicPartition("in", 0)


class Raw(NamedTuple):
    """A raw consumed record as the queue reads it: it takes the offset from here."""

    offset: int
    timestamp: int | None


def deserialize(raw: tuple[int, int | None]) -> StampedRecord | None:
    offset, timestamp = raw
    if timestamp is None:
        return None
    return StampedRecord(TP.topic, TP.partition, offset, timestamp, f"k{offset}", offset)


class Offsets:
    """Raw records with increasing offsets for given timestamps."""

    def __init__(self) -> None:
        self.next = 0

    def __call__(self, *timestamps: int | None) -> list[tuple[int, int | None]]:
        raws = [Raw(self.next + i, ts) for i, ts in enumerate(timestamps)]
        self.next += len(timestamps)
        return raws


def poll(queue: RecordQueue) -> StampedRecord:
    record = queue.poll()
    assert record is not None
    return record


def new_queue() -> tuple[RecordQueue, Offsets]:
    return RecordQueue(TP, deserialize), Offsets()


def test_empty_queue() -> None:
    queue, _ = new_queue()
    assert queue.partition_time == UNKNOWN
    assert queue.poll() is None
    assert queue.is_empty and queue.size == 0 and len(queue) == 0
    assert queue.peek_head_timestamp == UNKNOWN
    assert queue.head_record_offset is None


def test_seed_example_partition_time_is_lowest_buffered_and_monotonic() -> None:
    queue, raw = new_queue()
    assert queue.add_raw_records(raw(5, 3, 8)) == 3
    assert queue.partition_time == 3
    assert queue.peek_head_timestamp == 5 and queue.head_record_offset == 0

    assert poll(queue).timestamp == 5  # FIFO: offset order, not timestamp order
    assert queue.partition_time == 3  # 3 is still buffered
    assert poll(queue).timestamp == 3
    assert queue.partition_time == 8
    assert poll(queue).timestamp == 8
    assert queue.is_empty and queue.partition_time == 8  # keeps its last value

    queue.add_raw_records(raw(2))  # later record with a lower timestamp: no reset (rule 3b)
    assert queue.partition_time == 8
    queue.add_raw_records(raw(10))
    assert queue.partition_time == 8
    assert poll(queue).timestamp == 2
    assert queue.partition_time == 10


def test_poll_is_fifo_by_offset() -> None:
    queue, raw = new_queue()
    queue.add_raw_records(raw(9, 1, 5, 1, 7))
    assert [poll(queue).offset for _ in range(5)] == [0, 1, 2, 3, 4]
    assert queue.poll() is None


def test_equal_timestamps() -> None:
    queue, raw = new_queue()
    queue.add_raw_records(raw(4, 4, 4))
    assert queue.partition_time == 4
    queue.poll()
    queue.poll()
    assert queue.partition_time == 4
    queue.add_raw_records(raw(6))
    queue.poll()
    assert queue.partition_time == 6


def test_skipped_records_are_counted_not_buffered() -> None:
    queue, raw = new_queue()
    assert queue.add_raw_records(raw(1, None, 2, None)) == 2
    assert queue.skipped_records == 2
    assert [poll(queue).offset, poll(queue).offset] == [0, 2]


def test_all_skipped_leaves_partition_time_unknown() -> None:
    queue, raw = new_queue()
    assert queue.add_raw_records(raw(None, None)) == 0
    assert queue.partition_time == UNKNOWN and queue.skipped_records == 2


def test_clear_forgets_records_and_partition_time() -> None:
    queue, raw = new_queue()
    queue.add_raw_records(raw(3, 4))
    queue.clear()
    assert queue.is_empty and queue.partition_time == UNKNOWN
    queue.add_raw_records(raw(1))
    assert queue.partition_time == 1


def test_source_is_kept_for_the_owner() -> None:
    marker = object()
    assert RecordQueue(TP, deserialize, marker).source is marker


def test_matches_a_naive_model_on_random_operations() -> None:
    rng = random.Random(7)
    for _ in range(200):
        queue, raw = new_queue()
        buffer: list[int] = []
        model_time = UNKNOWN
        for _ in range(40):
            if rng.random() < 0.5:
                batch = [rng.randrange(0, 50) for _ in range(rng.randrange(0, 5))]
                queue.add_raw_records(raw(*batch))
                buffer.extend(batch)
            else:
                record = queue.poll()
                if buffer:
                    assert record is not None and record.timestamp == buffer.pop(0)
                else:
                    assert record is None
            if buffer:
                model_time = max(model_time, min(buffer))
            assert queue.partition_time == model_time
            assert queue.size == len(buffer)
            assert queue.peek_head_timestamp == (buffer[0] if buffer else UNKNOWN)


def test_any_record_type_with_timestamp_and_offset_can_be_queued() -> None:
    class Plain(NamedTuple):
        offset: int
        timestamp: int

    queue: RecordQueue[Plain] = RecordQueue(TP, lambda raw: Plain(*raw))
    queue.add_raw_records([Raw(0, 7), Raw(1, 4)])
    assert queue.partition_time == 4
    assert queue.poll() == Plain(0, 7)


def test_clear_resets_the_extracted_time_cell() -> None:
    """The cell the record deserializer advances (Kafka Streams' partition time) is forgotten with
    the records, as Kafka's `RecordQueue.clear` forgets its partition time."""
    queue, offsets = new_queue()
    queue.extracted_time.advance(9)
    queue.add_raw_records(offsets(5))
    queue.clear()
    assert queue.extracted_time.value == UNKNOWN
