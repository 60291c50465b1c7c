"""TopologyTestDriver: the KIP-28 example job, chains, topics fed back, punctuation, stores, close."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams_core import (
    DeserializationError,
    KeyValue,
    Processor,
    ProcessorContext,
    PunctuationType,
    Record,
    Serdes,
    Stores,
    StreamsError,
    TaskId,
    TestRecord,
    Topology,
    TopologyError,
    TopologyTestDriver,
    UnknownStateStoreError,
)

STRING, LONG = Serdes.String(), Serdes.Long()


# -- the KIP-28 example job -----------------------------------------------------------------------


class Summer(Processor[str, int, str, int]):
    """KIP-28's job: sums values per key into a store; every second of stream time forwards all sums."""

    def init(self, context: ProcessorContext[str, int]) -> None:
        self.context = context
        self.store = context.get_state_store("sums")
        context.schedule(1000, PunctuationType.STREAM_TIME, self.punctuate)

    def process(self, record: Record[str, int]) -> None:
        self.store.put(record.key, (self.store.get(record.key) or 0) + record.value)

    def punctuate(self, timestamp: int) -> None:
        for key, total in self.store.all():
            self.context.forward(Record(key, total, timestamp))


def kip28_topology(supplier: Any) -> Topology:
    return (
        Topology()
        .add_source("SOURCE", "topic-source", key_serde=STRING, value_serde=LONG)
        .add_processor("PROCESS", Summer, "SOURCE")
        .add_state_store(Stores.key_value_store_builder(supplier, STRING, LONG), "PROCESS")
        .add_sink("SINK", "topic-sink", "PROCESS", key_serde=STRING, value_serde=LONG)
    )


@pytest.mark.parametrize(
    "supplier",
    [Stores.persistent_key_value_store("sums"), Stores.in_memory_key_value_store("sums")],
    ids=["sqlite", "in-memory"],
)
def test_kip28_example_job(supplier: Any) -> None:
    with TopologyTestDriver(kip28_topology(supplier), {"application.id": "kip28"}) as driver:
        source = driver.create_input_topic("topic-source", STRING, LONG)
        sink = driver.create_output_topic("topic-sink", STRING, LONG)
        source.pipe_input("a", 1, timestamp=0)
        source.pipe_input("a", 2, timestamp=1500)
        source.pipe_input("b", 5, timestamp=1700)
        source.pipe_input("b", 1, timestamp=1999)
        source.pipe_input("a", 4, timestamp=2100)
        source.pipe_input("c", 1, timestamp=900)
        source.pipe_input("c", 1, timestamp=5000)
        assert sink.read_records_to_list() == [
            TestRecord("a", 1, 0),
            TestRecord("a", 3, 1500),
            TestRecord("a", 7, 2100),
            TestRecord("b", 6, 2100),
            TestRecord("a", 7, 5000),
            TestRecord("b", 6, 5000),
            TestRecord("c", 2, 5000),
        ]
        store = driver.get_key_value_store("sums")
        assert list(store.all()) == [KeyValue("a", 7), KeyValue("b", 6), KeyValue("c", 2)]
        assert driver.stream_time_ms == 5000


def test_design_example_reads_as_a_table() -> None:
    with TopologyTestDriver(
        kip28_topology(Stores.persistent_key_value_store("sums")), {"application.id": "t"}
    ) as driver:
        source = driver.create_input_topic("topic-source", STRING, LONG)
        sink = driver.create_output_topic("topic-sink", STRING, LONG)
        source.pipe_input("a", 1, timestamp=0)
        source.pipe_input("a", 2, timestamp=1500)
        assert sink.read_key_values_to_map() == {"a": 3}
        assert driver.get_key_value_store("sums").get("a") == 3


# -- a chain: source → filter → aggregate → sink ---------------------------------------------------


class PositiveOnly(Processor[str, int, str, int]):
    def init(self, context: ProcessorContext[str, int]) -> None:
        self.context = context

    def process(self, record: Record[str, int]) -> None:
        if record.value > 0:
            self.context.forward(record)


