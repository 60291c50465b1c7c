"""Restore before processing: stores are rebuilt from their changelogs (from the checkpoint when
there is one) before the first record is processed; and the StoreChangelogReader over FakeConsumer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from streams_core import clients
from streams_core.runtime.store_changelog_reader import StoreChangelogReader
from streams_core.runtime.topic_partition import TopicPartition
from streams_core.state.internals.offset_checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streams_core.state.internals.processor_state_manager import ChangelogPartition
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeConsumer, FakeProducer

from .harness import APP, CHANGELOG, counting_topology, counts, eventually, long, produce_words, running, streams_config

CL0 = TopicPartition(CHANGELOG, 0)
EOS = {"processing.guarantee": "exactly_once_v2"}


def cluster_with_changelog(*entries: tuple[str, int | None]) -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out", CHANGELOG):
        cluster.create_topic(topic)
    for key, value in entries:
        cluster.produce(CHANGELOG, key, None if value is None else long(value), partition=0)
    return cluster


async def run_and_see(cluster: FakeKafkaCluster, tmp_path: Path, words: str, extra: dict[str, Any] | None = None) -> tuple[
    list[tuple[str, int | None]], int
]:
    """Start, process `words`, close; what each record found in the store, and how many records were restored."""
    seen: list[tuple[str, int | None]] = []
    async with running(cluster, counting_topology(seen=seen), streams_config(tmp_path, extra)) as app:
        produce_words(cluster, words)
        await eventually(lambda: len(seen) == len(words.split()), what="processing")
        restored = app.metric("restored_records")
    return seen, restored


async def test_store_is_restored_before_the_first_record(tmp_path: Path) -> None:
    cluster = cluster_with_changelog(("a", 5), ("b", 1))
    seen, restored = await run_and_see(cluster, tmp_path, "a b c")
    assert seen == [("a", 5), ("b", 1), ("c", None)]
    assert restored == 2
    assert counts(cluster) == {"a": 6, "b": 2, "c": 1}


async def test_input_waiting_before_start_still_sees_the_restored_store(tmp_path: Path) -> None:
    cluster = cluster_with_changelog(*[("a", i) for i in range(1, 200)])
    produce_words(cluster, "a")
    seen: list[tuple[str, int | None]] = []
    async with running(cluster, counting_topology(seen=seen), streams_config(tmp_path)):
        await eventually(lambda: len(seen) == 1, what="processing")
    assert seen == [("a", 199)]


async def test_restore_applies_tombstones(tmp_path: Path) -> None:
    cluster = cluster_with_changelog(("a", 5), ("b", 2), ("a", None))
    seen, _ = await run_and_see(cluster, tmp_path, "a b")
    assert seen == [("a", None), ("b", 2)]


async def test_checkpoint_makes_restore_start_from_it(tmp_path: Path) -> None:
    cluster = cluster_with_changelog(("a", 100), ("b", 100), ("c", 7), ("a", 3))
    task_dir = tmp_path / "state-0" / APP / "0_0"
    task_dir.mkdir(parents=True)
    OffsetCheckpoint(task_dir / CHECKPOINT_FILE_NAME).write({(CHANGELOG, 0): 2})
    seen, restored = await run_and_see(cluster, tmp_path, "a b c")
    assert restored == 2, "only the tail past the checkpoint"
    assert seen == [("a", 3), ("b", None), ("c", 7)]


async def test_a_clean_restart_restores_nothing(tmp_path: Path) -> None:
    cluster = cluster_with_changelog()
    seen, restored = await run_and_see(cluster, tmp_path, "a a")
    assert (seen, restored) == ([("a", None), ("a", 1)], 0)
    seen, restored = await run_and_see(cluster, tmp_path, "a")
    assert seen == [("a", 2)]
    assert restored == 0, "the checkpoint of the clean close covers the whole changelog"


async def test_exactly_once_restore_skips_aborted_changelog_writes(tmp_path: Path) -> None:
    cluster = cluster_with_changelog()
    producer = FakeProducer(cluster, client_id="old-owner", transactional_id="old")
    await producer.start()
    for value, commit in ((5, True), (99, False)):
        await producer.begin_transaction()
        batch = producer.create_batch()
        batch.append(timestamp=1, key=b"a", value=long(value), headers=[])
        await producer.send_batch(batch, CHANGELOG, partition=0)
        await (producer.commit_transaction() if commit else producer.abort_transaction())
    seen, restored = await run_and_see(cluster, tmp_path, "a", EOS)
    assert seen == [("a", 5)]
    assert restored == 1


async def test_exactly_once_wipes_a_store_without_checkpoint(tmp_path: Path) -> None:
    cluster = cluster_with_changelog()
    await run_and_see(cluster, tmp_path, "a a a", EOS)
    task_dir = tmp_path / "state-0" / APP / "0_0"
    (task_dir / CHECKPOINT_FILE_NAME).unlink()  # as after a crash
    cluster.delete_topic(CHANGELOG)  # the store content can no longer come from the changelog...
    cluster.create_topic(CHANGELOG)
    cluster.produce(CHANGELOG, "a", long(1), partition=0)
    seen, _ = await run_and_see(cluster, tmp_path, "a", EOS)
    assert seen == [("a", 1)], "...so what the store held before the crash was not trusted"


# -- StoreChangelogReader over the fake consumer -------------------------------------------------


class Sink:
    """A restore callback keeping what it was given."""

    def __init__(self) -> None:
        self.applied: list[tuple[bytes, bytes | None]] = []

    def __call__(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        self.applied.extend(records)


def reader_on(cluster: FakeKafkaCluster, *, read_committed: bool = False) -> tuple[StoreChangelogReader, FakeConsumer]:
    consumer = FakeConsumer(cluster, client_id="restore", group_id=None, read_committed=read_committed, auto_offset_reset="none")
    return StoreChangelogReader(consumer), consumer


async def test_reader_replays_from_the_beginning_to_the_end() -> None:
    cluster = cluster_with_changelog(("a", 1), ("b", 2), ("c", 3))
    reader, consumer = reader_on(cluster)
    sink = Sink()
    result = await reader.restore("0_0", [ChangelogPartition("counts", CL0, None, sink)])
    assert [k for k, _ in sink.applied] == [b"a", b"b", b"c"]
    assert result.total == 3 and result.end_offsets == {CL0: 3}
    assert consumer.assignment() == frozenset(), "the restore consumer is released"


async def test_reader_starts_at_the_checkpoint_and_ignores_one_beyond_the_end() -> None:
    cluster = cluster_with_changelog(("a", 1), ("b", 2), ("c", 3))
    reader, _ = reader_on(cluster)
    tail = Sink()
    assert (await reader.restore("0_0", [ChangelogPartition("counts", CL0, 2, tail)])).total == 1
    assert tail.applied == [(b"c", long(3))]
    everything = Sink()
    assert (await reader.restore("0_0", [ChangelogPartition("counts", CL0, 50, everything)])).total == 3
    assert (await reader.restore("0_0", [ChangelogPartition("counts", CL0, 3, Sink())])).total == 0


async def test_reader_reaches_the_end_past_transaction_markers() -> None:
    cluster = cluster_with_changelog()
    producer = FakeProducer(cluster, client_id="p", transactional_id="tx")
    await producer.start()
    await producer.begin_transaction()
    batch = producer.create_batch()
    batch.append(timestamp=1, key=b"a", value=long(1), headers=[])
    await producer.send_batch(batch, CHANGELOG, partition=0)
    await producer.commit_transaction()
    reader, _ = reader_on(cluster, read_committed=True)
    sink = Sink()
    result = await asyncio.wait_for(reader.restore("0_0", [ChangelogPartition("counts", CL0, None, sink)]), 2)
    assert sink.applied == [(b"a", long(1))]
    assert result.end_offsets == {CL0: 2}, "the end counts the commit marker"


async def test_reader_restarts_from_the_beginning_after_offset_out_of_range() -> None:
    cluster = cluster_with_changelog(("a", 1), ("b", 2), ("c", 3), ("d", 4))
    reader, _ = reader_on(cluster)
    cluster.fail_fetch(CL0, clients.OffsetOutOfRangeError({CL0: 1}))
    sink = Sink()
    await reader.restore("0_0", [ChangelogPartition("counts", CL0, 1, sink)])
    assert [k for k, _ in sink.applied] == [b"a", b"b", b"c", b"d"]


async def test_reader_propagates_other_fetch_errors() -> None:
    cluster = cluster_with_changelog(("a", 1))
    reader, consumer = reader_on(cluster)
    cluster.fail_fetch(CL0, clients.KafkaConnectionError("broker gone"))
    with pytest.raises(clients.KafkaConnectionError):
        await reader.restore("0_0", [ChangelogPartition("counts", CL0, None, Sink())])
    assert consumer.assignment() == frozenset()
