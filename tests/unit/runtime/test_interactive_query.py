"""IQv2 (`KafkaStreams.query`) on the fake cluster: per-partition results and their failure reasons."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from streams_core import (
    FailureReason,
    InvalidStateStoreError,
    KafkaStreams,
    KeyQuery,
    Materialized,
    Position,
    PositionBound,
    RangeQuery,
    StateQueryRequest,
    StreamsBuilder,
    StreamsError,
    StreamsNotStartedError,
    TimestampedKeyQuery,
    TimestampedRangeQuery,
    UnknownStateStoreError,
    WindowKeyQuery,
)
from streams_core.common.topic_partition import TopicPartition
from streams_core.testing import FakeKafkaCluster

from .harness import APP, STRING, Instance, counting_topology, eventually, produce_words, running, streams_config


def cluster_with(partitions: int) -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out"):
        cluster.create_topic(topic, partitions)
    return cluster


def in_counts(query: Any) -> StateQueryRequest[Any]:
    return StateQueryRequest.in_store("counts").with_query(query)


async def counted(cluster: FakeKafkaCluster, app: Instance, words: str) -> None:
    expected = len(cluster.records("out")) + len(words.split())
    produce_words(cluster, words)
    await eventually(lambda: len(cluster.records("out")) == expected, what="output")


async def test_a_key_query_is_answered_by_the_keys_partition_with_its_position(tmp_path: Path) -> None:
    cluster = cluster_with(2)
    async with running(cluster, counting_topology(), streams_config(tmp_path)) as app:
        await counted(cluster, app, "a b a c a")
        result = await app.streams.query(in_counts(KeyQuery.with_key("a")))
        assert set(result.get_partition_results()) == {0, 1}, "all partitions by default"
        assert all(r.is_success() for r in result.get_partition_results().values())
        only = result.get_only_partition_result()
        assert only is not None and only.get_result() == 3
        partition = next(p for p, r in result.get_partition_results().items() if r.get_result() == 3)
        position = only.get_position()
        assert position is not None and position.get_partition_positions("in").keys() == {partition}
        assert result.get_position().get_topics() == {"in"}
        missing = await app.streams.query(in_counts(KeyQuery.with_key("zzz")))
        assert missing.get_only_partition_result() is None, "an absent key: every partition answers None"


async def test_range_queries_in_either_order_and_bounds(tmp_path: Path) -> None:
    cluster = cluster_with(1)
    async with running(cluster, counting_topology(), streams_config(tmp_path)) as app:
        await counted(cluster, app, "a b c d b")
        ask = app.streams.query

        def entries(result: Any) -> list[tuple[str, int]]:
            return [(kv.key, kv.value) for kv in result.get_partition_results()[0].get_result()]

        assert entries(await ask(in_counts(RangeQuery.with_no_bounds()))) == [("a", 1), ("b", 2), ("c", 1), ("d", 1)]
        assert entries(await ask(in_counts(RangeQuery.with_range("b", "c")))) == [("b", 2), ("c", 1)]
        assert entries(await ask(in_counts(RangeQuery.with_lower_bound("c").with_descending_keys()))) == [("d", 1), ("c", 1)]
        assert entries(await ask(in_counts(RangeQuery.with_upper_bound("b").with_ascending_keys()))) == [("a", 1), ("b", 2)]


async def test_unknown_query_types_and_partitions_come_back_as_reasons(tmp_path: Path) -> None:
    cluster = cluster_with(2)
    async with running(cluster, counting_topology(), streams_config(tmp_path)) as app:
        await counted(cluster, app, "a")
        for query in (WindowKeyQuery.with_key_and_window_start_range("a", 0, 10), TimestampedKeyQuery.with_key("a"),
                      TimestampedRangeQuery.with_no_bounds()):
            result = await app.streams.query(in_counts(query))
            reasons = {r.get_failure_reason() for r in result.get_partition_results().values()}
            assert reasons == {FailureReason.UNKNOWN_QUERY_TYPE}, query
        result = await app.streams.query(in_counts(KeyQuery.with_key("a")).with_partitions({1, 7}))
        assert set(result.get_partition_results()) == {1, 7}
        assert result.get_partition_results()[1].is_success()
        failed = result.get_partition_results()[7]
        assert failed.get_failure_reason() is FailureReason.DOES_NOT_EXIST and "7" in failed.get_failure_message()
        with pytest.raises(ValueError):
            failed.get_result()
        with pytest.raises(UnknownStateStoreError):
            await app.streams.query(StateQueryRequest.in_store("nope").with_query(KeyQuery.with_key("a")))


async def test_a_position_bound_is_answered_only_by_a_copy_that_reached_it(tmp_path: Path) -> None:
    cluster = cluster_with(1)
    async with running(cluster, counting_topology(), streams_config(tmp_path)) as app:
        await counted(cluster, app, "a b a")  # offsets 0, 1, 2 of in-0
        reached = PositionBound.at(Position().with_component("in", 0, 2))
        result = await app.streams.query(in_counts(KeyQuery.with_key("a")).with_position_bound(reached))
        assert result.get_partition_results()[0].get_result() == 2
        ahead = PositionBound.at(Position.from_map({"in": {0: 3}}))
        behind = (await app.streams.query(in_counts(KeyQuery.with_key("a")).with_position_bound(ahead))).get_partition_results()[0]
        assert behind.get_failure_reason() is FailureReason.NOT_UP_TO_BOUND
        other = PositionBound.at(Position.from_map({"in": {5: 99}}))
        unrelated = await app.streams.query(in_counts(KeyQuery.with_key("a")).with_position_bound(other))
        assert unrelated.get_partition_results()[0].get_result() == 2, "a bound on another partition does not hold this one"
        await counted(cluster, app, "a b a a")
        caught_up = await app.streams.query(in_counts(KeyQuery.with_key("a")).with_position_bound(ahead))
        assert caught_up.get_partition_results()[0].get_result() == 5


async def test_execution_info_only_when_asked(tmp_path: Path) -> None:
    cluster = cluster_with(1)
    async with running(cluster, counting_topology(), streams_config(tmp_path)) as app:
        await counted(cluster, app, "a")
        plain = (await app.streams.query(in_counts(KeyQuery.with_key("a")))).get_partition_results()[0]
        assert plain.get_execution_info() == []
        traced = (await app.streams.query(in_counts(KeyQuery.with_key("a")).enable_execution_info())).get_partition_results()[0]
        assert len(traced.get_execution_info()) == 1 and "partition 0" in traced.get_execution_info()[0]


async def test_a_standby_answers_not_active_when_active_is_required(tmp_path: Path) -> None:
    cluster = cluster_with(1)
    extra = {"num.standby.replicas": 1}
    first = Instance(cluster, counting_topology(), streams_config(tmp_path, extra, instance=0))
    second = Instance(cluster, counting_topology(), streams_config(tmp_path, extra, instance=1))
    try:
        await first.start()
        await second.start(wait=False)
        await eventually(
            lambda: cluster.group_stable(APP) and all(i.streams.state is KafkaStreams.State.RUNNING for i in (first, second)),
            what="both RUNNING",
        )
        active, standby = (first, second) if first.tasks() else (second, first)
        await counted(cluster, active, "a b a")
        await eventually(lambda: standby.streams.store("counts", stale=True).get("a") == 2, what="the standby copy")

        required = (await standby.streams.query(in_counts(KeyQuery.with_key("a")).require_active())).get_partition_results()
        assert required[0].get_failure_reason() is FailureReason.NOT_ACTIVE
        stale = (await standby.streams.query(in_counts(KeyQuery.with_key("a")))).get_partition_results()[0]
        assert stale.get_result() == 2 and stale.get_position() is None
        bound = PositionBound.at(Position({TopicPartition("in", 0): 0}))
        bounded = await standby.streams.query(in_counts(KeyQuery.with_key("a")).with_position_bound(bound))
        assert bounded.get_partition_results()[0].get_failure_reason() is FailureReason.NOT_UP_TO_BOUND, "a standby has no position"
        on_active = await active.streams.query(in_counts(KeyQuery.with_key("a")).enable_require_active())
        assert on_active.get_partition_results()[0].get_result() == 2
        with_other = await active.streams.query(in_counts(KeyQuery.with_key("a")).with_partitions({0}))
        assert with_other.get_only_partition_result() is not None
    finally:
        await first.close()
        await second.close()


async def test_a_partition_not_here_is_not_present(tmp_path: Path) -> None:
    cluster = cluster_with(2)
    first = Instance(cluster, counting_topology(), streams_config(tmp_path, instance=0))
    second = Instance(cluster, counting_topology(), streams_config(tmp_path, instance=1))
    try:
        await first.start()
        await second.start(wait=False)
        await eventually(
            lambda: cluster.group_stable(APP) and all(i.streams.state is KafkaStreams.State.RUNNING for i in (first, second))
            and len(first.tasks()) == 1,
            what="one task each",
        )
        mine = next(iter(first.tasks())).partition
        result = (await first.streams.query(in_counts(KeyQuery.with_key("a")).with_partitions({0, 1}))).get_partition_results()
        assert result[mine].is_success()
        assert result[1 - mine].get_failure_reason() is FailureReason.NOT_PRESENT
        assert set((await first.streams.query(in_counts(KeyQuery.with_key("a")))).get_partition_results()) == {mine}
        for request in (in_counts(KeyQuery.with_key("a")).with_partitions({1 - mine}), in_counts(KeyQuery.with_key("a")).with_partitions({1 - mine}).require_active()):
            alone = (await first.streams.query(request)).get_partition_results()  # one partition: read at once, then named
            assert alone[1 - mine].get_failure_reason() is FailureReason.NOT_PRESENT, request
    finally:
        await first.close()
        await second.close()


async def test_query_sync_answers_from_another_thread_and_refuses_the_loop_itself(tmp_path: Path) -> None:
    cluster = cluster_with(1)
    async with running(cluster, counting_topology(), streams_config(tmp_path)) as app:
        await counted(cluster, app, "a a")
        request = in_counts(KeyQuery.with_key("a"))
        result = await asyncio.to_thread(app.streams.query_sync, request, timeout=5.0)
        assert result.get_partition_results()[0].get_result() == 2
        with pytest.raises(StreamsError, match="await query"):
            app.streams.query_sync(request)


async def test_query_raises_only_before_start_and_once_stopped_and_a_global_store_answers_unknown(tmp_path: Path) -> None:
    cluster = cluster_with(1)
    cluster.create_topic("reference", 1)
    builder = StreamsBuilder()
    builder.global_table("reference", Materialized.as_("reference-store"), key_serde=STRING, value_serde=STRING)
    builder.stream("in", key_serde=STRING, value_serde=STRING).to("out")
    app = Instance(cluster, builder.build(), streams_config(tmp_path))
    request = StateQueryRequest.in_store("reference-store").with_query(KeyQuery.with_key("a"))
    with pytest.raises(StreamsNotStartedError):
        await app.streams.query(request)
    with pytest.raises(StreamsNotStartedError):
        app.streams.query_sync(request)
    await app.start()
    try:
        result = await app.streams.query(request)
        assert result.get_partition_results() == {}
        global_result = result.get_global_result()
        assert global_result is not None and global_result.get_failure_reason() is FailureReason.UNKNOWN_QUERY_TYPE
    finally:
        await app.close()
    with pytest.raises(InvalidStateStoreError, match="NOT_RUNNING"):
        await app.streams.query(request)


async def test_while_rebalancing_a_copy_answers_unless_a_running_active_one_is_required(tmp_path: Path) -> None:
    """As Kafka's query(): a rebalancing instance still answers from the copies it has, except under
    require_active() (then NOT_ACTIVE); the REST layer's stale reads rely on it, its plain ones on the refusal."""
    cluster = cluster_with(1)
    async with running(cluster, counting_topology(), streams_config(tmp_path)) as app:
        await counted(cluster, app, "a a")
        streams = app.streams
        streams._lifecycle.state = KafkaStreams.State.REBALANCING  # what a rebalance sets, without the rebalance's timing
        try:
            plain = (await streams.query(in_counts(KeyQuery.with_key("a")).with_partitions({0}))).get_partition_results()[0]
            assert plain.is_success() and plain.get_result() == 2
            required = await streams.query(in_counts(KeyQuery.with_key("a")).with_partitions({0}).require_active())
            assert required.get_partition_results()[0].get_failure_reason() is FailureReason.NOT_ACTIVE
        finally:
            streams._lifecycle.state = KafkaStreams.State.RUNNING