class RunningTotal(Processor[str, int, str, int]):
    def init(self, context: ProcessorContext[str, int]) -> None:
        self.context = context
        self.totals = context.get_state_store("totals")

    def process(self, record: Record[str, int]) -> None:
        total = (self.totals.get(record.key) or 0) + record.value
        self.totals.put(record.key, total)
        self.context.forward(record.with_value(total))


def test_chain_filter_then_aggregate() -> None:
    topology = (
        Topology()
        .add_source("SOURCE", "amounts", key_serde=STRING, value_serde=LONG)
        .add_processor("FILTER", PositiveOnly, "SOURCE")
        .add_processor("AGGREGATE", RunningTotal, "FILTER")
        .add_state_store(
            Stores.key_value_store_builder(Stores.in_memory_key_value_store("totals"), STRING, LONG), "AGGREGATE"
        )
        .add_sink("SINK", "totals", "AGGREGATE", key_serde=STRING, value_serde=LONG)
    )
    with TopologyTestDriver(topology) as driver:
        amounts = driver.create_input_topic("amounts", STRING, LONG, start_timestamp_ms=100, auto_advance_ms=10)
        totals = driver.create_output_topic("totals", STRING, LONG)
        amounts.pipe_key_value_list([("x", 5), ("y", -3), ("x", 7), ("y", 2), ("x", 0)])
        assert totals.read_records_to_list() == [
            TestRecord("x", 5, 100),
            TestRecord("x", 12, 120),
            TestRecord("y", 2, 130),
        ]
        assert driver.get_key_value_store("totals").get("y") == 2


# -- two sub-topologies joined through a topic -----------------------------------------------------


class ReKey(Processor[str, str, str, str]):
    """Re-keys a "user:item" value by its user, as a repartitioning step would."""

    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context = context

    def process(self, record: Record[str, str]) -> None:
        user, _, item = record.value.partition(":")
        self.context.forward(Record(user, item, record.timestamp, record.headers))


class CountWithTask(Processor[str, str, str, str]):
    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context = context
        self.counts = context.get_state_store("counts")

    def process(self, record: Record[str, str]) -> None:
        count = (self.counts.get(record.key) or 0) + 1
        self.counts.put(record.key, count)
        self.context.forward(record.with_value(f"{count} from {self.context.topic} in task {self.context.task_id}"))


def through_topology() -> Topology:
    return (
        Topology()
        .add_source("SOURCE", "clicks", key_serde=STRING, value_serde=STRING)
        .add_processor("REKEY", ReKey, "SOURCE")
        .add_sink("TO-REPARTITION", "clicks-by-user", "REKEY", key_serde=STRING, value_serde=STRING)
        .add_source("FROM-REPARTITION", "clicks-by-user", key_serde=STRING, value_serde=STRING)
        .add_processor("COUNT", CountWithTask, "FROM-REPARTITION")
        .add_state_store(
            Stores.key_value_store_builder(Stores.persistent_key_value_store("counts"), STRING, LONG), "COUNT"
        )
        .add_sink("OUTPUT", "counts", "COUNT", key_serde=STRING, value_serde=STRING)
    )


def test_records_to_a_topic_a_source_reads_are_fed_back() -> None:
    with TopologyTestDriver(through_topology(), {"application.id": "clicks"}) as driver:
        clicks = driver.create_input_topic("clicks", STRING, STRING)
        repartition = driver.create_output_topic("clicks-by-user", STRING, STRING)
        counts = driver.create_output_topic("counts", STRING, STRING)
        clicks.pipe_record_list(
            [TestRecord(None, "ann:shoes", 10, (("h", b"1"),)), ("k", "bob:hat", 20), ("k", "ann:hat")]
        )
        assert counts.read_records_to_list() == [
            TestRecord("ann", "1 from clicks-by-user in task 1_0", 10, (("h", b"1"),)),
            TestRecord("bob", "1 from clicks-by-user in task 1_0", 20),
            TestRecord("ann", "2 from clicks-by-user in task 1_0", 0),
        ]
        assert repartition.read_key_values_to_list() == [
            KeyValue("ann", "shoes"),
            KeyValue("bob", "hat"),
            KeyValue("ann", "hat"),
        ]
        # as in Java's driver, the changelog of the logged store counts as a produced topic
        assert driver.produced_topic_names() == {"clicks-by-user", "counts", "clicks-counts-changelog"}
        assert set(driver.get_all_state_stores()) == {"counts"}


