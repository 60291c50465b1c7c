"""A crash between the steps of a commit: at-least-once reprocesses and never loses; exactly-once
aborts and nothing is duplicated in read_committed output. Fencing of a task's producer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from streams_core import KafkaStreams, clients
from streams_core.state.internals.offset_checkpoint import OffsetCheckpoint
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeProducer

from .harness import APP, Instance, counting_topology, eventually, produce_words, running, streams_config, unlong

EOS = {"processing.guarantee": "exactly_once_v2"}
WORDS = "a b a c b a d"


def cluster_with() -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out"):
        cluster.create_topic(topic)
    return cluster


def output(cluster: FakeKafkaCluster, committed_only: bool = True) -> list[tuple[str, int | None]]:
    return [((r.key or b"").decode(), unlong(r.value)) for r in cluster.records("out", committed_only=committed_only)]


async def crash_once(cluster: FakeKafkaCluster, tmp_path: Path, extra: dict[str, Any], *fault: Any, client: str | None = None) -> Instance:
    """Start, inject the fault, feed WORDS, wait for the thread to die."""
    instance = Instance(cluster, counting_topology(), streams_config(tmp_path, extra))
    await instance.start()
    cluster.fail_next(*fault, client=client)
    produce_words(cluster, WORDS)
    await eventually(lambda: instance.streams.state is KafkaStreams.State.ERROR, what="the crash")
    await instance.close()
    return instance


async def finish(cluster: FakeKafkaCluster, tmp_path: Path, extra: dict[str, Any]) -> None:
    """A restarted instance processes whatever is left."""
    async with running(cluster, counting_topology(), streams_config(tmp_path, extra)):
        await eventually(lambda: cluster.committed(APP) == cluster.end_offsets("in"), what="everything committed")


async def test_at_least_once_commit_failure_after_flush_reprocesses_and_loses_nothing(tmp_path: Path) -> None:
    cluster = cluster_with()
    await crash_once(cluster, tmp_path, {}, "commit", clients.KafkaConnectionError("coordinator gone"))
    first_run = output(cluster)
    assert len(first_run) == len(WORDS.split()), "the output was flushed before the commit failed"
    assert cluster.committed(APP) == {}
    await finish(cluster, tmp_path, {})
    sent = Counter(WORDS.split())
    out = output(cluster)
    assert len(out) > len(WORDS.split()), "the uncommitted records were processed again"
    for key, n in sent.items():
        assert set(range(1, n + 1)) <= {v for k, v in out if k == key}, f"a count of {key} was lost"


async def test_at_least_once_checkpoint_is_not_written_when_the_commit_fails(tmp_path: Path) -> None:
    cluster = cluster_with()
    instance = await crash_once(cluster, tmp_path, {}, "commit", clients.KafkaConnectionError("coordinator gone"))
    assert instance.checkpoint() == {}, "a dirty close trusts no store content"


async def test_exactly_once_commit_failure_aborts_and_output_is_exactly_once(tmp_path: Path) -> None:
    cluster = cluster_with()
    await crash_once(cluster, tmp_path, EOS, "commit_transaction", clients.KafkaConnectionError("gone"), client=f"{APP}-0_0")
    assert output(cluster) == [], "nothing of the failed transaction is visible"
    assert cluster.committed(APP) == {}
    assert output(cluster, committed_only=False), "it was written, uncommitted"
    await finish(cluster, tmp_path, EOS)
    expected, seen = [], Counter[str]()
    for word in WORDS.split():
        seen[word] += 1
        expected.append((word, seen[word]))
    assert output(cluster) == expected


async def test_exactly_once_crash_while_processing_aborts_the_open_transaction(tmp_path: Path) -> None:
    cluster = cluster_with()
    await crash_once(cluster, tmp_path, EOS, "send_offsets_to_transaction", clients.KafkaConnectionError("gone"))
    aborts = cluster.events_of("txn_abort")
    assert aborts and aborts[-1]["transactional_id"] == f"{APP}-0_0"
    await finish(cluster, tmp_path, EOS)
    counts: dict[str, list[int | None]] = {}
    for key, value in output(cluster):
        counts.setdefault(key, []).append(value)
    sent = Counter(WORDS.split())
    assert counts == {k: list(range(1, n + 1)) for k, n in sent.items()}


async def test_at_least_once_crash_after_the_commit_before_the_checkpoint_restores_from_the_changelog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = cluster_with()
    write = OffsetCheckpoint.write
    failed: list[bool] = []

    def failing_write(self: OffsetCheckpoint, offsets: Mapping[tuple[str, int], int], *, durable: bool = True) -> None:
        if offsets and not failed:  # the commit's first file: the IQv2 position, written just before the checkpoint
            failed.append(True)
            raise OSError("disk full")
        write(self, offsets, durable=durable)

    monkeypatch.setattr(OffsetCheckpoint, "write", failing_write)
    instance = Instance(cluster, counting_topology(), streams_config(tmp_path))
    await instance.start()
    produce_words(cluster, WORDS)
    await eventually(lambda: instance.streams.state is KafkaStreams.State.ERROR, what="the crash")
    await instance.close()
    assert cluster.committed(APP) == cluster.end_offsets("in"), "the offsets were committed before the checkpoint failed"
    assert instance.checkpoint() == {}
    produce_words(cluster, "a d")
    await finish(cluster, tmp_path, {})
    counts: dict[str, list[int | None]] = {}
    for key, value in output(cluster):
        counts.setdefault(key, []).append(value)
    sent = Counter([*WORDS.split(), "a", "d"])
    assert counts == {k: list(range(1, n + 1)) for k, n in sent.items()}, "restored from the changelog, nothing lost or doubled"


async def test_a_fenced_task_producer_is_a_migrated_task_not_a_fatal_error(tmp_path: Path) -> None:
    cluster = cluster_with()
    async with running(cluster, counting_topology(), streams_config(tmp_path, EOS)) as app:
        produce_words(cluster, "a")
        await eventually(lambda: len(output(cluster)) == 1, what="first transaction")
        zombie_hunter = FakeProducer(cluster, client_id="other-instance", transactional_id=f"{APP}-0_0")
        await zombie_hunter.start()  # another owner of task 0_0 fences ours
        produce_words(cluster, "a b")
        await eventually(
            lambda: len(output(cluster)) == 3 or app.streams.state is KafkaStreams.State.ERROR, what="processing"
        )
        assert app.streams.state is not KafkaStreams.State.ERROR
        assert output(cluster) == [("a", 1), ("a", 2), ("b", 1)]
