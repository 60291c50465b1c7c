"""Restore before processing: stores are rebuilt from their changelogs (from the checkpoint when
there is one) before the first record is processed; and the StoreChangelogReader over FakeConsumer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from streams_core import TaskCorruptedError, TaskId, clients
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.restore import store_changelog_reader
from streams_core.runtime.restore.store_changelog_reader import StoreChangelogReader
from streams_core.state.internals.offset_checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streams_core.state.internals.processor_state_manager import ChangelogPartition, ProcessorStateManager
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeConsumer, FakeProducer

from .harness import (
    APP,
    CHANGELOG,
    counting_topology,
    counts,
    counts_store,
    eventually,
    long,
    produce_words,
    running,
    streams_config,
)

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


def store_with(task_dir: Path, checkpoint: int, **values: int) -> None:
    """A closed `counts` store file holding `values`, and a checkpoint saying it holds the changelog up to `checkpoint`."""
    with ProcessorStateManager(TaskId(0, 0), APP, task_dir) as manager:
        store = counts_store().build()
        store.init(manager.context, store)
        for key, value in values.items():
            store.wrapped().wrapped().put(key.encode(), long(value))  # below the change logging layer
    OffsetCheckpoint(task_dir / CHECKPOINT_FILE_NAME).write({(CHANGELOG, 0): checkpoint})


async def test_checkpoint_makes_restore_start_from_it(tmp_path: Path) -> None:
    cluster = cluster_with_changelog(("a", 100), ("b", 100), ("c", 7), ("a", 3))
    store_with(tmp_path / "state-0" / APP / "0_0", 2)
    seen, restored = await run_and_see(cluster, tmp_path, "a b c")
    assert restored == 2, "only the tail past the checkpoint"
    assert seen == [("a", 3), ("b", None), ("c", 7)]


async def test_a_checkpoint_without_its_store_file_is_not_trusted(tmp_path: Path) -> None:
    """The store file was deleted (or truncated to nothing) while the checkpoint stayed: restore it all."""
    cluster = cluster_with_changelog(("a", 100), ("b", 100), ("c", 7), ("a", 3))
    task_dir = tmp_path / "state-0" / APP / "0_0"
    task_dir.mkdir(parents=True)
    OffsetCheckpoint(task_dir / CHECKPOINT_FILE_NAME).write({(CHANGELOG, 0): 2})
    (task_dir / "counts.sqlite").write_bytes(b"")
    seen, restored = await run_and_see(cluster, tmp_path, "a b c")
    assert restored == 4
    assert seen == [("a", 3), ("b", 100), ("c", 7)]


@pytest.mark.parametrize("checkpoint", [50, 5])
async def test_a_checkpoint_beyond_the_changelog_end_wipes_the_store(tmp_path: Path, checkpoint: int) -> None:
    """The changelog no longer has what the checkpoint promises (recreated, truncated): the store's
    rows cannot be trusted, it is wiped and rebuilt from the changelog alone."""
    cluster = cluster_with_changelog(("a", 100), ("b", 100), ("c", 7), ("a", 3))
    store_with(tmp_path / "state-0" / APP / "0_0", checkpoint, a=40, stale=9)
    seen, restored = await run_and_see(cluster, tmp_path, "a b stale")
    assert restored == 4
    assert seen == [("a", 3), ("b", 100), ("stale", None)]


@pytest.mark.parametrize(
    "text", [b"0\n1\napp-counts-changelog 0 x\n", b"0\n", b"\x00\xff garbage", b"7\n1\napp-counts-changelog 0 2\n"],
    ids=["bad-offset", "truncated", "garbage", "unknown-version"],
)
async def test_a_corrupt_checkpoint_wipes_the_task_instead_of_failing(tmp_path: Path, text: bytes) -> None:
    """Java fails the thread on an unreadable checkpoint; we wipe and restore (docs/state.md)."""
    cluster = cluster_with_changelog(("a", 100), ("b", 100), ("c", 7), ("a", 3))
    task_dir = tmp_path / "state-0" / APP / "0_0"
    store_with(task_dir, 2, a=40, stale=9)
    (task_dir / CHECKPOINT_FILE_NAME).write_bytes(text)
    seen, restored = await run_and_see(cluster, tmp_path, "a b stale")
    assert restored == 4
    assert seen == [("a", 3), ("b", 100), ("stale", None)]


async def test_in_memory_stores_restore_from_the_beginning_after_a_restart(tmp_path: Path) -> None:
    """A checkpointed offset promises what a file holds; an in-memory store restarts empty (Java: never checkpointed)."""
    from streams_core import Stores

    from .harness import LONG, STRING

    def topology(seen: list[tuple[str, int | None]]) -> Any:
        store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), STRING, LONG)
        return counting_topology(seen=seen, store=store)

    cluster = cluster_with_changelog()
    for words, expected in (("a a", [("a", None), ("a", 1)]), ("a", [("a", 2)])):
        seen: list[tuple[str, int | None]] = []
        async with running(cluster, topology(seen), streams_config(tmp_path)):
            produce_words(cluster, words)
            await eventually(lambda: len(seen) == len(words.split()), what="processing")  # noqa: B023
        assert seen == expected
    assert not (tmp_path / "state-0" / APP / "0_0" / CHECKPOINT_FILE_NAME).exists()


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


async def test_exactly_once_wipes_a_store_whose_stored_offset_is_past_a_recreated_changelog(tmp_path: Path) -> None:
    """Without a checkpoint the store file's own offsets say how far it is (no wipe: see
    test_transactional_state.py); past the changelog's end they are not trusted."""
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


