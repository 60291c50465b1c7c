"""The changelog of a timestamped store (a DSL table, a windowed aggregate) is Java's: the plain
value, with the value's timestamp as the record's (`ChangeLoggingTimestampedKeyValueBytesStore`,
`ChangeLoggingTimestampedWindowBytesStore`); a restore puts the record's timestamp back in front
(`RecordConverters.rawValueToTimestampedValue`), so a Java instance and ours restore each other's."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from streams_core import (
    Materialized,
    Serdes,
    Stores,
    StreamsBuilder,
    TaskId,
    TimeWindows,
    TopologyTestDriver,
)
from streams_core.common.topic_partition import TopicPartition
from streams_core.kstream.internals.timestamped_stores import TimestampedKeyValueStore, TimestampedStoreBuilder
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp, ValueAndTimestampSerde
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.state.internals.window_key_schema import to_store_key_binary

S, L = Serdes.String(), Serdes.Long()
CONFIG = {"application.id": "tsl", "statestore.cache.max.bytes": 0}


def _counts(windowed: bool) -> Any:
    builder = StreamsBuilder()
    grouped = builder.stream("in", key_serde=S, value_serde=S).group_by_key()
    if windowed:
        grouped.windowed_by(TimeWindows.of_size_with_no_grace(100)).count(Materialized.as_("counts"))
    else:
        grouped.count(Materialized.as_("counts"))
    return builder.build()


def _run(windowed: bool) -> list[Any]:
    with TopologyTestDriver(_counts(windowed), CONFIG) as driver:
        topic = driver.create_input_topic("in", S, S)
        for key, timestamp in (("a", 10), ("b", 20), ("a", 15), ("a", 30)):
            topic.pipe_input(key, "x", timestamp=timestamp)
        return driver.create_output_topic("tsl-counts-changelog", Serdes.ByteArray(), L).read_records_to_list()


def test_a_table_logs_plain_values_with_their_timestamps_as_the_records() -> None:
    records = _run(windowed=False)
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (b"a", 1, 10), (b"b", 1, 20), (b"a", 2, 15), (b"a", 3, 30)
    ], "each value is the 8-byte long alone; the record's timestamp is the aggregate's"  # fmt: skip


def test_a_windowed_aggregate_logs_plain_values_too() -> None:
    records = _run(windowed=True)
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (to_store_key_binary(b"a", 0, 0), 1, 10),
        (to_store_key_binary(b"b", 0, 0), 1, 20),
        (to_store_key_binary(b"a", 0, 0), 2, 15),
        (to_store_key_binary(b"a", 0, 0), 3, 30),
    ]


def test_a_restore_of_that_changelog_gives_back_values_and_timestamps(tmp_path: Path) -> None:
    records = _run(windowed=False)
    store = TimestampedStoreBuilder(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), S, ValueAndTimestampSerde(L)),
        TimestampedKeyValueStore,
    ).build()
    partition = TopicPartition("tsl-counts-changelog", 0)
    manager = ProcessorStateManager(TaskId(0, 0), "tsl", tmp_path / "0_0", changelog_partitions={"counts": partition})
    with manager:
        store.init(manager.context, store)
        (changelog,) = manager.changelogs_to_restore()
        changelog.apply([_Raw(r.key, struct.pack(">q", r.value), r.timestamp) for r in records])
        assert store.timestamped.get("a") == ValueAndTimestamp(3, 30)
        assert store.timestamped.get("b") == ValueAndTimestamp(1, 20)
        store.close()


class _Raw:
    def __init__(self, key: bytes, value: bytes | None, timestamp: int) -> None:
        self.key, self.value, self.timestamp = key, value, timestamp


class _Collector:
    """A record collector that keeps what is sent; `keeps_store_bytes` as the Spark task stage's."""

    def __init__(self, keeps_store_bytes: bool) -> None:
        self.keeps_store_bytes = keeps_store_bytes
        self.sent: list[tuple[bytes, bytes | None, int]] = []

    def send(self, topic: str, key: bytes, value: bytes | None, timestamp: int, headers: Any, partition: int) -> None:
        self.sent.append((key, value, timestamp))


class _Context:
    def __init__(self, collector: _Collector, tmp_path: Path) -> None:
        self.application_id, self.task_id, self.state_dir = "tsl", TaskId(0, 0), tmp_path
        self.record_collector, self.timestamp = collector, 99

    def register(self, store: Any, restore_callback: Any = None) -> None:
        pass


def test_each_init_chooses_how_to_log_for_its_own_collector(tmp_path: Path) -> None:
    """A store closed and re-initialised under a collector that keeps the store's bytes logs them as they are,
    and back: the choice follows the latest `init`, not the first."""
    from streams_core.state.internals.change_logging_stores import ChangeLoggingKeyValueBytesStore
    from streams_core.state.internals.in_memory_key_value_store import InMemoryKeyValueStore

    store = ChangeLoggingKeyValueBytesStore(InMemoryKeyValueStore("counts"), timestamped=True)
    stamped = struct.pack(">q", 7) + b"value"
    for keeps_store_bytes, expected in ((False, (b"k", b"value", 7)), (True, (b"k", stamped, 99)), (False, (b"k", b"value", 7))):
        collector = _Collector(keeps_store_bytes)
        store.init(_Context(collector, tmp_path), store)  # type: ignore[arg-type]
        store.put(b"k", stamped)
        assert collector.sent == [expected], keeps_store_bytes
        store.close()
