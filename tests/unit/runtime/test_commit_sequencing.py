"""Commit sequencing: flush stores, flush the producer, commit offsets or the transaction, write the
checkpoint (the IQv2 position just before it) — in that order — under at-least-once and exactly-once,
seen in the fake cluster's event log."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from streams_core import Processor, ProcessorContext, Record
from streams_core.common.topic_partition import TopicPartition
from streams_core.state.internals.offset_checkpoint import OffsetCheckpoint
from streams_core.state.internals.position_checkpoint import POSITION_FILE_NAME
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.testing import FakeKafkaCluster

from .harness import APP, CHANGELOG, STRING, counting_topology, counts, eventually, produce_words, running, streams_config

EOS = {"processing.guarantee": "exactly_once_v2"}
IN0 = TopicPartition("in", 0)
STEPS = ("store_flush", "producer_flush", "commit", "txn_offsets", "txn_commit", "position", "checkpoint")


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKafkaCluster]:
    """A cluster whose event log also shows store flushes and checkpoint writes."""
    cluster = FakeKafkaCluster()
    cluster.create_topic("in")
    cluster.create_topic("out")
    flush, write = ProcessorStateManager.flush, OffsetCheckpoint.write

    def logged_flush(self: ProcessorStateManager) -> None:
        flush(self)
        cluster.log_event("store_flush", str(self.task_id))

    def logged_write(self: OffsetCheckpoint, offsets: Mapping[tuple[str, int], int], *, durable: bool = True) -> None:
        write(self, offsets, durable=durable)
        if offsets:
            kind = "position" if self.path.name == POSITION_FILE_NAME else "checkpoint"
            cluster.log_event(kind, self.path.parent.name, offsets=dict(offsets))

    monkeypatch.setattr(ProcessorStateManager, "flush", logged_flush)
    monkeypatch.setattr(OffsetCheckpoint, "write", logged_write)
    yield cluster


def collapsed(cluster: FakeKafkaCluster, kinds: tuple[str, ...] = STEPS) -> list[str]:
    out: list[str] = []
    for kind in cluster.kinds(*kinds):
        if not out or out[-1] != kind:
            out.append(kind)
    return out


async def test_at_least_once_flushes_stores_then_producer_then_commits_then_checkpoints(
    cluster: FakeKafkaCluster, tmp_path: Path
) -> None:
    async with running(cluster, counting_topology(), streams_config(tmp_path)):
        for batch in ("a b", "a c", "b b"):
            produce_words(cluster, batch)
            await eventually(lambda: cluster.committed(APP).get(IN0) == len(cluster.records("in")), what="commit")
    seq = collapsed(cluster)
    commits = [i for i, kind in enumerate(seq) if kind == "commit"]
    assert commits
    for i in commits:
        assert seq[i - 2 : i + 3] == ["store_flush", "producer_flush", "commit", "position", "checkpoint"], seq
    assert "txn_commit" not in seq


async def test_at_least_once_commits_the_next_offset_and_checkpoints_the_changelog_end(
    cluster: FakeKafkaCluster, tmp_path: Path
) -> None:
    async with running(cluster, counting_topology(), streams_config(tmp_path)) as app:
        produce_words(cluster, "a b a c")
        await eventually(lambda: sum(cluster.committed(APP).values()) == 4, what="commit of 4 records")
        changelog_end = cluster.end_offsets(CHANGELOG)
        assert sum(changelog_end.values()) == 4
        await eventually(lambda: app.checkpoint() == {(CHANGELOG, 0): 4}, what="checkpoint after the commit")
    commit = cluster.events_of("commit")[-1]
    assert dict(commit["offsets"]) == {("in", 0): 4}
    assert app.checkpoint() == {(CHANGELOG, 0): 4}


async def test_exactly_once_commits_output_changelog_and_offsets_in_one_transaction(
    cluster: FakeKafkaCluster, tmp_path: Path
) -> None:
    async with running(cluster, counting_topology(), streams_config(tmp_path, EOS)):
        produce_words(cluster, "a b a")
        await eventually(lambda: cluster.committed(APP) == {("in", 0): 3}, what="transactional offsets")
    assert cluster.kinds("commit") == [], "no consumer commit under exactly-once"
    txn_id = f"{APP}-0_0"
    produces = [e for e in cluster.events_of("produce") if e["topic"] in ("out", CHANGELOG)]
    assert produces and all(e["transactional_id"] == txn_id for e in produces)
    tx_seq = [
        e.kind for e in cluster.events
        if e.kind in ("txn_begin", "produce", "txn_offsets", "producer_flush", "txn_commit", "txn_abort")
        and (e.detail.get("transactional_id") == txn_id)
    ]
    assert "txn_abort" not in tx_seq
    # each transaction: begin, its records, then the producer flush, the offsets, the commit
    while tx_seq:
        end = tx_seq.index("txn_commit")
        one, tx_seq = tx_seq[: end + 1], tx_seq[end + 1 :]
        assert one[0] == "txn_begin" and one[-3:] == ["producer_flush", "txn_offsets", "txn_commit"], one
        assert set(one[1:-3]) <= {"produce"}
    committed = cluster.events_of("txn_commit")[-1]
    assert committed["offsets"] == {APP: {("in", 0): 3}}
    assert counts(cluster) == {"a": 2, "b": 1}


async def test_exactly_once_flushes_stores_before_the_transaction_commits(
    cluster: FakeKafkaCluster, tmp_path: Path
) -> None:
    async with running(cluster, counting_topology(), streams_config(tmp_path, EOS)):
        produce_words(cluster, "a b")
        await eventually(lambda: cluster.committed(APP) == {("in", 0): 2}, what="transactional offsets")
    seq = collapsed(cluster, ("store_flush", "txn_offsets", "txn_commit"))
    for i, kind in enumerate(seq):
        if kind == "txn_commit":
            assert seq[i - 2 : i] == ["store_flush", "txn_offsets"], seq


async def test_exactly_once_keeps_no_checkpoint_while_running_and_writes_one_on_close(
    cluster: FakeKafkaCluster, tmp_path: Path
) -> None:
    async with running(cluster, counting_topology(), streams_config(tmp_path, EOS)) as app:
        produce_words(cluster, "a b c")
        await eventually(lambda: cluster.committed(APP) == {("in", 0): 3}, what="transactional offsets")
        assert app.checkpoint() == {}, "a crash now must not trust the store"
        assert cluster.kinds("checkpoint") == []
    last_record = cluster.records(CHANGELOG)[-1].offset
    assert app.checkpoint() == {(CHANGELOG, 0): last_record + 1}


async def test_exactly_once_consumers_read_committed(cluster: FakeKafkaCluster, tmp_path: Path) -> None:
    async with running(cluster, counting_topology(), streams_config(tmp_path, EOS)) as app:
        assert all(c.read_committed for c in app.supplier.consumers)
        assert all(p.transactional_id == f"{APP}-0_0" for p in app.supplier.producers if p.transactional_id)
    async with running(cluster, counting_topology(), streams_config(tmp_path, instance=1)) as app:
        assert not any(c.read_committed for c in app.supplier.consumers)


async def test_no_commit_before_the_interval_unless_a_processor_asks(cluster: FakeKafkaCluster, tmp_path: Path) -> None:
    class CommitOnX(Processor[str, str, str, str]):
        def init(self, context: ProcessorContext[str, str]) -> None:
            self.context = context

        def process(self, record: Record[str, str]) -> None:
            self.context.forward(record)
            if record.value == "x":
                self.context.commit()

    from streams_core import Topology

    topology = (
        Topology().add_source("SRC", "in", key_serde=STRING, value_serde=STRING)
        .add_processor("P", CommitOnX, "SRC").add_sink("SINK", "out", "P", key_serde=STRING, value_serde=STRING)
    )
    config: dict[str, Any] = streams_config(tmp_path, {"commit.interval.ms": 60_000})
    async with running(cluster, topology, config):
        produce_words(cluster, "a b")
        await eventually(lambda: len(cluster.records("out")) == 2, what="output")
        assert cluster.committed(APP) == {}
        produce_words(cluster, "x")
        await eventually(lambda: cluster.committed(APP) == {("in", 0): 3}, what="the requested commit")
