"""ProcessorContext and Record: metadata per call site, forwarding, store access, scheduling errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from streams_core import (
    Processor,
    ProcessorContext,
    PunctuationType,
    Record,
    RecordMetadata,
    Serdes,
    StreamsError,
    TaskId,
    Topology,
    TopologyError,
)
from tests.unit.test_processor_task import DictStoreBuilder, ListCollector, make_task, pipe, s


def test_record_copies() -> None:
    record = Record("k", 1, 10, (("h", b"x"),))
    assert record.with_key("k2") == Record("k2", 1, 10, (("h", b"x"),))
    assert record.with_value(2) == Record("k", 2, 10, (("h", b"x"),))
    assert record.with_timestamp(11) == Record("k", 1, 11, (("h", b"x"),))
    assert record.with_headers([("a", b"1")]) == Record("k", 1, 10, (("a", b"1"),))
    assert record == Record("k", 1, 10, (("h", b"x"),))
    assert Record("k", 1, 10).headers == ()
    with pytest.raises(AttributeError):
        record.value = 5  # type: ignore[misc]


class Snooper(Processor[Any, Any, Any, Any]):
    """Records what the context says in init, process and a stream-time punctuation."""

    seen: dict[str, dict[str, Any]]

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        Snooper.seen = {"init": self._snapshot()}
        context.schedule(1000, PunctuationType.STREAM_TIME, self.punctuate)

    def process(self, record: Record[Any, Any]) -> None:
        Snooper.seen["process"] = self._snapshot()

    def punctuate(self, timestamp: int) -> None:
        Snooper.seen["punctuate"] = self._snapshot() | {"argument": timestamp}

    def _snapshot(self) -> dict[str, Any]:
        c = self.context
        metadata: RecordMetadata | None = c.record_metadata
        return {
            "topic": c.topic,
            "partition": c.partition,
            "offset": c.offset,
            "timestamp": c.timestamp,
            "headers": c.headers,
            "metadata": None if metadata is None else (metadata.topic, metadata.partition, metadata.offset),
            "stream_time": c.current_stream_time_ms(),
            "system_time": c.current_system_time_ms(),
        }


def test_metadata_in_init_process_and_punctuation(tmp_path: Path) -> None:
    topology = Topology().add_source("S", "in").add_processor("P", Snooper, "S")
    task = make_task(topology, tmp_path, clock=lambda: 777, subtopology=0)
    pipe(task, "in", b"k", b"v", 1500, offset=12, partition=0, headers=(("h", b"1"),))
    nothing = {"topic": None, "partition": None, "offset": None, "metadata": None, "headers": ()}
    assert Snooper.seen["init"] == nothing | {"timestamp": None, "stream_time": -1, "system_time": 777}
    assert Snooper.seen["process"] == {
        "topic": "in",
        "partition": 0,
        "offset": 12,
        "timestamp": 1500,
        "headers": (("h", b"1"),),
        "metadata": ("in", 0, 12),
        "stream_time": 1500,
        "system_time": 777,
    }
    assert Snooper.seen["punctuate"] == nothing | {
        "timestamp": 1500,
        "stream_time": 1500,
        "system_time": 777,
        "argument": 1500,
    }


def test_identity_config_and_state_dir(tmp_path: Path) -> None:
    captured: dict[str, Any] = {}

    class Identity(Processor[Any, Any, Any, Any]):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            captured.update(
                application_id=context.application_id,
                task_id=context.task_id,
                state_dir=context.state_dir,
                key_serde=context.key_serde,
                value_serde=context.value_serde,
                commit_interval=context.config["commit.interval.ms"],
            )

        def process(self, record: Record[Any, Any]) -> None: ...

    topology = Topology().add_source("S", "in").add_processor("P", Identity, "S")
    make_task(topology, tmp_path, {"default.value.serde": "long"})
    assert captured == {
        "application_id": "app",
        "task_id": TaskId(0, 0),
        "state_dir": tmp_path / "app" / "0_0",
        "key_serde": Serdes.Bytes(),
        "value_serde": Serdes.Long(),
        "commit_interval": 30_000,
    }


class Router(Processor[str, str, str, str]):
    """Forwards to the child named in the value; "all" forwards to every child."""

    def init(self, context: ProcessorContext[str, str]) -> None:
        self.context = context

    def process(self, record: Record[str, str]) -> None:
        target = record.value
        self.context.forward(record.with_timestamp(record.timestamp + 1), None if target == "all" else target)


def _router_task(tmp_path: Path, collector: ListCollector) -> Any:
    string = Serdes.String()
    topology = (
        Topology()
        .add_source("S", "in", key_serde=string, value_serde=string)
        .add_processor("ROUTER", Router, "S")
        .add_sink("LEFT", "left", "ROUTER", key_serde=string, value_serde=string)
        .add_sink("RIGHT", "right", "ROUTER", key_serde=string, value_serde=string)
    )
    return make_task(topology, tmp_path, collector=collector)


def test_forward_to_a_named_child_or_all(tmp_path: Path) -> None:
    collector = ListCollector()
    task = _router_task(tmp_path, collector)
    pipe(task, "in", s("a"), s("RIGHT"), 10)
    pipe(task, "in", s("b"), s("LEFT"), 20)
    pipe(task, "in", s("c"), s("all"), 30)
    assert [(topic, key, ts) for topic, key, _, ts, _, _ in collector.sent] == [
        ("right", b"a", 11),
        ("left", b"b", 21),
        ("left", b"c", 31),
        ("right", b"c", 31),
    ]


def test_forward_to_an_unknown_child_names_it(tmp_path: Path) -> None:
    task = _router_task(tmp_path, ListCollector())
    with pytest.raises(
        StreamsError,
        match="processor 'ROUTER' cannot forward to 'MIDDLE': not one of its children \\('LEFT', 'RIGHT'\\)",
    ):
        pipe(task, "in", s("a"), s("MIDDLE"), 1)


def test_child_sees_the_forwarded_timestamp_and_headers(tmp_path: Path) -> None:
    seen: list[Any] = []

    class Stamp(Processor[Any, Any, Any, Any]):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            self.context = context

        def process(self, record: Record[Any, Any]) -> None:
            self.context.forward(record.with_timestamp(99).with_headers([("x", b"y")]))
            seen.append(("parent after", self.context.timestamp, self.context.headers))

    class Look(Processor[Any, Any, Any, Any]):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            self.context = context

        def process(self, record: Record[Any, Any]) -> None:
            seen.append(("child", self.context.timestamp, self.context.headers, self.context.offset))

    topology = Topology().add_source("S", "in").add_processor("STAMP", Stamp, "S").add_processor("LOOK", Look, "STAMP")
    task = make_task(topology, tmp_path)
    pipe(task, "in", b"k", b"v", 5, offset=3)
    assert seen == [("child", 99, (("x", b"y"),), 3), ("parent after", 5, ())]


def test_forward_outside_process_is_an_error(tmp_path: Path) -> None:
    class ForwardInInit(Processor[Any, Any, Any, Any]):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            context.forward(Record("k", "v", 0))

        def process(self, record: Record[Any, Any]) -> None: ...

    topology = Topology().add_source("S", "in").add_processor("EAGER", ForwardInInit, "S")
    with pytest.raises(
        StreamsError,
        match=re.escape(
            "forward() may only be called from process() or a punctuation (processor 'EAGER' is in init() or close())"
        ),
    ):
        make_task(topology, tmp_path)


def test_context_used_after_processing_is_an_error(tmp_path: Path) -> None:
    kept: list[ProcessorContext[Any, Any]] = []

    class Keep(Processor[Any, Any, Any, Any]):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            kept.append(context)

        def process(self, record: Record[Any, Any]) -> None: ...

    make_task(Topology().add_source("S", "in").add_processor("P", Keep, "S"), tmp_path)
    with pytest.raises(
        StreamsError, match=r"get_state_store\(\) may only be called from init\(\), process\(\) or a punctuation"
    ):
        kept[0].get_state_store("st")
    with pytest.raises(StreamsError, match=r"schedule\(\) may only be called"):
        kept[0].schedule(10, PunctuationType.STREAM_TIME, lambda t: None)


def test_get_state_store_only_gives_connected_stores(tmp_path: Path) -> None:
    got: dict[str, Any] = {}

    class Owner(Processor[Any, Any, Any, Any]):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            got["owner"] = context.get_state_store("mine")

        def process(self, record: Record[Any, Any]) -> None: ...

    class Intruder(Processor[Any, Any, Any, Any]):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            self.context = context

        def process(self, record: Record[Any, Any]) -> None:
            self.context.get_state_store("mine")

    builder = DictStoreBuilder("mine")
    topology = (
        Topology()
        .add_source("S", "in")
        .add_processor("OWNER", Owner, "S")
        .add_processor("INTRUDER", Intruder, "S")
        .add_state_store(builder, "OWNER")
    )
    task = make_task(topology, tmp_path)
    assert got["owner"] is builder.built[0]
    with pytest.raises(TopologyError) as caught:
        pipe(task, "in", b"k", b"v", 0)
    assert str(caught.value) == (
        "processor 'INTRUDER' has no access to state store 'mine': the store is not connected to it. "
        "Connect it with Topology.add_state_store(builder, 'INTRUDER') or "
        "Topology.connect_processor_and_state_stores('INTRUDER', 'mine')"
    )


def test_get_state_store_of_a_name_the_topology_lacks_names_the_reachable_stores(tmp_path: Path) -> None:
    """A misspelled store is not advised to be connected: the message says it is not there and
    which stores the processor can reach."""

    class Misspelled(Processor[Any, Any, Any, Any]):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            context.get_state_store("cuonts")

        def process(self, record: Record[Any, Any]) -> None: ...

    topology = (
        Topology()
        .add_source("S", "in")
        .add_processor("COUNT", Misspelled, "S")
        .add_processor("OTHER", Misspelled, "S")
        .add_state_store(DictStoreBuilder("totals"), "COUNT")
        .add_state_store(DictStoreBuilder("counts"), "COUNT")
        .add_state_store(DictStoreBuilder("elsewhere"), "OTHER")
    )
    with pytest.raises(TopologyError) as caught:
        make_task(topology, tmp_path)
    assert str(caught.value) == (
        "processor 'COUNT' asked for state store 'cuonts', which its sub-topology does not have "
        "(task 0_0); the stores it can reach: ['counts', 'totals']"
    )


@pytest.mark.parametrize(
    ("interval", "kind", "callback", "error", "message"),
    [
        (0, PunctuationType.STREAM_TIME, print, ValueError, "the punctuation interval must be >= 1 ms, got 0"),
        (1.5, PunctuationType.STREAM_TIME, print, TypeError, "the punctuation interval must be an int (ms), got 1.5"),
        (
            10,
            "STREAM_TIME",
            print,
            TypeError,
            "expected PunctuationType.STREAM_TIME or WALL_CLOCK_TIME, got 'STREAM_TIME'",
        ),
        (10, PunctuationType.WALL_CLOCK_TIME, 42, TypeError, "the punctuation callback must be callable, got 42"),
    ],
)
def test_schedule_validates_its_arguments(
    tmp_path: Path, interval: Any, kind: Any, callback: Any, error: type[Exception], message: str
) -> None:
    class Scheduler(Processor[Any, Any, Any, Any]):
        def init(self, context: ProcessorContext[Any, Any]) -> None:
            context.schedule(interval, kind, callback)

        def process(self, record: Record[Any, Any]) -> None: ...

    with pytest.raises(error, match=re.escape(f"processor 'P': {message}")):
        make_task(Topology().add_source("S", "in").add_processor("P", Scheduler, "S"), tmp_path)
