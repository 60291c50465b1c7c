"""Exactly-once without wipes (KIP-892/KIP-1035 in SQLite form), over the fake cluster: a crash
under exactly-once restores only the changelog past the offsets the store file holds."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from streams_core import KafkaStreams, TaskId
from streams_core.runtime.tasks import processing_guarantee
from streams_core.state.internals.offset_checkpoint import CHECKPOINT_FILE_NAME
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.testing import FakeKafkaCluster

from .harness import APP, CHANGELOG, Instance, counting_topology, eventually, produce_words, running, streams_config

EOS = {"processing.guarantee": "exactly_once_v2"}


def cluster_with_topics() -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out", CHANGELOG):
        cluster.create_topic(topic)
    return cluster


async def run_words(
    cluster: FakeKafkaCluster, tmp_path: Path, words: str, uncommitted: int = 0
) -> tuple[list[tuple[str, int | None]], int]:
    """Start under exactly-once, process `words` (and `uncommitted` input records left by a failed
    run) up to a commit, close; what each record found in the store and how many changelog records
    the start restored."""
    seen: list[tuple[str, int | None]] = []
    async with running(cluster, counting_topology(seen=seen), streams_config(tmp_path, EOS)) as app:
        produce_words(cluster, words)
        await eventually(lambda: len(seen) == uncommitted + len(words.split()), what="processing")
        await eventually(lambda: cluster.committed(APP) == cluster.end_offsets("in"), what="the commit")
        restored: int = app.metric("restored_records")
    return seen, restored


def task_dir(tmp_path: Path) -> Path:
    return tmp_path / "state-0" / APP / "0_0"


def stored_offset(tmp_path: Path) -> int:
    conn = sqlite3.connect(task_dir(tmp_path) / "counts.sqlite")
    try:
        [(offset,)] = conn.execute("SELECT next_offset FROM changelog_offsets WHERE topic = ?", (CHANGELOG,)).fetchall()
    finally:
        conn.close()
    return int(offset)


def crash(tmp_path: Path) -> None:
    """What a kill -9 leaves that a clean close does not: no checkpoint (exactly-once removes it while running)."""
    (task_dir(tmp_path) / CHECKPOINT_FILE_NAME).unlink()


async def test_a_crash_under_exactly_once_restores_nothing_when_the_stores_committed(tmp_path: Path) -> None:
    cluster = cluster_with_topics()
    await run_words(cluster, tmp_path, "a a a b")
    changelog_records = len(cluster.records(CHANGELOG))
    assert stored_offset(tmp_path) > 0
    crash(tmp_path)
    seen, restored = await run_words(cluster, tmp_path, "a")
    assert seen == [("a", 3)]
    assert restored == 0, f"no wipe: the store file says it holds the changelog ({changelog_records} records)"


async def test_a_crash_between_the_kafka_commit_and_the_sqlite_commit_restores_only_the_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = cluster_with_topics()
    await run_words(cluster, tmp_path, "a b a")
    committed_at = stored_offset(tmp_path)
    # From now on the process "dies" right after each Kafka commit: the SQLite commit never happens.
    monkeypatch.setattr(ProcessorStateManager, "commit_stores", lambda self: None)
    seen, _ = await run_words(cluster, tmp_path, "a c c")
    assert seen == [("a", 2), ("c", None), ("c", 1)]
    assert stored_offset(tmp_path) == committed_at, "the store stayed behind the committed changelog"
    crash(tmp_path)
    monkeypatch.undo()
    seen, restored = await run_words(cluster, tmp_path, "a c b")
    assert seen == [("a", 3), ("c", 2), ("b", 1)], "the restore covered the gap: no update lost, none twice"
    assert restored == 3, "only the changelog tail past the stored offset (the three updates of 'a c c')"


async def test_an_aborted_transaction_leaves_the_store_at_its_last_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Kafka transaction fails: the SQLite transaction is rolled back with it, nothing is wiped."""
    cluster = cluster_with_topics()
    await run_words(cluster, tmp_path, "a a")
    failing = {"on": True}
    real_commit = processing_guarantee.ExactlyOnce.commit

    async def commit(self: Any, prepared: Any) -> bool:
        if failing["on"] and prepared:
            failing["on"] = False
            raise RuntimeError("the transaction did not commit")
        return await real_commit(self, prepared)

    monkeypatch.setattr(processing_guarantee.ExactlyOnce, "commit", commit)
    seen: list[tuple[str, int | None]] = []
    instance = Instance(cluster, counting_topology(seen=seen), streams_config(tmp_path, EOS))
    await instance.start()
    produce_words(cluster, "a b")
    await eventually(lambda: instance.streams.state is KafkaStreams.State.ERROR, what="the failed commit")
    await instance.close()
    assert seen == [("a", 2), ("b", None)]
    monkeypatch.undo()
    seen, restored = await run_words(cluster, tmp_path, "a", uncommitted=2)
    assert seen == [("a", 2), ("b", None), ("a", 3)], "the input is processed again, once, from the store of the last commit"
    assert restored == 0


async def test_the_assignor_sees_the_offsets_in_the_store_files_when_there_is_no_checkpoint(tmp_path: Path) -> None:
    """Exactly-once keeps no checkpoint while a task runs (nor after a crash): the per-task offset
    sums that stickiness and warm-up decisions use (KIP-441) come from the store files."""
    cluster = cluster_with_topics()
    seen: list[tuple[str, int | None]] = []
    async with running(cluster, counting_topology(seen=seen), streams_config(tmp_path, EOS)) as app:
        produce_words(cluster, "a b c")
        await eventually(lambda: cluster.committed(APP) == cluster.end_offsets("in"), what="the commit")
        assert not (task_dir(tmp_path) / CHECKPOINT_FILE_NAME).exists()
        [thread] = app.streams.threads
        assert thread.task_manager is not None
        await eventually(lambda: stored_offset(tmp_path) >= 3, what="the store commit")
        assert thread.task_manager.local_state_offset_sums() == {TaskId(0, 0): stored_offset(tmp_path)}
