"""TaskProcessor, the per-task core: lifecycle, depth-first processing, commit, deserialization,
timestamp extraction, sinks and error reporting. Also holds the small harness other
processor tests import (a list collector, a dict store and `make_task`)."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streams_core import (
    ConsumerRecord,
    DeserializationError,
    FailOnInvalidTimestamp,
    LogAndSkipOnInvalidTimestamp,
    Processor,
    ProcessorContext,
    Record,
    Serdes,
    SerializationError,
    StreamsConfig,
    StreamsError,
    TaskId,
    Topology,
    UsePartitionTimeOnInvalidTimestamp,
    WallclockTimestampExtractor,
)
from streams_core.processor.internals.record_deserializer import log_and_continue
from streams_core.processor.internals.stream_time import StreamTime
from streams_core.processor.internals.task_processor import RecordReader, TaskProcessor, TaskProcessorState
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.testing.fake_kafka_cluster import FakeRecord

# -- harness ------------------------------------------------------------------------------------


class ListCollector:
    """A RecordCollector keeping what sinks send."""

    def __init__(self, partitions: int = 4) -> None:
        self.sent: list[tuple[str, bytes | None, bytes | None, int, tuple[Any, ...], int | None]] = []
        self.partitions = partitions

    def send(self, topic: str, key: Any, value: Any, timestamp: int, headers: Any, partition: int | None) -> None:
        self.sent.append((topic, key, value, timestamp, tuple(headers), partition))

    def partitions_for(self, topic: str) -> int:
        return self.partitions


class DictStore:
    """A typed in-memory key-value store recording its lifecycle in a shared event list."""

    def __init__(self, name: str, events: list[str]) -> None:
        self.name = name
        self.events = events
        self.data: dict[Any, Any] = {}
        self.is_open = False
        self.persistent = False
        self.flushes = 0

    def init(self, context: Any, root: Any) -> None:
        self.is_open = True
        self.events.append(f"init store {self.name}")
        context.register(root)

    def get(self, key: Any) -> Any:
        return self.data.get(key)

    def put(self, key: Any, value: Any) -> None:
        self.data[key] = value

    def all(self) -> Iterator[tuple[Any, Any]]:
        return iter(sorted(self.data.items()))

    def flush(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        self.is_open = False
        self.events.append(f"close store {self.name}")


class DictStoreBuilder:
    def __init__(self, name: str, events: list[str] | None = None) -> None:
        self.name = name
        self.events = events if events is not None else []
        self.built: list[DictStore] = []

    def build(self) -> DictStore:
        store = DictStore(self.name, self.events)
        self.built.append(store)
        return store


def make_task(
    topology: Topology,
    tmp_path: Path,
    config: dict[str, Any] | None = None,
    *,
    collector: ListCollector | None = None,
    handler: Any = None,
    clock: Callable[[], int] = lambda: 0,
    subtopology: int = 0,
) -> TaskProcessor:
    """An initialised task for one sub-topology, with a real ProcessorStateManager."""
    streams_config = StreamsConfig({"application.id": "app", **(config or {})})
    task_id = TaskId(subtopology, 0)
    manager = ProcessorStateManager(task_id, "app", tmp_path / "app" / str(task_id))
    task = TaskProcessor(
        task_id,
        topology.internal_topology_builder.build_subtopology(subtopology, streams_config),
        streams_config,
        manager,
        collector if collector is not None else ListCollector(),
        deserialization_handler=handler,
        wall_clock=clock,
    )
    task.init()
    return task


_readers: weakref.WeakKeyDictionary[TaskProcessor, dict[tuple[str, int], RecordReader]] = weakref.WeakKeyDictionary()


def pipe(
    task: TaskProcessor,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    timestamp: int,
    offset: int = 0,
    partition: int = 0,
    headers: tuple[tuple[str, bytes], ...] = (),
) -> bool:
    """What an owner does per consumed record (one reader per partition); False when it was dropped."""
    readers = _readers.setdefault(task, {})
    reader = readers.get((topic, partition))
    if reader is None:
        reader = readers[topic, partition] = task.record_reader(topic, StreamTime())
    record = reader(FakeRecord(topic, partition, offset, timestamp, key, value, headers))
    if record is None:
        return False
    task.clock.advance(record.timestamp)
    task.process_record(task.source_node(topic), record, topic, partition, offset)
    task.maybe_punctuate_stream_time()
    return True


def process(task: TaskProcessor, record: Record[Any, Any]) -> None:
    """Run a record through the task from the source of topic "in" (offset 0)."""
    task.process_record(task.source_node("in"), record, "in", 0, 0)


def s(text: str) -> bytes:
    return text.encode()


def long(value: int) -> bytes:
    return value.to_bytes(8, "big", signed=True)


class Recorder(Processor[Any, Any, Any, Any]):
    """Appends "<name>:<key>=<value>@<timestamp>" to a shared trace and forwards unchanged."""

    def __init__(self, name: str, trace: list[str], forwards: int = 1) -> None:
        self.name = name
        self.trace = trace
        self.forwards = forwards

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.trace.append(f"init {self.name}")

    def process(self, record: Record[Any, Any]) -> None:
        self.trace.append(f"{self.name}:{record.key}={record.value}@{record.timestamp}")
        for _ in range(self.forwards):
            self.context.forward(record)

    def close(self) -> None:
        self.trace.append(f"close {self.name}")


# -- lifecycle and depth-first processing ------------------------------------------------------


def test_stores_then_processors_init_in_topological_order_and_close_likewise(tmp_path: Path) -> None:
    events: list[str] = []
    topology = (
        Topology()
        .add_source("S", "in", key_serde=Serdes.String(), value_serde=Serdes.String())
        .add_processor("A", lambda: Recorder("A", events), "S")
        .add_processor("B", lambda: Recorder("B", events), "A")
        .add_state_store(DictStoreBuilder("st", events), "B")
    )
    task = make_task(topology, tmp_path)
    assert task.state is TaskProcessorState.RUNNING
    assert events == ["init store st", "init A", "init B"]
    task.close()
    assert events[3:] == ["close A", "close B", "close store st"]
    assert task.state is TaskProcessorState.CLOSED
    task.close()
    assert len(events) == 6


def test_records_walk_depth_first_in_child_order(tmp_path: Path) -> None:
    trace: list[str] = []
    collector = ListCollector()
    topology = (
        Topology()
        .add_source("S", "in", key_serde=Serdes.String(), value_serde=Serdes.String())
        .add_processor("A", lambda: Recorder("A", trace, forwards=2), "S")
        .add_processor("B", lambda: Recorder("B", trace), "A")
        .add_processor("C", lambda: Recorder("C", trace), "A")
        .add_sink("K", "out", "B", key_serde=Serdes.String(), value_serde=Serdes.String())
    )
    task = make_task(topology, tmp_path, collector=collector)
    trace.clear()
    assert pipe(task, "in", s("k"), s("v"), 7, offset=3)
    assert trace == ["A:k=v@7", "B:k=v@7", "C:k=v@7", "B:k=v@7", "C:k=v@7"]
    assert collector.sent == [("out", b"k", b"v", 7, (), None)] * 2
    assert task.commit_needed


def test_unknown_topic_is_an_error(tmp_path: Path) -> None:
    task = make_task(Topology().add_source("S", "in").add_sink("K", "out", "S"), tmp_path)
    with pytest.raises(StreamsError, match=r"task 0_0 has no source for topic 'other' \(its sources read \['in'\]\)"):
        task.record_reader("other", StreamTime())


def test_pattern_source_matches_whole_topic_names(tmp_path: Path) -> None:
    collector = ListCollector()
    topology = Topology().add_source("S", pattern=r"logs-\d+").add_sink("K", "out", "S")
    task = make_task(topology, tmp_path, collector=collector)
    assert pipe(task, "logs-12", b"k", b"v", 5)
    with pytest.raises(StreamsError, match="no source for topic 'logs-12x'"):
        pipe(task, "logs-12x", b"k", b"v", 5)
    assert collector.sent == [("out", b"k", b"v", 5, (), None)]


# -- commit -------------------------------------------------------------------------------------


class CommitEveryOther(Processor[Any, Any, Any, Any]):
    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.store = context.get_state_store("st")
        self.seen = 0

    def process(self, record: Record[Any, Any]) -> None:
        self.seen += 1
        self.store.put(record.key, record.value)
        if self.seen % 2 == 0:
            self.context.commit()
            assert self.store.flushes == 0, "a commit request must not commit in the middle of a record"


def test_commit_request_is_honoured_at_the_next_safe_point(tmp_path: Path) -> None:
    builder = DictStoreBuilder("st")
    topology = (
        Topology()
        .add_source("S", "in", key_serde=Serdes.String(), value_serde=Serdes.String())
        .add_processor("P", CommitEveryOther, "S")
        .add_state_store(builder, "P")
    )
    task = make_task(topology, tmp_path)
    assert (task.commit_needed, task.commit_requested) == (False, False)
    pipe(task, "in", s("a"), s("1"), 1)
    assert (task.commit_needed, task.commit_requested) == (True, False)
    pipe(task, "in", s("b"), s("2"), 2)
    assert (task.commit_needed, task.commit_requested) == (True, True)
    assert builder.built[0].flushes == 0
    task.commit()
    assert builder.built[0].flushes == 1
    assert (task.commit_needed, task.commit_requested) == (False, False)


# -- deserialization ----------------------------------------------------------------------------


def _long_topology() -> Topology:
    return (
        Topology()
        .add_source("S", "in", key_serde=Serdes.String(), value_serde=Serdes.Long())
        .add_sink("K", "out", "S", key_serde=Serdes.String(), value_serde=Serdes.Long())
    )


def test_deserialization_error_is_located(tmp_path: Path) -> None:
    task = make_task(_long_topology(), tmp_path)
    with pytest.raises(DeserializationError) as caught:
        pipe(task, "in", s("k"), b"\x01\x02", 0, offset=41, partition=0)
    error = caught.value
    assert (error.topic, error.partition, error.offset) == ("in", 0, 41)
    assert str(error) == "Long serde expects 8 bytes, got 2 (topic=in, partition=0, offset=41)"


def _string_topology() -> Topology:
    return (
        Topology()
        .add_source("S", "in", key_serde=Serdes.String(), value_serde=Serdes.String())
        .add_sink("K", "out", "S", key_serde=Serdes.String(), value_serde=Serdes.String())
    )


@pytest.mark.parametrize("key, value", [(b"\xff", s("v")), (s("k"), b"ok \xc3\x28")])
def test_invalid_utf8_in_a_string_topology_is_the_string_serdes_error(tmp_path: Path, key: bytes, value: bytes) -> None:
    task = make_task(_string_topology(), tmp_path)
    with pytest.raises(DeserializationError) as caught:
        pipe(task, "in", key, value, 0, offset=7)
    assert str(caught.value).startswith("invalid UTF-8:") and caught.value.offset == 7


def test_a_string_topology_reads_text_and_none(tmp_path: Path) -> None:
    collector = ListCollector()
    task = make_task(_string_topology(), tmp_path, collector=collector)
    assert pipe(task, "in", "grüße".encode(), None, 1, offset=0)
    assert pipe(task, "in", None, s("v"), 2, offset=1)
    assert pipe(task, "in", "ключ".encode(), s("v"), 3, offset=2)
    assert collector.sent == [
        ("out", "grüße".encode(), None, 1, (), None),
        ("out", None, b"v", 2, (), None),
        ("out", "ключ".encode(), b"v", 3, (), None),
    ]


def test_a_string_sink_reports_what_utf8_cannot_encode_as_its_serde_does(tmp_path: Path) -> None:
    topology = (
        Topology()
        .add_source("S", "in", key_serde=Serdes.Long(), value_serde=Serdes.Long())
        .add_processor("P", lambda: MapTo("\ud800"), "S")
        .add_sink("K", "out", "P", key_serde=Serdes.String(), value_serde=Serdes.String())
    )
    task = make_task(topology, tmp_path)
    with pytest.raises(SerializationError, match=r"sink 'K'.*String serde cannot encode to UTF-8"):
        pipe(task, "in", long(1), long(2), 0)


def test_a_bytes_topology_passes_the_bytes_and_none_on_as_they_are(tmp_path: Path) -> None:
    b = Serdes.Bytes()
    collector = ListCollector()
    task = make_task(Topology().add_source("S", "in", key_serde=b, value_serde=b).add_sink("K", "out", "S", key_serde=b, value_serde=b),
                     tmp_path, collector=collector)
    assert pipe(task, "in", b"\xff\x00", None, 1, offset=0)
    assert pipe(task, "in", None, b"v", 2, offset=1)
    assert collector.sent == [("out", b"\xff\x00", None, 1, (), None), ("out", None, b"v", 2, (), None)]


def test_a_bytes_sink_still_converts_and_rejects_what_is_not_bytes_as_its_serde_does(tmp_path: Path) -> None:
    b = Serdes.Bytes()

    def task_sending(value: Any) -> TaskProcessor:
        topology = (
            Topology()
            .add_source("S", "in", key_serde=Serdes.Long(), value_serde=Serdes.Long())
            .add_processor("P", lambda: MapTo(value), "S")
            .add_sink("K", "out", "P", key_serde=b, value_serde=b)
        )
        return make_task(topology, tmp_path / str(type(value).__name__), collector=collector)

    collector = ListCollector()
    assert pipe(task_sending(bytearray(b"ab")), "in", long(1), long(2), 0)
    assert collector.sent == [("out", b"ab", b"ab", 0, (), None)] and type(collector.sent[0][2]) is bytes
    with pytest.raises(SerializationError, match=r"sink 'K'.*Bytes serde expects bytes, got str"):
        pipe(task_sending("text"), "in", long(1), long(2), 0)


class MapTo(Processor[Any, Any, Any, Any]):
    """Forwards every record as (text, text)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def init(self, context: Any) -> None:
        self.context = context

    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record.with_key(self.text).with_value(self.text))


