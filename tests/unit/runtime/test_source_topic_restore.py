"""A store whose changelog is a source topic (a read-only store; a table's topic reused by
`topology.optimization`): the state manager marks the partition, the reader stops at the group's
committed offset, and plain values get the record timestamps a store of `ValueAndTimestamp`s keeps
(Java's StoreChangelogReader and `RecordConverters.rawValueToTimestampedValue`)."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from streams_core import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.restore.store_changelog_reader import StoreChangelogReader
from streams_core.state.internals.processor_state_manager import ChangelogPartition, ProcessorStateManager
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeConsumer

SOURCE = TopicPartition("table-topic", 0)
LOGGED = TopicPartition("app-logged-changelog", 0)


class Sink:
    def __init__(self) -> None:
        self.applied: list[tuple[bytes, bytes | None]] = []

    def __call__(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        self.applied.extend(records)


class Store:
    """The little a state manager asks of a registered store."""

    def __init__(self, name: str, timestamped: bool) -> None:
        self.name = name
        self.persistent = True
        self.timestamped_values = timestamped

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def ts(timestamp: int) -> bytes:
    return struct.pack(">q", timestamp)


def source_topic(*records: tuple[str | None, str | None, int]) -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    cluster.create_topic(SOURCE.topic)
    for key, value, timestamp in records:
        cluster.produce(SOURCE.topic, key, value, timestamp=timestamp, partition=0)
    return cluster


def reader(cluster: FakeKafkaCluster) -> StoreChangelogReader:
    return StoreChangelogReader(FakeConsumer(cluster, client_id="restore", group_id=None, auto_offset_reset="none"))


async def test_restore_stops_at_the_committed_offset_and_adds_timestamps() -> None:
    cluster = source_topic(("a", "1", 10), ("b", None, 20), (None, "x", 30), ("c", "3", 40), ("d", "4", 50))
    sink = Sink()
    partition = ChangelogPartition("store", SOURCE, None, sink, None, True, True, 4)
    result = await reader(cluster).restore("0_0", [partition])
    assert sink.applied == [(b"a", ts(10) + b"1"), (b"b", None), (b"c", ts(40) + b"3")]
    assert result.end_offsets == {SOURCE: 4}, "the store holds the topic up to the committed offset, not its end"


async def test_nothing_committed_restores_nothing_and_a_plain_store_gets_plain_values() -> None:
    cluster = source_topic(("a", "1", 10), ("b", "2", 20))
    nothing, plain = Sink(), Sink()
    assert (await reader(cluster).restore("0_0", [ChangelogPartition("s", SOURCE, None, nothing, None, True, True, 0)])).total == 0
    assert nothing.applied == []
    await reader(cluster).restore("0_0", [ChangelogPartition("s", SOURCE, 1, plain, None, True, False, 2)])
    assert plain.applied == [(b"b", b"2")]


def test_state_manager_marks_source_topic_changelogs_and_limits_only_them(tmp_path: Path) -> None:
    manager = ProcessorStateManager(
        TaskId(0, 0), "app", tmp_path / "0_0", changelog_partitions={"table": SOURCE, "logged": LOGGED}
    )
    with manager:
        store: Any
        for store in (Store("table", True), Store("logged", True)):
            manager.register(store, Sink())
        manager.limit_source_changelogs({SOURCE: 7, LOGGED: 9})
        found = {cp.store_name: cp for cp in manager.changelogs_to_restore()}
        assert (found["table"].source_topic, found["table"].timestamped, found["table"].end_offset) == (True, True, 7)
        assert (found["logged"].source_topic, found["logged"].end_offset) == (False, None)
        assert found["logged"].timestamped, "a timestamped store's own changelog holds plain values too (Java's)"
        assert manager.source_changelog_partitions == frozenset({SOURCE})
        assert manager.store_metadata("table").changelog_topic == SOURCE.topic  # type: ignore[union-attr]
