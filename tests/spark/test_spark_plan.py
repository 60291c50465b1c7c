"""SparkRunner.plan(): what compiles to which stage, and what is refused at plan time (no broker, no Spark)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.wordcount import build_topology
from streams_core import (
    BufferConfig,
    FixedKeyProcessor,
    JoinWindows,
    Materialized,
    Processor,
    PunctuationType,
    Record,
    Serdes,
    SessionWindows,
    SlidingWindows,
    Stores,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Topology,
)
from streams_core.spark import SparkRunner, UnsupportedOnSparkError

CONFIG = {"application.id": "plan-test", "bootstrap.servers": "127.0.0.1:9"}


def plan_of(topology: Topology) -> Any:
    return SparkRunner(topology, CONFIG).plan()


class Upper(Processor):
    def init(self, context: Any) -> None:
        self.context = context

    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(Record(record.key, record.value.upper(), record.timestamp))


def words() -> Any:
    builder = StreamsBuilder()
    grouped = builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String()).group_by_key()
    return builder, grouped


def test_word_count_compiles_to_one_query_with_sparks_own_count() -> None:
    plan = plan_of(build_topology("lines", "counts", windowed=False))
    (query,) = plan.queries
    assert (query.stage, query.source_topics, query.sink_topics) == ("native", ("lines",), ("counts",))
    assert plan.internal_topics == (), "Spark's shuffle replaces the repartition topic: it is not created"
    how = dict(query.operators())
    assert how["KSTREAM-FLATMAPVALUES-0000000001"].startswith("python: fused stateless chain")
    assert how["KSTREAM-KEY-SELECT-0000000002"].startswith("python: fused stateless chain")
    assert how["word-count-repartition-sink"].startswith("native: Spark's shuffle")
    assert how["KSTREAM-AGGREGATE-0000000003"].startswith("native: groupBy(key).sum()")
    assert "KSTREAM-AGGREGATE-0000000003: native" in plan.describe()


def test_counts_that_spark_cannot_count_natively_keep_the_python_stages() -> None:
    uncached = StreamsBuilder()  # a store without caching: every update is emitted
    uncached.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String()).group_by(lambda k, v: v).count(
        Materialized.as_("c").with_caching_disabled()).to_stream().to("out")
    mapped = StreamsBuilder()  # the count's output mapped by a user function
    mapped.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String()).group_by_key().count(
        ).to_stream().map_values(str).to("out")
    custom = StreamsBuilder()  # a Processor API processor in the chain
    custom.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String()).process(Upper).group_by_key().count(
        ).to_stream().to("out", value_serde=Serdes.Long())
    for builder in (uncached, mapped, custom):
        assert "native" not in [q.stage for q in plan_of(builder.build()).queries]
    direct = StreamsBuilder()  # group_by_key after a chain: one sub-topology, counted natively
    direct.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String()).filter(lambda k, v: bool(v)).group_by_key(
        ).count().to_stream().to("out", value_serde=Serdes.Long())
    (query,) = plan_of(direct.build()).queries
    assert query.stage == "native" and query.native is not None and query.native.bypassed_topic is None


def test_word_count_without_caching_is_a_stateless_query_then_a_keyed_query() -> None:
    plan = SparkRunner(build_topology("lines", "counts", windowed=False), {**CONFIG, "statestore.cache.max.bytes": 0}).plan()
    first, second = plan.queries
    assert (first.stage, first.source_topics, first.sink_topics) == ("stateless", ("lines",), ("plan-test-word-count-repartition",))
    assert (second.stage, second.source_topics, second.sink_topics, second.after) == (
        "keyed", ("plan-test-word-count-repartition",), ("counts",), (0,))
    assert second.stores == ("word-count",)
    assert plan.internal_topics == ("plan-test-word-count-repartition",)
    text = plan.describe()
    assert "mapInArrow" in text and "transformWithState" in text and "Query 1: sub-topology 1, after 0" in text


def test_queries_run_writers_first_even_when_declared_later() -> None:
    builder = StreamsBuilder()
    builder.stream("mid", key_serde=Serdes.String(), value_serde=Serdes.String()).to("out")
    builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String()).map_values(str.upper).to("mid")
    plan = plan_of(builder.build())
    assert [q.source_topics for q in plan.queries] == [("in",), ("mid",)]


def test_a_stateless_custom_processor_is_fused() -> None:
    builder = StreamsBuilder()
    builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String()).process(Upper).to("out")
    (query,) = plan_of(builder.build()).queries
    assert query.stage == "stateless"


@pytest.mark.parametrize(
    "windows",
    [
        TimeWindows.of_size_and_grace(1000, 100),
        TimeWindows.of_size_and_grace(1000, 100).advance_by(500),
        SlidingWindows.of_time_difference_and_grace(1000, 100),
        SessionWindows.with_inactivity_gap(1000),
    ],
)
def test_windowed_aggregations_run_in_a_task_stage(windows: Any) -> None:
    builder, grouped = words()
    grouped.windowed_by(windows).count()
    (query,) = plan_of(builder.build()).queries
    assert query.stage == "task"
    assert "groupBy(partition).transformWithState" in query.describe()


def test_suppress_runs_in_a_task_stage() -> None:
    builder, grouped = words()
    grouped.count().suppress(Suppressed.until_time_limit(1000, BufferConfig.unbounded()))
    (query,) = plan_of(builder.build()).queries
    assert query.stage == "task"


def test_stream_stream_joins_are_native_and_table_table_joins_run_in_a_task_stage() -> None:
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=Serdes.String(), value_serde=Serdes.String())
    right = builder.stream("right", key_serde=Serdes.String(), value_serde=Serdes.String())
    left.outer_join(right, lambda a, b: f"{a}{b}", JoinWindows.of_time_difference_and_grace(1000, 100)).to("out")
    (query,) = plan_of(builder.build()).queries
    assert query.stage == "native" and query.native is not None and query.native.kind == "stream-join"
    assert query.task_grouped, "its tasks wait for the topic behind"

    builder = StreamsBuilder()
    left_table = builder.table("left", key_serde=Serdes.String(), value_serde=Serdes.String())
    right_table = builder.table("right", key_serde=Serdes.String(), value_serde=Serdes.String())
    left_table.join(right_table, lambda a, b: a + b).to_stream().to("out")
    (query,) = plan_of(builder.build()).queries
    assert query.stage == "task", "two topics: the task waits for the one behind, as Kafka Streams' PartitionGroup"


def test_a_table_regrouping_is_two_keyed_queries() -> None:
    builder = StreamsBuilder()
    table = builder.table("in", key_serde=Serdes.String(), value_serde=Serdes.String())
    table.group_by(lambda k, v: (v, k)).count().to_stream().to("out")
    assert [q.stage for q in plan_of(builder.build()).queries] == ["keyed", "keyed"]


@pytest.mark.parametrize("kind", ["join", "left_join"])
def test_foreign_key_joins_are_two_task_queries_in_a_cycle_of_rounds(kind: str) -> None:
    """The left table's sub-topology reads back the responses of the right table's: it runs first,
    and again after it (tests/spark/test_fk_join.py runs both)."""
    builder = StreamsBuilder()
    left = builder.table("left", key_serde=Serdes.String(), value_serde=Serdes.String())
    right = builder.table("right", key_serde=Serdes.String(), value_serde=Serdes.String())
    getattr(left, kind)(right, lambda v: v, lambda a, b: a + b).to_stream().to("out")
    plan = plan_of(builder.build())
    first, second = plan.queries
    assert (first.stage, second.stage) == ("task", "task")
    assert "foreign-key extractor needs the whole task" in first.why and "foreign-key extractor" in second.why
    assert first.feedback == (1,) and second.after == (0,) and plan.rounds == plan.queries
    assert first.feedback_topics == tuple(t for t in second.sink_topics if "SUBSCRIPTION-RESPONSE" in t)


def test_a_cycle_of_repartition_topics_without_a_feedback_reader_is_still_refused() -> None:
    topology = (Topology()
                .add_source("A", "t1").add_sink("TO-T2", "t2", "A")
                .add_source("B", "t2").add_sink("TO-T1", "t1", "B"))  # fmt: skip
    with pytest.raises(UnsupportedOnSparkError, match="cycle"):
        plan_of(topology)


def test_versioned_tables_run_in_the_task_stage() -> None:
    builder = StreamsBuilder()
    store = Stores.persistent_versioned_key_value_store("versions", 10_000)
    builder.table("in", Materialized.as_(store).with_key_serde(Serdes.String()).with_value_serde(Serdes.String()))
    (query,) = plan_of(builder.build()).queries
    assert query.stage == "task"
    assert query.why.startswith("a versioned table (persistent_versioned_key_value_store) needs the whole task")


def test_a_global_table_join_is_stateless_but_refused_in_continuous_runs() -> None:
    builder = StreamsBuilder()
    table = builder.global_table("dims", key_serde=Serdes.String(), value_serde=Serdes.String())
    stream = builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String())
    stream.join(table, lambda k, v: k, lambda a, b: a + b).to("out")
    runner = SparkRunner(builder.build(), CONFIG)
    (query,) = runner.plan().queries
    assert query.stage == "stateless"
    with pytest.raises(UnsupportedOnSparkError, match="GlobalKTable"):
        runner.run("continuous")


def test_pattern_sources_are_read_as_matched_at_start_but_not_beside_a_repartition_topic() -> None:
    builder = StreamsBuilder()
    builder.stream(re.compile("in-.*"), key_serde=Serdes.String(), value_serde=Serdes.String()).to("out")
    (query,) = plan_of(builder.build()).queries
    assert query.source_patterns == ("in-.*",)
    assert "pattern 'in-.*'" in query.describe()

    builder = StreamsBuilder()
    named = builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String()).select_key(lambda k, v: v)
    by_value = named.repartition()
    pattern = builder.stream(re.compile("other-.*"), key_serde=Serdes.String(), value_serde=Serdes.String())
    by_value.merge(pattern).to("out")
    with pytest.raises(UnsupportedOnSparkError, match="pattern"):
        plan_of(builder.build())


def test_custom_partitioners_are_compiled_but_not_with_a_topic_extractor() -> None:
    builder = StreamsBuilder()
    builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String()).to(
        "out", partitioner=lambda topic, key, value, n: 0)
    (query,) = plan_of(builder.build()).queries
    assert query.partitioned_sinks == ("out",)
    assert "out by its custom partitioner" in query.describe()

    builder = StreamsBuilder()
    builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String()).to(
        lambda key, value, context: f"out-{key}", partitioner=lambda topic, key, value, n: 0)
    with pytest.raises(UnsupportedOnSparkError, match="custom partitioner"):
        plan_of(builder.build())


def test_stateful_custom_processors_run_in_the_task_stage() -> None:
    class Summer(Processor):
        def init(self, context: Any) -> None:
            self.store = context.get_state_store("sums")

        def process(self, record: Record[Any, Any]) -> None:
            self.store.put(record.key, record.value)

    topology = (Topology()
                .add_source("SOURCE", "in", key_serde=Serdes.String(), value_serde=Serdes.Long())
                .add_processor("SUM", Summer, "SOURCE")
                .add_state_store(Stores.key_value_store_builder(
                    Stores.persistent_key_value_store("sums"), Serdes.String(), Serdes.Long()), "SUM"))
    (query,) = plan_of(topology).queries
    assert (query.stage, query.stores) == ("task", ("sums",))
    assert query.why == "process(Summer) with state stores needs the whole task (its stream time, or its stores across keys)"
    assert dict(query.operators())["SUM"] == "task stage (python, per task); writes what its process() and its punctuations forward"
    assert "  run    groupBy(partition).transformWithStateInPandas (task Python stage" in plan_of(topology).describe()


def test_process_values_runs_stateless_or_in_the_task_stage_with_stores() -> None:
    from tests.spark.processor_api import dsl_topology

    class Shout(FixedKeyProcessor[Any, Any, Any]):
        def init(self, context: Any) -> None:
            self.context = context

        def process(self, record: Any) -> None:
            self.context.forward(record.with_value(record.value.upper()))

    builder = StreamsBuilder()
    builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String()).process_values(Shout).to("out")
    assert [q.stage for q in plan_of(builder.build()).queries] == ["stateless"]
    (query,) = plan_of(dsl_topology("in", "out")).queries
    assert query.stage == "task" and query.stores == ("previous", "tallies")
    assert query.why.startswith("process_values(Previous) with state stores needs the whole task")


class Ticker(Processor[Any, Any, Any, Any]):
    def __init__(self, punctuation_type: PunctuationType = PunctuationType.STREAM_TIME) -> None:
        self.punctuation_type = punctuation_type

    def init(self, context: Any) -> None:
        context.schedule(1000, self.punctuation_type, lambda ts: None)

    def process(self, record: Record[Any, Any]) -> None:
        pass


def test_a_stream_time_punctuation_moves_its_sub_topology_to_the_task_stage() -> None:
    topology = (Topology()
                .add_source("SOURCE", "in", key_serde=Serdes.String(), value_serde=Serdes.String())
                .add_processor("TICK", Ticker, "SOURCE"))
    (query,) = plan_of(topology).queries
    assert query.stage == "task" and query.spec.task_stores
    assert query.why.startswith("Ticker.schedule(STREAM_TIME) needs the whole task")


def test_a_wall_clock_punctuation_moves_its_sub_topology_to_the_task_stage_with_timers() -> None:
    topology = (Topology()
                .add_source("SOURCE", "in", key_serde=Serdes.String(), value_serde=Serdes.String())
                .add_processor("TICK", lambda: Ticker(PunctuationType.WALL_CLOCK_TIME), "SOURCE"))
    (query,) = plan_of(topology).queries
    assert query.stage == "task" and query.wall_clock_ms == 1000
    assert query.why.startswith("Ticker.schedule(WALL_CLOCK_TIME) needs the whole task")
    (stream_time,) = plan_of(Topology().add_source("SOURCE", "in").add_processor("TICK", Ticker, "SOURCE")).queries
    assert stream_time.wall_clock_ms is None, "no timers without a wall-clock punctuation"


def test_a_stream_table_join_runs_in_the_task_stage() -> None:
    builder = StreamsBuilder()
    table = builder.table("users", key_serde=Serdes.String(), value_serde=Serdes.String(),
                          materialized=Materialized.as_("users"))
    clicks = builder.stream("clicks", key_serde=Serdes.String(), value_serde=Serdes.String())
    clicks.join(table, lambda click, user: f"{user}:{click}").to("enriched")
    (query,) = plan_of(builder.build()).queries
    assert query.stage == "task" and query.source_topics == ("clicks", "users")


def _join_then_count(*, left: bool = False, second_output: bool = False, table_mapped: bool = False) -> Topology:
    s = Serdes.String()
    builder = StreamsBuilder()
    table = builder.table("users", key_serde=s, value_serde=s)
    if table_mapped:
        table = table.map_values(str.upper)
    clicks = builder.stream("clicks", key_serde=s, value_serde=s).filter(lambda user, page: page != "/")
    joined = (clicks.left_join if left else clicks.join)(table, lambda page, region: region or "none")
    if second_output:
        joined.to("enriched")
    joined.group_by(lambda user, region: region, key_serde=s, value_serde=s).count().to_stream().to(
        "per-region", key_serde=s, value_serde=Serdes.Long())
    return builder.build()


@pytest.mark.parametrize("left", [False, True])
def test_a_stream_table_join_into_a_count_is_one_native_query(left: bool) -> None:
    plan = plan_of(_join_then_count(left=left))
    (query,) = plan.queries
    assert query.stage == "native" and query.native is not None and query.native.kind == "join-count"
    assert query.source_topics == ("clicks", "users") and query.sink_topics == ("per-region",)
    assert plan.internal_topics == (), "Spark's shuffle replaces the repartition topic"
    notes = operator_notes(query)
    (join,) = [note for name, note in notes.items() if name.startswith("KSTREAM-JOIN") or name.startswith("KSTREAM-LEFTJOIN")]
    assert "joined with the table as of it" in join and "wait for a partition with unread data" in join
    assert query.task_grouped, "its tasks wait for the topic behind"


@pytest.mark.parametrize(("shape", "reason"), [
    ({"second_output": True}, "feeds more than repartition topic"),
    ({"table_mapped": True}, "not read straight from its topic"),
])  # fmt: skip
def test_a_join_into_a_count_that_does_more_keeps_the_task_and_keyed_stages(shape: dict[str, bool], reason: str) -> None:
    queries = plan_of(_join_then_count(**shape)).queries
    assert [q.stage for q in queries] == ["task", "keyed"]
    assert reason in queries[1].not_native


def operator_notes(query: Any) -> dict[str, str]:
    return dict(query.operators())


def test_plan_says_why_a_reduce_beside_another_output_is_not_native_and_what_it_writes() -> None:
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde=Serdes.String(), value_serde=Serdes.Long())
    orders.filter(lambda customer, amount: amount > 100).to("big-orders")
    orders.group_by_key().reduce(lambda a, b: a + b).to_stream().to("totals")
    (query,) = plan_of(builder.build()).queries
    notes = operator_notes(query)
    (reduce,) = query.aggregations
    assert notes[reduce] == (
        "keyed stage (python, per key); not native: the sub-topology also writes big-orders: an output beside the "
        "aggregation's; writes one record per changed key and micro-batch (the record cache per commit)"
    )
    assert "why    its stores are read and written for the record's own key only" in query.describe()


def test_plan_names_the_task_stage_reason_and_the_emission_of_each_stateful_operator() -> None:
    builder = StreamsBuilder()
    table = builder.table("customers", key_serde=Serdes.String(), value_serde=Serdes.String())
    orders = builder.stream("orders", key_serde=Serdes.String(), value_serde=Serdes.String())
    orders.join(table, lambda order, tier: tier).group_by(lambda customer, tier: tier).count(
        Materialized.as_("per-tier").with_caching_disabled()).to_stream().to("tiers", value_serde=Serdes.Long())
    join, count = plan_of(builder.build()).queries
    assert join.why.startswith("it reads 2 topics with state: the task waits for the topic behind")
    notes = operator_notes(join)
    joiner = next(name for name in join.processors if "JOIN" in name)
    assert notes[joiner].startswith("task stage (python, per task); writes one record per stream record that finds its key")
    (aggregate,) = count.aggregations
    assert count.not_native.startswith("caching is off")
    assert notes_for(count, aggregate).endswith("writes one record per update (caching off)")


def notes_for(query: Any, name: str) -> str:
    return operator_notes(query)[name]


def test_windowed_aggregations_say_why_they_need_the_task_stage() -> None:
    builder, grouped = words()
    (grouped.windowed_by(TimeWindows.of_size_with_no_grace(1000)).reduce(lambda a, b: a + b)
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("out"))
    (query,) = plan_of(builder.build()).queries
    (aggregate,) = query.aggregations
    assert query.why.startswith("windowed_by(TimeWindows).aggregate/count/reduce needs the whole task")
    assert "not native: its windowed table feeds more than to_stream() (suppress" in notes_for(query, aggregate)
    assert notes_for(query, aggregate).endswith("writes one record per changed window and micro-batch")


@pytest.mark.parametrize("how", ["aggregate", "reduce"])
def test_windowed_aggregate_and_reduce_are_native_per_task_stages(how: str) -> None:
    builder, grouped = words()
    windowed = grouped.windowed_by(TimeWindows.of_size_and_grace(1000, 100).advance_by(500))
    table = (windowed.reduce(lambda a, b: a + b) if how == "reduce"
             else windowed.aggregate(str, lambda key, value, agg: agg + value, Materialized.with_(value_serde=Serdes.String())))
    table.to_stream().map(lambda windowed, value: (windowed.key, value)).to("out")
    (query,) = plan_of(builder.build()).queries
    assert query.stage == "native" and query.native is not None and query.native.kind == "window-aggregate"
    (aggregate,) = query.aggregations
    notes = dict(query.operators())
    assert notes[aggregate].startswith("vectorized: per task (source partitions) in groupBy(task).transformWithStateInPandas")
    assert "the user's initializer and aggregator (a reduce's reducer) per window" in notes[aggregate]
    assert "the user's functions over windows per key" in query.describe()


@pytest.mark.parametrize("how", ["count", "aggregate", "reduce"])
def test_session_aggregations_are_native_per_task_stages(how: str) -> None:
    builder, grouped = words()
    sessions = grouped.windowed_by(SessionWindows.with_inactivity_gap(1000))
    table = (sessions.count() if how == "count" else sessions.reduce(lambda a, b: a + b) if how == "reduce"
             else sessions.aggregate(str, lambda key, value, agg: agg + value, lambda key, a, b: a + b,
                                     Materialized.with_(value_serde=Serdes.String())))  # fmt: skip
    table.to_stream().map(lambda windowed, value: (windowed.key, value)).to("out")
    (query,) = plan_of(builder.build()).queries
    kind = "session-count" if how == "count" else "session-aggregate"
    assert query.stage == "native" and query.native is not None and query.native.kind == kind
    (aggregate,) = query.aggregations
    notes = dict(query.operators())
    assert notes[aggregate].startswith("vectorized: per task (source partitions) in groupBy(task).transformWithStateInPandas")
    assert ("the user's initializer, session merger and aggregator" in notes[aggregate]) == (how != "count")
    assert "KSTREAM-MAP" in query.describe() and "transformWithStateInPandas" in query.describe()


def test_a_global_stores_processor_may_not_schedule() -> None:
    topology = (Topology()
                .add_global_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("dims"),
                                                                 Serdes.String(), Serdes.String()).with_logging_disabled(),
                                  "GSOURCE", "dims", "GTICK", Ticker, key_serde=Serdes.String(), value_serde=Serdes.String())
                .add_source("SOURCE", "in", key_serde=Serdes.String(), value_serde=Serdes.String())
                .add_processor("UP", Upper, "SOURCE"))  # fmt: skip
    with pytest.raises(UnsupportedOnSparkError, match="global store's processor has no stream time") as caught:
        plan_of(topology)
    assert caught.value.node == "GTICK"