def test_feedback_order_is_production_order() -> None:
    class Fanout(Processor[str, str, str, str]):
        def init(self, context: ProcessorContext[str, str]) -> None:
            self.context = context

        def process(self, record: Record[str, str]) -> None:
            for suffix in ("1", "2"):
                self.context.forward(record.with_value(record.value + suffix))

    class Echo(Processor[str, str, str, str]):
        def init(self, context: ProcessorContext[str, str]) -> None:
            self.context = context

        def process(self, record: Record[str, str]) -> None:
            self.context.forward(record.with_value(f"{record.value}@{self.context.offset}"))

    topology = (
        Topology()
        .add_source("IN", "in", key_serde=STRING, value_serde=STRING)
        .add_processor("FANOUT", Fanout, "IN")
        .add_sink("MID", "mid", "FANOUT", key_serde=STRING, value_serde=STRING)
        .add_source("MID-IN", "mid", key_serde=STRING, value_serde=STRING)
        .add_processor("ECHO", Echo, "MID-IN")
        .add_sink("OUT", "out", "ECHO", key_serde=STRING, value_serde=STRING)
    )
    with TopologyTestDriver(topology) as driver:
        source = driver.create_input_topic("in", STRING, STRING)
        out = driver.create_output_topic("out", STRING, STRING)
        source.pipe_input("k", "a")
        source.pipe_input("k", "b")
        assert out.read_values_to_list() == ["a1@0", "a2@1", "b1@2", "b2@3"]


# -- wall-clock punctuation -----------------------------------------------------------------------


class Heartbeat(Processor[str, str, str, str]):
    """Every 10 s of wall-clock time forwards the time and how many records it saw."""

    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context = context
        self.seen = 0
        context.schedule(10_000, PunctuationType.WALL_CLOCK_TIME, self.beat)

    def process(self, record: Record[str, str]) -> None:
        self.seen += 1

    def beat(self, now: int) -> None:
        self.context.forward(Record("beat", f"{self.seen} at {self.context.current_system_time_ms()}", now))


def test_wall_clock_punctuation_fires_as_the_clock_advances() -> None:
    topology = (
        Topology()
        .add_source("IN", "in", key_serde=STRING, value_serde=STRING)
        .add_processor("HEARTBEAT", Heartbeat, "IN")
        .add_sink("OUT", "beats", "HEARTBEAT", key_serde=STRING, value_serde=STRING)
    )
    with TopologyTestDriver(topology, initial_wall_clock_time_ms=1_000) as driver:
        source = driver.create_input_topic("in", STRING, STRING)
        beats = driver.create_output_topic("beats", STRING, STRING)
        source.pipe_input("k", "v", timestamp=999_999)
        assert beats.is_empty()
        driver.advance_wall_clock_time(9_999)
        assert beats.is_empty()
        driver.advance_wall_clock_time(1)
        source.pipe_input("k", "v")
        driver.advance_wall_clock_time(35_000)
        assert driver.wall_clock_time_ms == 46_000
        assert beats.read_records_to_list() == [
            TestRecord("beat", "1 at 11000", 11_000),
            TestRecord("beat", "2 at 46000", 46_000),
        ]
        with pytest.raises(ValueError, match="cannot move the wall clock backwards"):
            driver.advance_wall_clock_time(-1)


# -- topics ---------------------------------------------------------------------------------------


def _pass_through() -> Topology:
    return Topology().add_source("IN", "in").add_sink("OUT", "out", "IN")


def test_output_topic_reading() -> None:
    with TopologyTestDriver(
        _pass_through(), {"default.key.serde": "string", "default.value.serde": "string"}
    ) as driver:
        source = driver.create_input_topic("in", start_timestamp_ms=7)
        source.pipe_value_list(["a", "b"])
        source.pipe_input("k", "c", 3, headers=[("h", b"v")])
        source.pipe_input("k", None, 4)
        out = driver.create_output_topic("out")
        assert out.get_queue_size() == 4
        assert out.read_value() == "a"
        assert out.read_record() == TestRecord(None, "b", 7)
        assert out.read_key_value() == KeyValue("k", "c")
        assert out.read_key_value() == KeyValue("k", None)
        assert out.is_empty()
        with pytest.raises(IndexError, match="empty topic: 'out' has no unread records"):
            out.read_record()
        source.pipe_input("k", "x", 1)
        source.pipe_input("k", None, 2)
        assert out.read_key_values_to_map() == {"k": None}
        source.pipe_input(None, "x", 1)
        with pytest.raises(ValueError, match="does not allow None keys"):
            out.read_key_values_to_map()
        assert driver.create_output_topic("never-written").read_records_to_list() == []