def test_log_and_continue_skips_and_counts(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    collector = ListCollector()
    task = make_task(_long_topology(), tmp_path, collector=collector, handler=log_and_continue)
    with caplog.at_level(logging.WARNING):
        assert not pipe(task, "in", s("k"), b"bad", 0, offset=0)
    assert pipe(task, "in", s("k"), long(5), 1, offset=1)
    assert task.dropped_records == 1
    assert collector.sent == [("out", b"k", long(5), 1, (), None)]
    assert "Skipping record that failed to deserialize" in caplog.text


def test_custom_handler_sees_the_raw_record_and_may_fail(tmp_path: Path) -> None:
    seen: list[FakeRecord] = []

    def handler(error: DeserializationError, record: FakeRecord) -> bool:
        seen.append(record)
        return False

    task = make_task(_long_topology(), tmp_path, handler=handler)
    with pytest.raises(DeserializationError, match="offset=9"):
        pipe(task, "in", s("k"), b"bad", 3, offset=9, headers=(("h", b"1"),))
    assert seen == [FakeRecord("in", 0, 9, 3, b"k", b"bad", (("h", b"1"),))]


# -- timestamp extraction -----------------------------------------------------------------------


def _extractor_task(tmp_path: Path, extractor: Any, collector: ListCollector) -> TaskProcessor:
    topology = Topology().add_source("S", "in", timestamp_extractor=extractor).add_sink("K", "out", "S")
    return make_task(topology, tmp_path, collector=collector)


def test_default_extractor_fails_on_negative_timestamp(tmp_path: Path) -> None:
    task = _extractor_task(tmp_path, None, ListCollector())
    with pytest.raises(StreamsError, match="offset=4 has an invalid \\(negative\\) timestamp -1"):
        pipe(task, "in", b"k", b"v", -1, offset=4)
    assert FailOnInvalidTimestamp().extract(ConsumerRecord("t", 0, 0, 12, None, None), -1) == 12


def test_log_and_skip_drops_negative_timestamps(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    collector = ListCollector()
    task = _extractor_task(tmp_path, LogAndSkipOnInvalidTimestamp(), collector)
    with caplog.at_level(logging.WARNING):
        assert not pipe(task, "in", b"k", b"v", -5, offset=6)
    assert (
        "Task 0_0: dropping record at topic=in, partition=0, offset=6: negative extracted timestamp -5" in caplog.text
    )
    assert pipe(task, "in", b"k", b"w", 5)
    assert task.dropped_records == 1
    assert collector.sent == [("out", b"k", b"w", 5, (), None)]


def test_use_partition_time_replaces_negative_timestamps(tmp_path: Path) -> None:
    collector = ListCollector()
    task = _extractor_task(tmp_path, UsePartitionTimeOnInvalidTimestamp(), collector)
    with pytest.raises(StreamsError, match="partition time is not known yet"):
        pipe(task, "in", b"k", b"v", -1)
    pipe(task, "in", b"k", b"a", 40)
    pipe(task, "in", b"k", b"b", -1)
    assert [sent[3] for sent in collector.sent] == [40, 40]


def test_wallclock_and_function_extractors(tmp_path: Path) -> None:
    record = ConsumerRecord("t", 0, 0, 1, None, None)
    import time

    before = time.time_ns() // 1_000_000
    assert before <= WallclockTimestampExtractor().extract(record, -1) <= time.time_ns() // 1_000_000
    collector = ListCollector()
    task = _extractor_task(tmp_path, lambda rec, partition_time: len(rec.value) * 100, collector)
    pipe(task, "in", b"k", b"abc", 0)
    assert collector.sent[0][3] == 300


def test_config_default_timestamp_extractor_applies(tmp_path: Path) -> None:
    collector = ListCollector()
    topology = Topology().add_source("S", "in").add_sink("K", "out", "S")
    task = make_task(
        topology,
        tmp_path,
        {"default.timestamp.extractor": "streams_core.LogAndSkipOnInvalidTimestamp"},
        collector=collector,
    )
    assert not pipe(task, "in", b"k", b"v", -3)
    assert task.dropped_records == 1


# -- sinks --------------------------------------------------------------------------------------


def test_sink_serdes_fall_back_to_config_defaults(tmp_path: Path) -> None:
    collector = ListCollector()
    topology = Topology().add_source("S", "in").add_sink("K", "out", "S")
    task = make_task(
        topology, tmp_path, {"default.key.serde": "string", "default.value.serde": "long"}, collector=collector
    )
    pipe(task, "in", s("k"), long(9), 1)
    assert collector.sent == [("out", b"k", long(9), 1, (), None)]


def test_sink_topic_extractor_partitioner_and_headers(tmp_path: Path) -> None:
    collector = ListCollector(partitions=3)
    calls: list[Any] = []

    def route(key: str, value: str, record_context: Any) -> str:
        calls.append((record_context.topic, record_context.offset))
        return f"out-{value}"

    def partitioner(topic: str, key: str, value: str, num_partitions: int) -> int:
        return len(key) % num_partitions

    topology = (
        Topology()
        .add_source("S", "in", key_serde=Serdes.String(), value_serde=Serdes.String())
        .add_sink("K", route, "S", key_serde=Serdes.String(), value_serde=Serdes.String(), partitioner=partitioner)
    )
    task = make_task(topology, tmp_path, collector=collector)
    pipe(task, "in", s("abcd"), s("x"), 5, offset=2, headers=(("trace", b"1"),))
    assert collector.sent == [("out-x", b"abcd", b"x", 5, (("trace", b"1"),), 1)]
    assert calls == [("in", 2)]


def test_sink_errors_name_the_sink(tmp_path: Path) -> None:
    class Emit(Processor[Any, Any, Any, Any]):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            self.context = context

        def process(self, record: Record[Any, Any]) -> None:
            self.context.forward(record.value)

    topology = (
        Topology()
        .add_source("S", "in", key_serde=Serdes.String(), value_serde=Serdes.String())
        .add_processor("P", lambda: Emit(), "S")
        .add_sink("K", "out", "P", key_serde=Serdes.String(), value_serde=Serdes.String(), partitioner=lambda *a: 7)
    )
    task = make_task(topology, tmp_path)

    def send(record: Record[Any, Any]) -> None:
        process(task, Record(None, record, 0))

    with pytest.raises(SerializationError, match=r"sink 'K' cannot serialize the record value with Serdes\.String"):
        send(Record("k", 42, 1))
    with pytest.raises(StreamsError, match="sink 'K': invalid \\(negative\\) timestamp -2 for a record to topic 'out'"):
        send(Record("k", "v", -2))
    with pytest.raises(
        StreamsError, match="sink 'K': its partitioner returned 7 for topic 'out', which has 4 partition"
    ):
        send(Record("k", "v", 1))


# -- errors from user code ----------------------------------------------------------------------


def test_processor_exception_propagates_with_a_note(tmp_path: Path) -> None:
    class Boom(Processor[Any, Any, Any, Any]):
        def process(self, record: Record[Any, Any]) -> None:
            raise ValueError("boom")

    topology = Topology().add_source("S", "in").add_processor("BOOM", Boom, "S")
    task = make_task(topology, tmp_path)
    with pytest.raises(ValueError, match="boom") as caught:
        pipe(task, "in", b"k", b"v", 3, offset=17)
    assert caught.value.__notes__ == [
        "while processing a record of task 0_0 at processor 'BOOM': topic=in, partition=0, offset=17, timestamp=3"
    ]
    assert task.context.node is None


def test_init_exception_names_the_processor(tmp_path: Path) -> None:
    class BadInit(Processor[Any, Any, Any, Any]):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            raise RuntimeError("no")

    topology = Topology().add_source("S", "in").add_processor("BAD", BadInit, "S")
    with pytest.raises(RuntimeError, match="no") as caught:
        make_task(topology, tmp_path)
    assert caught.value.__notes__ == ["while initialising processor 'BAD' of task 0_0"]


def test_close_closes_everything_and_raises_the_first_error(tmp_path: Path) -> None:
    events: list[str] = []

    class BadClose(Recorder):
        def close(self) -> None:
            super().close()
            raise RuntimeError(f"close {self.name} failed")

    topology = (
        Topology()
        .add_source("S", "in")
        .add_processor("A", lambda: BadClose("A", events), "S")
        .add_processor("B", lambda: Recorder("B", events), "A")
        .add_state_store(DictStoreBuilder("st", events), "B")
    )
    task = make_task(topology, tmp_path)
    with pytest.raises(RuntimeError, match="close A failed"):
        task.close()
    assert events[-3:] == ["close A", "close B", "close store st"]
    assert task.state is TaskProcessorState.CLOSED
