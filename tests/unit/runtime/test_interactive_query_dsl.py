"""IQv2 of the DSL's stores on the fake cluster: a KTable's timestamped store, window, session and versioned stores."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from streams_core import (
    FailureReason,
    Grouped,
    KeyQuery,
    Materialized,
    MultiVersionedKeyQuery,
    RangeQuery,
    Serdes,
    SessionWindows,
    StateQueryRequest,
    StateQueryResult,
    Stores,
    StreamsBuilder,
    TimestampedKeyQuery,
    TimestampedRangeQuery,
    TimeWindows,
    Topology,
    VersionedKeyQuery,
    VersionedRecord,
    WindowKeyQuery,
    WindowRangeQuery,
)
from streams_core.testing import FakeKafkaCluster

from .harness import eventually, running, streams_config

S = Serdes.String()


def topology() -> Topology:
    """Counts of "in" per key in a table ("table"), 10 ms windows ("windows") and 5 ms sessions
    ("sessions"); "versions" a versioned table of "vin"."""
    builder = StreamsBuilder()
    grouped = builder.stream("in", key_serde=S, value_serde=S).group_by_key(Grouped.with_(S, S))
    grouped.count(Materialized.as_("table"))
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).count(Materialized.as_("windows").with_retention(60_000))
    grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5)).count(Materialized.as_("sessions"))
    builder.table("vin", Materialized.as_(Stores.persistent_versioned_key_value_store("versions", 1_000)), key_serde=S, value_serde=S)
    built: Topology = builder.build()
    return built


def only(result: StateQueryResult[Any]) -> Any:
    answers = list(result.get_partition_results().values())
    assert len(answers) == 1, answers
    return answers[0]


async def test_the_dsl_stores_answer_their_queries(tmp_path: Path) -> None:
    cluster = FakeKafkaCluster()
    for topic in ("in", "vin"):
        cluster.create_topic(topic, 1)
    for key, timestamp in (("a", 1), ("b", 2), ("a", 3), ("a", 12), ("b", 30)):
        cluster.produce("in", key, "x", timestamp=timestamp)
    for value, timestamp in (("v1", 100), ("v2", 200), ("v3", 300)):
        cluster.produce("vin", "k", value, timestamp=timestamp)
    async with running(cluster, topology(), streams_config(tmp_path)) as app:
        await eventually(lambda: app.streams.store("table").get("b") == 2, what="the counts")

        async def ask(store: str, query: Any) -> Any:
            return only(await app.streams.query(StateQueryRequest.in_store(store).with_query(query)))

        for _ in range(300):  # the versioned table reads its topic as the counts do theirs
            if (await ask("versions", VersionedKeyQuery.with_key("k"))).get_result() == VersionedRecord("v3", 300, None):
                break
            await asyncio.sleep(0.01)

        # a KTable's store keeps timestamps: plain and timestamped queries
        assert (await ask("table", KeyQuery.with_key("a"))).get_result() == 3
        stamped = (await ask("table", TimestampedKeyQuery.with_key("a"))).get_result()
        assert (stamped.value, stamped.timestamp) == (3, 12)
        assert [(kv.key, kv.value) for kv in (await ask("table", RangeQuery.with_no_bounds())).get_result()] == [("a", 3), ("b", 2)]
        ranged = (await ask("table", TimestampedRangeQuery.with_no_bounds().with_descending_keys())).get_result()
        assert [(kv.key, kv.value.value, kv.value.timestamp) for kv in ranged] == [("b", 2, 30), ("a", 3, 12)]

        # windows of a key by start time; every key's windows in a start range
        fetched = (await ask("windows", WindowKeyQuery.with_key_and_window_start_range("a", 0, 10))).get_result()
        assert [(kv.key, kv.value) for kv in fetched] == [(0, 2), (10, 1)]
        all_windows = (await ask("windows", WindowRangeQuery.with_window_start_range(0, 0))).get_result()
        assert [(kv.key.key, kv.key.window.start, kv.value) for kv in all_windows] == [("a", 0, 2), ("b", 0, 1)]
        not_for_windows = await ask("windows", WindowRangeQuery.with_key("a"))
        assert not_for_windows.get_failure_reason() is FailureReason.UNKNOWN_QUERY_TYPE

        # a key's sessions
        sessions = (await ask("sessions", WindowRangeQuery.with_key("a"))).get_result()
        assert [(kv.key.window.start, kv.key.window.end, kv.value) for kv in sessions] == [(1, 3, 2), (12, 12, 1)]
        assert (await ask("sessions", KeyQuery.with_key("a"))).get_failure_reason() is FailureReason.UNKNOWN_QUERY_TYPE

        # a versioned table: the version as of a time, and the versions over a range
        assert (await ask("versions", VersionedKeyQuery.with_key("k"))).get_result() == VersionedRecord("v3", 300, None)
        assert (await ask("versions", VersionedKeyQuery.with_key("k").as_of(250))).get_result() == VersionedRecord("v2", 200, 300)
        assert (await ask("versions", VersionedKeyQuery.with_key("k").as_of(50))).get_result() is None
        newest_first = (await ask("versions", MultiVersionedKeyQuery.with_key("k").from_time(150).to_time(250))).get_result()
        assert list(newest_first) == [VersionedRecord("v2", 200, 300), VersionedRecord("v1", 100, 200)]
        ascending = MultiVersionedKeyQuery.with_key("k").from_time(200).with_ascending_timestamps()
        assert [r.value for r in (await ask("versions", ascending)).get_result()] == ["v2", "v3"]
        assert (await ask("versions", KeyQuery.with_key("k"))).get_failure_reason() is FailureReason.UNKNOWN_QUERY_TYPE
        assert (await ask("table", VersionedKeyQuery.with_key("a"))).get_failure_reason() is FailureReason.UNKNOWN_QUERY_TYPE