async def test_reader_starts_at_the_checkpoint_and_refuses_one_beyond_the_end() -> None:
    cluster = cluster_with_changelog(("a", 1), ("b", 2), ("c", 3))
    reader, consumer = reader_on(cluster)
    tail = Sink()
    assert (await reader.restore("0_0", [ChangelogPartition("counts", CL0, 2, tail)])).total == 1
    assert tail.applied == [(b"c", long(3))]
    with pytest.raises(TaskCorruptedError, match="beyond the changelog end 3"):
        await reader.restore("0_0", [ChangelogPartition("counts", CL0, 50, Sink())])
    assert consumer.assignment() == frozenset()
    assert (await reader.restore("0_0", [ChangelogPartition("counts", CL0, 3, Sink())])).total == 0


async def test_reader_commits_transactional_stores_while_restoring(monkeypatch: pytest.MonkeyPatch) -> None:
    """A restore killed midway resumes from the last of these commits (each with the next offset)."""
    monkeypatch.setattr(store_changelog_reader, "COMMIT_RESTORED_EVERY_S", 0.0)
    cluster = cluster_with_changelog(*[(f"k{i}", i) for i in range(25_000)])
    reader, _ = reader_on(cluster)
    commits: list[int] = []
    result = await reader.restore("0_0", [ChangelogPartition("counts", CL0, None, Sink(), commits.append)])
    assert result.total == 25_000
    assert commits and commits == sorted(commits) and commits[-1] < 25_000, commits
    assert all(c % 10_000 == 0 for c in commits), "at batch ends: every record below the offset applied"


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


async def test_reader_reports_offset_out_of_range_as_a_corrupted_task() -> None:
    """The changelog lost the records the store was restored from: the task must be wiped (as Java)."""
    cluster = cluster_with_changelog(("a", 1), ("b", 2), ("c", 3), ("d", 4))
    reader, consumer = reader_on(cluster)
    cluster.fail_fetch(CL0, clients.OffsetOutOfRangeError({CL0: 1}))
    with pytest.raises(TaskCorruptedError, match="no longer has the restore position"):
        await reader.restore("0_0", [ChangelogPartition("counts", CL0, 1, Sink())])
    assert consumer.assignment() == frozenset()


async def test_reader_propagates_other_fetch_errors() -> None:
    cluster = cluster_with_changelog(("a", 1))
    reader, consumer = reader_on(cluster)
    cluster.fail_fetch(CL0, clients.KafkaConnectionError("broker gone"))
    with pytest.raises(clients.KafkaConnectionError):
        await reader.restore("0_0", [ChangelogPartition("counts", CL0, None, Sink())])
    assert consumer.assignment() == frozenset()


async def test_reader_assigns_only_changelogs_with_records_to_replay() -> None:
    """An assigned changelog at its end is fetched, and a broker holds that fetch for `fetch.max.wait.ms`
    with the next task's offset request queued behind it: a changelog with nothing to replay is not assigned."""
    cluster = cluster_with_changelog(("a", 1), ("b", 2))
    cluster.create_topic("empty-changelog")
    assigned: list[frozenset[TopicPartition]] = []

    class Recording(FakeConsumer):
        def assign(self, partitions: Iterable[TopicPartition]) -> None:
            partitions = frozenset(partitions)
            assigned.append(partitions)
            super().assign(partitions)

    consumer = Recording(cluster, client_id="restore", group_id=None, auto_offset_reset="none")
    reader = StoreChangelogReader(consumer)
    empty = TopicPartition("empty-changelog", 0)
    result = await reader.restore(
        "0_0", [ChangelogPartition("counts", CL0, 2, Sink()), ChangelogPartition("other", empty, None, Sink())]
    )
    assert result.total == 0 and result.end_offsets == {CL0: 2, empty: 0}
    assert assigned == [], "nothing to replay: the restore consumer is not assigned anything"
    sink = Sink()
    result = await reader.restore(
        "0_0", [ChangelogPartition("counts", CL0, 1, sink), ChangelogPartition("other", empty, None, Sink())]
    )
    assert sink.applied == [(b"b", long(2))] and result.end_offsets == {CL0: 2, empty: 0}
    assert assigned == [frozenset({CL0}), frozenset()], "only the changelog with a record to replay, then released"


async def test_reader_drops_the_standby_changelogs_before_asking_end_offsets() -> None:
    """Standby changelogs at their end are fetched, and the broker holds such a fetch for `fetch.max.wait.ms`
    with the end-offset request queued behind it: a restore drops them first (standbys are assigned again after)."""
    cluster = cluster_with_changelog(("a", 1))
    cluster.create_topic("standby-changelog")
    standby = TopicPartition("standby-changelog", 0)
    events: list[str] = []

    class Recording(FakeConsumer):
        def assign(self, partitions: Iterable[TopicPartition]) -> None:
            partitions = frozenset(partitions)
            events.append(f"assign {sorted(str(tp) for tp in partitions)}")
            super().assign(partitions)

        async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
            events.append(f"end_offsets while assigned {sorted(str(tp) for tp in self.assignment())}")
            return await super().end_offsets(partitions)

    consumer = Recording(cluster, client_id="restore", group_id=None, auto_offset_reset="none")
    reader = StoreChangelogReader(consumer)
    await reader.assign_standby_partitions({standby: None})
    events.clear()
    sink = Sink()
    result = await reader.restore("0_0", [ChangelogPartition("counts", CL0, None, sink)])
    assert sink.applied == [(b"a", long(1))] and result.total == 1
    assert events == ["assign []", "end_offsets while assigned []", f"assign ['{CL0}']", "assign []"]
