"""Suppress buffer details that Kafka Streams' InMemoryTimeOrderedKeyValueChangeBuffer pins down:
a key's timer is not re-armed by updates, and a record's size counts its record context."""

from __future__ import annotations

from streams_core import (
    BufferConfig,
    Serdes,
    StreamsBuilder,
    Suppressed,
    TestRecord,
    TopologyTestDriver,
)

S, L = Serdes.String(), Serdes.Long()
CONFIG = {"application.id": "supp", "statestore.cache.max.bytes": 0}


def suppressed_table(suppressed: Suppressed, records: list[tuple[str, int, int]]) -> list[TestRecord[str, int]]:
    builder = StreamsBuilder()
    builder.table("t", key_serde=S, value_serde=L).suppress(suppressed).to_stream().to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("t", S, L).pipe_record_list(records)
        return driver.create_output_topic("out", S, L).read_records_to_list()


def test_until_time_limit_counts_from_a_keys_first_buffered_update() -> None:
    out = suppressed_table(Suppressed.until_time_limit(10, BufferConfig.unbounded()),
                           [("k", 1, 0), ("k", 2, 5), ("other", 3, 10)])  # fmt: skip
    # k entered the buffer at 0: at stream time 10 it is due, with its latest value and timestamp
    assert out == [TestRecord("k", 2, 5)]


def test_until_time_limit_emits_only_due_keys() -> None:
    out = suppressed_table(Suppressed.until_time_limit(10, BufferConfig.unbounded()),
                           [("a", 1, 0), ("b", 1, 4), ("a", 2, 6), ("c", 1, 10), ("d", 1, 14)])  # fmt: skip
    assert out == [TestRecord("a", 2, 6), TestRecord("b", 1, 4)]


def sized(limit: int) -> list[TestRecord[str, int]]:
    buffer = BufferConfig.max_bytes(limit).emit_early_when_full()
    return suppressed_table(Suppressed.until_time_limit(100 * 24 * 3600 * 1000, buffer),
                            [("key", 1, 0), ("dummyKey", 2, 1)])  # fmt: skip


def test_max_bytes_counts_what_kafka_counts() -> None:
    """("key", 1) from topic "t": 8 (time) + 3 (key) + 8 (new value) + 8 + 8 + 1 + 4 (timestamp, offset,
    topic, partition) = 40 bytes; ("dummyKey", 2): 45. Together 85 (KTableSuppressProcessorTest's
    suppressShouldEmitWhenOverByteCapacity, with this topic name)."""
    assert sized(85) == []
    assert sized(84) == [TestRecord("key", 1, 0)]