def test_input_topic_time_and_errors() -> None:
    with TopologyTestDriver(
        _pass_through(), {"default.value.serde": "string"}, initial_wall_clock_time_ms=500
    ) as driver:
        source = driver.create_input_topic("in", auto_advance_ms=5)
        assert source.current_time_ms == 500
        source.pipe_value_list(["a", "b"])
        source.advance_time(100)
        source.pipe_input(None, "c")
        source.pipe_input(None, "d", 1)
        assert [r.timestamp for r in driver.create_output_topic("out").read_records_to_list()] == [500, 505, 610, 1]
        with pytest.raises(ValueError, match="cannot advance time by a negative amount"):
            source.advance_time(-1)
        with pytest.raises(
            TopologyError, match=r"topic 'nope' is not read by any source of the topology \(sources read \['in'\]\)"
        ):
            driver.create_input_topic("nope")


def test_pattern_source_reads_matching_topics() -> None:
    topology = Topology().add_source("LOGS", pattern=r"logs-[a-z]+").add_sink("ALL", "all-logs", "LOGS")
    with TopologyTestDriver(topology, {"default.value.serde": "string"}) as driver:
        driver.create_input_topic("logs-web").pipe_input(None, "w", 1)
        driver.create_input_topic("logs-db").pipe_input(None, "d", 2)
        assert driver.create_output_topic("all-logs").read_values_to_list() == ["w", "d"]
        with pytest.raises(TopologyError, match=r"and patterns \['logs-\[a-z\]\+'\]"):
            driver.create_input_topic("logs-9")


# -- deserialization errors -----------------------------------------------------------------------


def _long_pass_through() -> Topology:
    return (
        Topology()
        .add_source("IN", "in", key_serde=STRING, value_serde=LONG)
        .add_sink("OUT", "out", "IN", key_serde=STRING, value_serde=LONG)
    )


def test_deserialization_failure_fails_by_default() -> None:
    with TopologyTestDriver(_long_pass_through()) as driver:
        raw = driver.create_input_topic("in", STRING, STRING)
        with pytest.raises(
            DeserializationError, match=r"Long serde expects 8 bytes, got 4 \(topic=in, partition=0, offset=0\)"
        ):
            raw.pipe_input("k", "oops", 1)


def test_log_and_continue_counts_dropped_records() -> None:
    config = {"default.deserialization.exception.handler": "log_and_continue"}
    with TopologyTestDriver(_long_pass_through(), config) as driver:
        driver.create_input_topic("in", STRING, STRING).pipe_input("k", "oops", 1)
        driver.create_input_topic("in", STRING, LONG).pipe_input("k", 5, 2)
        assert driver.dropped_records == 1
        assert driver.create_output_topic("out", STRING, LONG).read_records_to_list() == [TestRecord("k", 5, 2)]


def test_dead_letter_topic_gets_the_raw_record_and_where_it_came_from() -> None:
    """As the runtime sends it (tests/integration/test_runtime_errors.py): the same headers."""
    config = {
        "default.deserialization.exception.handler": "dead_letter",
        "errors.dead.letter.queue.topic.name": "dlq",
    }
    with TopologyTestDriver(_long_pass_through(), config) as driver:
        driver.create_input_topic("in", STRING, STRING).pipe_input("k", "oops", 9, headers=(("trace", b"t1"),))
        where = (
            ("trace", b"t1"),
            ("__streams.errors.topic", b"in"),
            ("__streams.errors.partition", b"0"),
            ("__streams.errors.offset", b"0"),
            ("__streams.errors.exception", b"DeserializationError"),
        )
        assert driver.create_output_topic("dlq", STRING, STRING).read_records_to_list() == [TestRecord("k", "oops", 9, where)]
        assert driver.dropped_records == 1


