"""KTable-KTable joins (inner, left, outer) with updates and deletes on both sides."""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import KeyValue, Materialized, Serdes, StreamsBuilder, TestRecord, TopologyTestDriver

S = Serdes.String()
CONFIG = {"application.id": "tjoin", "statestore.cache.max.bytes": 0}

# (side, key, value, timestamp)
UPDATES = [("L", "a", "1", 1), ("R", "a", "x", 2), ("L", "a", "2", 3), ("R", "a", "y", 4), ("L", "a", None, 5),
           ("R", "a", None, 6), ("L", "b", "1", 7)]  # fmt: skip


def joined(
    kind: str, materialized: Materialized | None = None, config: dict[str, Any] = CONFIG
) -> tuple[list[TestRecord[Any, Any]], TopologyTestDriver]:
    builder = StreamsBuilder()
    left = builder.table("left", key_serde=S, value_serde=S)
    right = builder.table("right", key_serde=S, value_serde=S)
    getattr(left, kind)(right, lambda lv, rv: f"{lv}+{rv}", materialized=materialized).to_stream().to("out", value_serde=S)
    driver = TopologyTestDriver(builder.build(), config)
    topics = {"L": driver.create_input_topic("left", S, S), "R": driver.create_input_topic("right", S, S)}
    for side, key, value, timestamp in UPDATES:
        topics[side].pipe_input(key, value, timestamp)
    return driver.create_output_topic("out", S, S).read_records_to_list(), driver


def test_inner_join() -> None:
    out, driver = joined("join", Materialized.as_("joined"))
    with driver:
        assert out == [TestRecord("a", "1+x", 2), TestRecord("a", "2+x", 3), TestRecord("a", "2+y", 4),
                       TestRecord("a", None, 5)]  # fmt: skip
        assert list(driver.get_key_value_store("joined").all()) == []


def test_left_join() -> None:
    out, driver = joined("left_join")
    driver.close()
    assert out == [TestRecord("a", "1+None", 1), TestRecord("a", "1+x", 2), TestRecord("a", "2+x", 3),
                   TestRecord("a", "2+y", 4), TestRecord("a", None, 5), TestRecord("b", "1+None", 7)]  # fmt: skip


def test_outer_join() -> None:
    out, driver = joined("outer_join", Materialized.as_("outer"))
    with driver:
        assert out == [TestRecord("a", "1+None", 1), TestRecord("a", "1+x", 2), TestRecord("a", "2+x", 3),
                       TestRecord("a", "2+y", 4), TestRecord("a", "None+y", 5), TestRecord("a", None, 6),
                       TestRecord("b", "1+None", 7)]  # fmt: skip
        assert list(driver.get_key_value_store("outer").all()) == [KeyValue("b", "1+None")]


def test_join_of_computed_tables_uses_value_getters() -> None:
    builder = StreamsBuilder()
    left = builder.table("left", key_serde=S, value_serde=S).filter(lambda k, v: v != "skip")
    right = builder.table("right", key_serde=S, value_serde=S).map_values(str.upper)
    left.join(right, lambda lv, rv: f"{lv}+{rv}", named="j").to_stream().to("out", value_serde=S)
    topology = builder.build()
    with TopologyTestDriver(topology, CONFIG) as driver:
        lt, rt = driver.create_input_topic("left", S, S), driver.create_input_topic("right", S, S)
        lt.pipe_input("a", "skip", 1)
        rt.pipe_input("a", "x", 2)
        lt.pipe_input("a", "1", 3)
        rt.pipe_input("a", "y", 4)
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [
            TestRecord("a", "1+X", 3), TestRecord("a", "1+Y", 4)]  # fmt: skip
    text = str(topology.describe())
    assert "Processor: j-join-this (stores: [right-STATE-STORE-0000000004])" in text
    assert "Processor: j (stores: [])" in text
    assert topology.internal_topology_builder.copartition_groups() == [frozenset({"left", "right"})]


def test_chained_join_reads_through_an_unmaterialised_join() -> None:
    builder = StreamsBuilder()
    a, b, c = (builder.table(t, key_serde=S, value_serde=S) for t in ("a", "b", "c"))
    a.join(b, lambda x, y: x + y).join(c, lambda xy, z: xy + z).to_stream().to("out", value_serde=S)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        for topic, value, ts in (("a", "1", 1), ("b", "2", 2), ("c", "3", 3), ("a", "4", 4)):
            driver.create_input_topic(topic, S, S).pipe_input("k", value, ts)
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [
            TestRecord("k", "123", 3), TestRecord("k", "423", 4)]  # fmt: skip


def test_a_suppressed_table_joins_with_the_values_it_has_emitted() -> None:
    """Java's KTableSuppressProcessorSupplier.view(): a key waiting in the buffer reads as its prior value."""
    from streams_core import BufferConfig, Suppressed

    builder = StreamsBuilder()
    table = builder.table("t", key_serde=S, value_serde=S)
    suppressed = table.suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
    builder.stream("s", key_serde=S, value_serde=S).left_join(suppressed, lambda a, b: f"{a}+{b}").to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        t, stream = driver.create_input_topic("t", S, S), driver.create_input_topic("s", S, S)
        t.pipe_input("k", "v1", 0)  # buffered: the suppressed table has no value for k yet
        stream.pipe_input("k", "x", 1)
        t.pipe_input("other", "o", 20)  # stream time 20: k's v1 is emitted
        stream.pipe_input("k", "y", 21)
        t.pipe_input("k", "v2", 22)  # buffered again: k still reads as v1
        stream.pipe_input("k", "z", 23)
        assert driver.create_output_topic("out", S, S).read_records_to_list() == [
            TestRecord("k", "x+None", 1), TestRecord("k", "y+v1", 21), TestRecord("k", "z+v1", 23)]  # fmt: skip


@pytest.mark.parametrize("kind", ["join", "left_join", "outer_join"])
def test_caching_gives_the_same_results_for_one_update_per_commit(kind: str) -> None:
    uncached, driver = joined(kind, Materialized.as_("j"))
    driver.close()
    cached, driver = joined(kind, Materialized.as_("j"), {"application.id": "tjoin"})
    driver.close()
    assert cached == uncached
