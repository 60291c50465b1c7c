"""Buffers are stores (docs/state.md): a suppression buffer, a stream-table join's grace buffer and a
left stream-stream join's unmatched records survive a crash, restored from their changelogs on
the same state directory or a fresh one, with the observed stream time the operator resumes from.

Each scenario runs on the fake cluster under exactly-once: a first instance processes and
commits, then dies in its next transaction (which aborts: nothing of it is flushed anywhere),
and a second instance finishes. The read_committed output must be what one uninterrupted run
emits, each result once; before buffers were stores, the records waiting at the crash were lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams_core import (
    BufferConfig,
    Joined,
    JoinWindows,
    KafkaStreams,
    Materialized,
    Serdes,
    Stores,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Topology,
    clients,
)
from streams_core.testing import FakeKafkaCluster

from .harness import APP, Instance, eventually, running, streams_config

S, L = Serdes.String(), Serdes.Long()
EOS = {"processing.guarantee": "exactly_once_v2"}


def cluster_with(*topics: str) -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    for topic in (*topics, "out"):
        cluster.create_topic(topic)
    return cluster


def output(cluster: FakeKafkaCluster) -> list[tuple[str, Any]]:
    return [((r.key or b"").decode(), r.value) for r in cluster.records("out", committed_only=True)]


def produce(cluster: FakeKafkaCluster, topic: str, records: list[tuple[str, str, int]]) -> None:
    for key, value, timestamp in records:
        cluster.produce(topic, key, value, timestamp=timestamp)


async def all_committed(cluster: FakeKafkaCluster, *topics: str) -> None:
    def done() -> bool:
        committed = cluster.committed(APP)
        return all(committed.get(tp) == end for topic in topics for tp, end in cluster.end_offsets(topic).items())

    await eventually(done, timeout=5.0, what="everything committed")


async def crash_in_next_transaction(instance: Instance, cluster: FakeKafkaCluster, topic: str,
                                    records: list[tuple[str, str, int]]) -> None:  # fmt: skip
    """The instance processes `records` and dies before their transaction commits."""
    cluster.fail_next("send_offsets_to_transaction", clients.KafkaConnectionError("gone"))
    produce(cluster, topic, records)
    await eventually(lambda: instance.streams.state is KafkaStreams.State.ERROR, what="the crash")
    await instance.close()


def changelogs(cluster: FakeKafkaCluster, marker: str) -> list[str]:
    return [topic for topic in cluster.topics() if marker in topic and topic.endswith("-changelog")]


# -- suppress(until_window_closes) ----------------------------------------------------------------


def final_counts() -> Topology:
    builder = StreamsBuilder()
    (builder.stream("in", key_serde=S, value_serde=S).group_by_key()
     .windowed_by(TimeWindows.of_size_with_no_grace(10_000))
     .count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}", count))
     .to("out", key_serde=S, value_serde=L))  # fmt: skip
    return builder.build()


@pytest.mark.parametrize("second_dir", [0, 1], ids=["same-state-dir", "fresh-state-dir"])
async def test_final_results_waiting_in_the_suppression_buffer_survive_a_crash(tmp_path: Path, second_dir: int) -> None:
    cluster = cluster_with("in")
    first = Instance(cluster, final_counts(), streams_config(tmp_path, EOS))
    await first.start()
    produce(cluster, "in", [("A", "x", 1_000), ("B", "x", 2_000), ("A", "x", 5_000), ("A", "x", 12_000)])
    await all_committed(cluster, "in")
    assert output(cluster) == [("A@0", L.serialize(None, 2)), ("B@0", L.serialize(None, 1))]
    # A's window [10 s, 20 s) waits in the buffer; B@15 s comes in the transaction that dies
    await crash_in_next_transaction(first, cluster, "in", [("B", "x", 15_000)])
    (changelog,) = changelogs(cluster, "KTABLE-SUPPRESS-STATE-STORE-")
    assert cluster.records(changelog), "the buffered window was logged"
    async with running(cluster, final_counts(), streams_config(tmp_path, EOS, instance=second_dir)):
        produce(cluster, "in", [("C", "x", 25_000)])
        await all_committed(cluster, "in")
    assert [(k, L.deserialize(None, v)) for k, v in output(cluster)] == [
        ("A@0", 2),
        ("B@0", 1),
        ("A@10000", 1),
        ("B@10000", 1),
    ], "every closed window once: A's from the restored buffer, B's from the reprocessed record"


# -- suppress(until_time_limit): the observed stream time --------------------------------------------


def time_limited() -> Topology:
    builder = StreamsBuilder()
    (builder.table("in", key_serde=S, value_serde=S)
     .suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
     .to_stream().to("out", key_serde=S, value_serde=S))  # fmt: skip
    return builder.build()


async def test_the_observed_stream_time_resumes_after_a_restart(tmp_path: Path) -> None:
    """k1@100 waits until stream time 110. After the restart, stream time is still 108: k3@50 is
    due at once (it entered the buffer 58 ms behind stream time), as in one uninterrupted run."""
    cluster = cluster_with("in")
    async with running(cluster, time_limited(), streams_config(tmp_path)):
        produce(cluster, "in", [("k1", "1", 100), ("k2", "2", 108)])
        await all_committed(cluster, "in")
    assert output(cluster) == []
    async with running(cluster, time_limited(), streams_config(tmp_path, instance=1)):
        produce(cluster, "in", [("k3", "3", 50)])
        await eventually(lambda: output(cluster) == [("k3", b"3")], what="k3 emitted at the restored stream time")
        produce(cluster, "in", [("k4", "4", 111)])
        await eventually(lambda: len(output(cluster)) == 2, what="k1 due at 110")
    assert output(cluster) == [("k3", b"3"), ("k1", b"1")]
    committed = cluster.committed_with_metadata(APP)
    assert committed, "the processor metadata rides on the committed offsets"


# -- a versioned stream-table join with a grace period --------------------------------------------


def grace_join() -> Topology:
    builder = StreamsBuilder()
    table = builder.table("table", key_serde=S, value_serde=S,
                          materialized=Materialized.as_(Stores.persistent_versioned_key_value_store("v", 60_000)))  # fmt: skip
    (builder.stream("stream", key_serde=S, value_serde=S)
     .join(table, lambda left, right: f"{left}+{right}", Joined.with_(S, S, S, "grace-join", 10))
     .to("out", key_serde=S, value_serde=S))  # fmt: skip
    return builder.build()


@pytest.mark.parametrize("second_dir", [0, 1], ids=["same-state-dir", "fresh-state-dir"])
async def test_stream_records_waiting_out_the_join_grace_period_survive_a_crash(tmp_path: Path, second_dir: int) -> None:
    cluster = cluster_with("stream", "table")
    first = Instance(cluster, grace_join(), streams_config(tmp_path, EOS))
    await first.start()
    produce(cluster, "table", [("k", "T0", 0), ("k", "T102", 102)])
    produce(cluster, "stream", [("k", "a", 100), ("k", "b", 105)])
    await all_committed(cluster, "stream", "table")
    assert output(cluster) == [], "both wait out the grace period"
    await crash_in_next_transaction(first, cluster, "stream", [("k", "c", 120)])
    assert changelogs(cluster, "grace-join-Buffer"), "Java's store name"
    async with running(cluster, grace_join(), streams_config(tmp_path, EOS, instance=second_dir)):
        produce(cluster, "stream", [("k", "d", 130)])
        await all_committed(cluster, "stream", "table")
    assert output(cluster) == [("k", b"a+T0"), ("k", b"b+T102"), ("k", b"c+T102")], "each joined once, as of its time"


# -- a left stream-stream join's unmatched records (KSTREAM-OUTERSHARED-...) -----------------------


def left_join() -> Topology:
    builder = StreamsBuilder()
    right = builder.stream("right", key_serde=S, value_serde=S)
    (builder.stream("left", key_serde=S, value_serde=S)
     .left_join(right, lambda left, other: f"{left}+{other}", JoinWindows.of_time_difference_and_grace(10, 0))
     .to("out", key_serde=S, value_serde=S))  # fmt: skip
    return builder.build()


@pytest.mark.parametrize("second_dir", [0, 1], ids=["same-state-dir", "fresh-state-dir"])
async def test_unmatched_records_of_a_left_join_survive_a_crash(tmp_path: Path, second_dir: int) -> None:
    cluster = cluster_with("left", "right")
    first = Instance(cluster, left_join(), streams_config(tmp_path, EOS))
    await first.start()
    produce(cluster, "left", [("x", "x", 100)])
    await all_committed(cluster, "left")
    await crash_in_next_transaction(first, cluster, "left", [("y", "y", 105)])
    assert changelogs(cluster, "KSTREAM-OUTERSHARED-"), "the shared store of unmatched records is logged"
    async with running(cluster, left_join(), streams_config(tmp_path, EOS, instance=second_dir)):
        produce(cluster, "left", [("z", "z", 200)])
        await all_committed(cluster, "left")
    assert output(cluster) == [("x", b"x+None"), ("y", b"y+None")], "emitted once no partner can come, once each"