def test_processing_error_propagates_and_the_driver_goes_on() -> None:
    class FailOnBoom(Processor[str, str, str, str]):
        def init(self, context: ProcessorContext[str, str]) -> None:
            self.context = context

        def process(self, record: Record[str, str]) -> None:
            if record.value == "boom":
                raise RuntimeError("boom")
            self.context.forward(record)

    topology = (
        Topology()
        .add_source("IN", "in", key_serde=STRING, value_serde=STRING)
        .add_processor("P", FailOnBoom, "IN")
        .add_sink("OUT", "out", "P", key_serde=STRING, value_serde=STRING)
    )
    with TopologyTestDriver(topology) as driver:
        source = driver.create_input_topic("in", STRING, STRING)
        with pytest.raises(RuntimeError, match="boom"):
            source.pipe_input("k", "boom", 1)
        source.pipe_input("k", "fine", 2)
        assert driver.create_output_topic("out", STRING, STRING).read_values_to_list() == ["fine"]


# -- stores and closing ---------------------------------------------------------------------------


def test_store_lookup_errors() -> None:
    with TopologyTestDriver(kip28_topology(Stores.in_memory_key_value_store("sums"))) as driver:
        assert set(driver.get_all_state_stores()) == {"sums"}
        assert driver.get_state_store("sums") is driver.get_key_value_store("sums")
        with pytest.raises(UnknownStateStoreError, match=r"no state store named 'other'; the topology has \['sums'\]"):
            driver.get_key_value_store("other")


def test_close_closes_processors_and_stores_and_deletes_state() -> None:
    closed: list[str] = []

    class Tracked(Processor[str, str, str, str]):
        def __init__(self, name: str) -> None:
            self.name = name

        def init(self, context: ProcessorContext[str, str]) -> None:
            self.task_id = context.task_id
            self.state_dir = context.state_dir

        def process(self, record: Record[str, str]) -> None: ...

        def close(self) -> None:
            closed.append(f"{self.name} in {self.task_id}")

    processors: list[Tracked] = []

    def make(name: str) -> Any:
        def factory() -> Tracked:
            processors.append(Tracked(name))
            return processors[-1]

        return factory

    topology = (
        Topology()
        .add_source("A-IN", "a")
        .add_processor("A", make("A"), "A-IN")
        .add_state_store(
            Stores.key_value_store_builder(Stores.persistent_key_value_store("a-store"), STRING, LONG), "A"
        )
        .add_source("B-IN", "b")
        .add_processor("B", make("B"), "B-IN")
        .add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("b-store"), STRING, LONG), "B")
    )
    driver = TopologyTestDriver(topology, {"application.id": "closing"})
    stores = driver.get_all_state_stores()
    assert {p.task_id for p in processors} == {TaskId(0, 0), TaskId(1, 0)}
    state_dir: Path = processors[0].state_dir
    assert state_dir.parts[-2:] == ("closing", "0_0")
    assert (state_dir / "a-store.sqlite").exists()
    driver.close()
    assert closed == ["A in 0_0", "B in 1_0"]
    assert [store.is_open for store in stores.values()] == [False, False]
    assert not state_dir.exists() and not state_dir.parent.parent.exists()
    driver.close()
    with pytest.raises(StreamsError, match="the TopologyTestDriver is closed"):
        driver.create_input_topic("a")


