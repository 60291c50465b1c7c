"""Versioned tables (KIP-889/914) and the stream-table join grace period (KIP-923), after Kafka
Streams' KStreamKTableJoinTest (shouldDelayJoinByGracePeriod, shouldHandleLateJoinsWithGracePeriod)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from streams_core import (
    Consumed,
    Joined,
    Materialized,
    Serdes,
    Stores,
    StreamsBuilder,
    TestRecord,
    TopologyTestDriver,
)
from streams_core.state.versioned_key_value_store import PUT_RETURN_CODE_NOT_PUT, VersionedRecord

INT, S = Serdes.Integer(), Serdes.String()
CONFIG = {"application.id": "versioned", "statestore.cache.max.bytes": 0}


def plus(left: Any, right: Any) -> str:
    return f"{left}+{right}"


def grace_join(grace_ms: int, filtered: bool = False) -> TopologyTestDriver:
    """KStreamKTableJoinTest.makeJoin: Java's five-argument `Joined.with(..., "Grace", grace)`;
    `filtered` joins a filter of the table instead (it inherits the versioned store)."""
    builder = StreamsBuilder()
    stream = builder.stream("streamTopic", Consumed.with_(INT, S))
    table = builder.table("tableTopic2", Consumed.with_(INT, S),
                          Materialized.as_(Stores.persistent_versioned_key_value_store("V-grace", 5 * 60_000)))  # fmt: skip
    if filtered:
        table = table.filter(lambda key, value: True)
    stream.join(table, plus, Joined.with_(INT, S, S, "Grace", grace_ms)).to("out")
    return TopologyTestDriver(builder.build(), CONFIG)


def push(driver: TopologyTestDriver, topic: str, count: int, prefix: str, timestamps: Any) -> None:
    source = driver.create_input_topic(topic, INT, S)
    for i in range(count):
        source.pipe_input(i, f"{prefix}{i}", timestamps(i))


@pytest.mark.parametrize("filtered", [False, True], ids=["table", "filter-of-table"])
def test_stream_records_wait_for_the_grace_period_and_join_as_of_their_time(filtered: bool) -> None:
    """KStreamKTableJoinTest.shouldDelayJoinByGracePeriod; the same through a filter that keeps all."""
    with grace_join(2, filtered) as driver:
        out = driver.create_output_topic("out", INT, S)
        push(driver, "tableTopic2", 4, "Y", lambda i: 0)
        assert out.read_records_to_list() == []
        push(driver, "streamTopic", 4, "X", lambda i: i)
        assert out.read_records_to_list() == [TestRecord(0, "X0+Y0", 0), TestRecord(1, "X1+Y1", 1)]
        push(driver, "tableTopic2", 4, "YY", lambda i: 0)
        assert out.read_records_to_list() == []
        push(driver, "streamTopic", 4, "X", lambda i: i)
        assert out.read_records_to_list() == [TestRecord(0, "X0+YY0", 0), TestRecord(1, "X1+YY1", 1)]
        driver.create_input_topic("streamTopic", INT, S).pipe_input(5, "test", 7)
        assert out.read_records_to_list() == [TestRecord(2, "X2+YY2", 2), TestRecord(2, "X2+YY2", 2),
                                              TestRecord(3, "X3+YY3", 3), TestRecord(3, "X3+YY3", 3)]  # fmt: skip
        push(driver, "tableTopic2", 4, "YYY", lambda i: 0)
        assert out.read_records_to_list() == []


def test_a_record_later_than_the_grace_period_joins_at_once() -> None:
    with grace_join(2) as driver:
        out = driver.create_output_topic("out", INT, S)
        push(driver, "tableTopic2", 4, "Y", lambda i: 0)
        push(driver, "streamTopic", 4, "X", lambda i: i)
        assert out.read_records_to_list() == [TestRecord(0, "X0+Y0", 0), TestRecord(1, "X1+Y1", 1)]
        push(driver, "streamTopic", 1, "X", lambda i: i)
        assert out.read_records_to_list() == [TestRecord(0, "X0+Y0", 0)]


def test_a_versioned_table_is_read_as_of_the_stream_records_time() -> None:
    builder = StreamsBuilder()
    table = builder.table("t", Consumed.with_(S, S), Materialized.as_(Stores.persistent_versioned_key_value_store("v", 100)))
    builder.stream("s", Consumed.with_(S, S)).left_join(table, plus).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        t, s = driver.create_input_topic("t", S, S), driver.create_input_topic("s", S, S)
        t.pipe_input("k", "v10", 10)
        t.pipe_input("k", "v20", 20)
        t.pipe_input("k", "v15", 15)  # out of order: history only
        for timestamp in (5, 12, 17, 25):
            s.pipe_input("k", f"at{timestamp}", timestamp)
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [
            TestRecord("k", "at5+None", 5), TestRecord("k", "at12+v10", 12), TestRecord("k", "at17+v15", 17),
            TestRecord("k", "at25+v20", 25)]  # fmt: skip
        store = driver.get_state_store("v")
        assert store.get("k") == VersionedRecord("v20", 20, None)
        assert store.get("k", 16) == VersionedRecord("v15", 15, 20)


def test_filters_and_map_values_of_a_versioned_table_are_read_as_of_the_stream_records_time() -> None:
    """They inherit the versioned store and read it as of a time, as Java's KTableFilter /
    KTableMapValues value getters (`isVersioned()` of their parent)."""
    builder = StreamsBuilder()
    table = builder.table("t", Consumed.with_(S, S), Materialized.as_(Stores.persistent_versioned_key_value_store("v", 100)))
    stream = builder.stream("s", Consumed.with_(S, S))
    stream.left_join(table.filter(lambda k, v: v != "v15"), plus).to("filtered")
    stream.left_join(table.map_values(str.upper), plus).to("mapped")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        t, s = driver.create_input_topic("t", S, S), driver.create_input_topic("s", S, S)
        for value, timestamp in (("v10", 10), ("v20", 20), ("v15", 15)):
            t.pipe_input("k", value, timestamp)
        for timestamp in (5, 12, 17, 25):
            s.pipe_input("k", f"at{timestamp}", timestamp)
        assert driver.create_output_topic("filtered", S, S).read_records_to_list() == [
            TestRecord("k", "at5+None", 5), TestRecord("k", "at12+v10", 12), TestRecord("k", "at17+None", 17),
            TestRecord("k", "at25+v20", 25)]  # fmt: skip
        assert driver.create_output_topic("mapped", S, S).read_records_to_list() == [
            TestRecord("k", "at5+None", 5), TestRecord("k", "at12+V10", 12), TestRecord("k", "at17+V15", 17),
            TestRecord("k", "at25+V20", 25)]  # fmt: skip


def test_versioned_table_forwards_only_latest_updates() -> None:
    builder = StreamsBuilder()
    (builder.table("t", Consumed.with_(S, S), Materialized.as_(Stores.persistent_versioned_key_value_store("v", 100)))
     .to_stream().to("out"))  # fmt: skip
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        t = driver.create_input_topic("t", S, S)
        t.pipe_input("k", "a", 10)
        t.pipe_input("k", "old", 5)
        t.pipe_input("k", None, 20)
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [
            TestRecord("k", "a", 10), TestRecord("k", None, 20)]  # fmt: skip
        store = driver.get_state_store("v")
        assert store.get("k") is None
        assert store.get("k", 7) == VersionedRecord("old", 5, 10)
        assert store.put("k", "too-old", 20 - 100 - 1) == PUT_RETURN_CODE_NOT_PUT
        assert store.get("k", 20 - 101) is None  # older than the history retention


NOT_VERSIONED = r"^KTable must be versioned to use a grace period in a stream table join\.$"
RETENTION = r"^History retention must be at least grace period\.$"


def test_joined_with_takes_javas_five_arguments() -> None:
    joined = Joined.with_(S, INT, S, "first-join", timedelta(milliseconds=6))
    assert joined == Joined(S, INT, S, "first-join", 6)
    assert joined == Joined.as_("first-join").with_key_serde(S).with_value_serde(INT).with_other_value_serde(
        S).with_grace_period(6)  # fmt: skip
    assert Joined.with_(S, S, S, "j").grace_period_ms is None


def join_with_grace(store: Any, grace: Any, filtered: bool) -> StreamsBuilder:
    """The join of KStreamKTableJoinTest's grace period checks: a stream of "topic" with the table
    of "topic2" (in `store`, else unmaterialised), or with a filter of it that inherits its store."""
    builder = StreamsBuilder()
    stream_a = builder.stream("topic", Consumed.with_(S, S))
    if store is None:
        table_b = builder.table("topic2", Consumed.with_(S, S))
    else:
        table_b = builder.table("topic2", Consumed.with_(S, S), Materialized.as_(store))
    if filtered:
        table_b = table_b.filter(lambda k, v: True)
    stream_a.join(table_b, plus, Joined.with_(S, S, S, "first-join", grace)).to("out-one")
    return builder


def test_a_grace_period_needs_a_versioned_table() -> None:
    """KStreamKTableJoinTest.shouldFailIfTableIsNotVersioned: rejected at the join."""
    with pytest.raises(ValueError, match=NOT_VERSIONED):
        join_with_grace(None, 6, filtered=False)


def test_a_grace_period_over_an_inherited_store_that_is_not_versioned() -> None:
    """KStreamKTableJoinTest.shouldFailIfTableIsNotVersionedButMaterializationIsInherited: the join
    is accepted, the build is not."""
    builder = join_with_grace(Stores.in_memory_key_value_store("tableB"), 6, filtered=True)
    with pytest.raises(ValueError, match=NOT_VERSIONED):
        builder.build()


def test_a_grace_period_over_an_inherited_versioned_store() -> None:
    """KStreamKTableJoinTest.shouldNotFailIfTableIsVersionedButMaterializationIsInherited."""
    join_with_grace(Stores.persistent_versioned_key_value_store("tableB", 5 * 60_000), 6, filtered=True).build()


def test_the_history_retention_must_cover_the_grace_period() -> None:
    """KStreamKTableJoinTest.shouldFailIfGracePeriodIsLongerThanHistoryRetention: rejected at build."""
    store = Stores.persistent_versioned_key_value_store("tableB", 5 * 60_000)
    builder = join_with_grace(store, timedelta(minutes=6), filtered=False)
    with pytest.raises(ValueError, match=RETENTION):
        builder.build()


def test_the_inherited_history_retention_must_cover_the_grace_period() -> None:
    """KStreamKTableJoinTest.shouldFailIfGracePeriodIsLongerThanHistoryRetentionAndInheritedStore
    (that reason, not "not versioned")."""
    builder = join_with_grace(Stores.persistent_versioned_key_value_store("V-grace", 0), 6, filtered=True)
    with pytest.raises(ValueError, match=RETENTION):
        builder.build()