def test_max_task_idle_ms_holds_records_until_every_source_topic_has_one() -> None:
    """As Kafka Streams' driver: with max.task.idle.ms the task waits for its empty topics (or for the
    idle time on the wall clock), then processes the lowest timestamp first."""
    from streams_core import StreamsBuilder

    def topology() -> Any:
        builder = StreamsBuilder()
        table = builder.table("table", key_serde=Serdes.String(), value_serde=Serdes.String())
        stream = builder.stream("stream", key_serde=Serdes.String(), value_serde=Serdes.String())
        stream.join(table, lambda s, t: f"{s}+{t}").to("out")
        return builder.build()

    def table_store(driver: TopologyTestDriver) -> str:
        return next(name for name in driver.get_all_state_stores() if name.startswith("table-"))

    s = Serdes.String()
    with TopologyTestDriver(topology(), {"max.task.idle.ms": 100}) as driver:
        driver.create_input_topic("stream", s, s).pipe_input("k", "late-in-time", 10)
        out = driver.create_output_topic("out", s, s)
        assert out.read_records_to_list() == []  # held: the table topic is empty
        driver.create_input_topic("table", s, s).pipe_input("k", "t", 5)
        # the table record (5 < 10) goes first; then the table topic is empty again: the stream waits
        assert out.read_records_to_list() == []
        assert driver.get_key_value_store(table_store(driver)).get("k") == "t"
        driver.advance_wall_clock_time(99)
        assert out.read_records_to_list() == []
        driver.advance_wall_clock_time(1)  # 100 ms since the table topic was seen empty
        assert out.read_records_to_list() == [TestRecord("k", "late-in-time+t", 10)]
        driver.create_input_topic("stream", s, s).pipe_input("k", "alone", 20)
        driver.advance_wall_clock_time(100)
        assert out.read_records_to_list() == [TestRecord("k", "alone+t", 20)]
    with TopologyTestDriver(topology()) as driver:  # the default, 0: each record at once
        driver.create_input_topic("stream", s, s).pipe_input("k", "late-in-time", 10)
        driver.create_input_topic("table", s, s).pipe_input("k", "t", 5)
        assert driver.create_output_topic("out", s, s).read_records_to_list() == []


def test_timestamped_stores_answer_values_with_their_timestamps() -> None:
    from streams_core import Materialized, StreamsBuilder, TimeWindows
    from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp

    s = Serdes.String()
    builder = StreamsBuilder()
    grouped = builder.stream("in", key_serde=s, value_serde=s).group_by_key()
    grouped.count(Materialized.as_("counts"))
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).count(Materialized.as_("windowed"))
    with TopologyTestDriver(builder.build(), {"statestore.cache.max.bytes": 0}) as driver:
        source = driver.create_input_topic("in", s, s)
        source.pipe_input("a", "x", 3)
        source.pipe_input("a", "y", 7)
        assert driver.get_timestamped_key_value_store("counts").get("a") == ValueAndTimestamp(2, 7)
        assert driver.get_key_value_store("counts").get("a") == 2
        assert driver.get_timestamped_window_store("windowed").fetch("a", 0) == ValueAndTimestamp(2, 7)


# -- the order between sub-topologies ---------------------------------------------------------------


class Splitter(Processor[str, str, str, str]):
    """Forwards each record twice: to `late` 10 ms after its timestamp, then to `early` at it."""

    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context = context

    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_timestamp(record.timestamp + 10), "TO-LATE")
        self.context.forward(record, "TO-EARLY")


class Seen(Processor[str, str, str, str]):
    def __init__(self, name: str, seen: list[tuple[str, int, int]]) -> None:
        self.name, self.seen = name, seen

    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context = context

    def process(self, record: Record[str, str]) -> None:
        self.seen.append((self.name, record.timestamp, self.context.current_stream_time_ms()))


def test_records_of_several_sub_topologies_go_by_time_as_in_java_s_one_task() -> None:
    """Java's driver runs every sub-topology in one task, whose partition group takes the record
    of the lowest time first, whichever sub-topology reads it: the record produced second but
    earlier is processed first, at the stream time before the later one."""
    seen: list[tuple[str, int, int]] = []
    topology = (
        Topology()
        .add_source("IN", "in", key_serde=STRING, value_serde=STRING)
        .add_processor("SPLIT", Splitter, "IN")
        .add_sink("TO-LATE", "late", "SPLIT", key_serde=STRING, value_serde=STRING)
        .add_sink("TO-EARLY", "early", "SPLIT", key_serde=STRING, value_serde=STRING)
        .add_source("LATE", "late", key_serde=STRING, value_serde=STRING)
        .add_processor("SEEN-LATE", lambda: Seen("late", seen), "LATE")
        .add_source("EARLY", "early", key_serde=STRING, value_serde=STRING)
        .add_processor("SEEN-EARLY", lambda: Seen("early", seen), "EARLY")
    )
    with TopologyTestDriver(topology) as driver:
        driver.create_input_topic("in", STRING, STRING).pipe_input("k", "v", 100)
    assert seen == [("early", 100, 100), ("late", 110, 110)]
