"""TaskProcessor's fused stateless chains: the record path composed once per source behaves as the
node-by-node walk did (order, record context of unfused nodes, the processor an error note names)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams_core import Named, Processor, ProcessorContext, Produced, Record, Serdes, StreamsBuilder, Topology
from streams_core.processor.internals.stateless_chain import fused_nodes
from tests.unit.test_processor_task import ListCollector, make_task, pipe

S = Serdes.String()


class Recorder(Processor[Any, Any, Any, Any]):
    """Records what a processor sees: the record and the context's view of it; fails on value 'fail'."""

    def __init__(self, name: str, seen: list[Any]) -> None:
        self.name = name
        self.seen = seen

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context

    def process(self, record: Record[Any, Any]) -> None:
        context = self.context
        self.seen.append((self.name, record.key, record.value, record.timestamp, tuple(record.headers)))
        self.seen.append((context.topic, context.partition, context.offset, context.timestamp, tuple(context.headers)))
        if record.value == "fail":
            raise RuntimeError("processor failed")
        self.context.forward(record.with_value(f"{record.value}!"))


def stream(builder: StreamsBuilder) -> Any:
    return builder.stream("in", key_serde=S, value_serde=S)


def test_unfused_nodes_see_the_record_and_context_the_walk_gave_them(tmp_path: Path) -> None:
    seen: list[Any] = []
    builder = StreamsBuilder()
    lines = stream(builder).peek(lambda k, v: seen.append(("peek", v)))
    words = lines.flat_map_values(str.split).filter(lambda k, v: v != "skip")
    words.process(lambda: Recorder("P", seen)).map_values(str.upper).to("out", Produced.with_(S, S))
    lines.map_values(lambda v: len(v)).process(lambda: Recorder("Q", seen))
    collector = ListCollector()
    task = make_task(builder.build(), tmp_path, collector=collector)
    (source,) = task.topology.sources
    fused = fused_nodes(source)[0]
    assert sorted(type(node.processor).__name__ for node in fused) == [
        "KStreamFilter", "KStreamFlatMapValues", "KStreamMapValues", "KStreamPeek"
    ]  # fmt: skip
    for node in fused:
        node.process = None  # type: ignore[assignment]  # composed: a fused node's process is never called

    pipe(task, "in", b"k", b"a skip b", 7, offset=3, partition=0, headers=(("h", b"1"),))

    assert seen == [
        ("peek", "a skip b"),
        ("P", "k", "a", 7, (("h", b"1"),)),
        ("in", 0, 3, 7, (("h", b"1"),)),
        ("P", "k", "b", 7, (("h", b"1"),)),
        ("in", 0, 3, 7, (("h", b"1"),)),
        ("Q", "k", 8, 7, (("h", b"1"),)),
        ("in", 0, 3, 7, (("h", b"1"),)),
    ]
    assert [(t, k, v, ts) for t, k, v, ts, _, _ in collector.sent] == [("out", b"k", b"A!", 7), ("out", b"k", b"B!", 7)]
    assert task.context.node is None and task.context.record is None


def test_a_failing_fused_operator_is_named_even_after_an_unfused_node_ran(tmp_path: Path) -> None:
    seen: list[Any] = []
    builder = StreamsBuilder()
    words = stream(builder).flat_map_values(str.split, Named.as_("split"))
    words.process(lambda: Recorder("P", seen), named="P")
    words.map_values(lambda v: 1 // (v != "zero"), Named.as_("divide"))
    task = make_task(builder.build(), tmp_path)

    with pytest.raises(ZeroDivisionError) as caught:
        pipe(task, "in", b"k", b"one zero", 5, offset=9)

    assert [s[0] for s in seen[::2]] == ["P", "P"], "P ran for both words before the second one's map_values failed"
    assert caught.value.__notes__ == [
        "while processing a record of task 0_0 at processor 'divide': topic=in, partition=0, offset=9, timestamp=5"
    ]
    assert task.context.node is None


def test_a_failing_unfused_node_below_a_chain_is_named(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    stream(builder).filter(lambda k, v: True).process(lambda: Recorder("P", []), named="P")
    task = make_task(builder.build(), tmp_path)
    with pytest.raises(RuntimeError, match="processor failed") as caught:
        pipe(task, "in", b"k", b"fail", 2, offset=1)
    assert caught.value.__notes__ == [
        "while processing a record of task 0_0 at processor 'P': topic=in, partition=0, offset=1, timestamp=2"
    ]


@pytest.mark.parametrize("fused", [True, False], ids=["after-a-map", "straight-from-the-source"])
def test_a_failing_sink_is_named(tmp_path: Path, fused: bool) -> None:
    builder = StreamsBuilder()
    records = stream(builder).map_values(lambda v: int(v)) if fused else stream(builder)
    records.to("out", Produced.with_(S, Serdes.Long() if not fused else S).with_name("the-sink"))
    task = make_task(builder.build(), tmp_path)
    with pytest.raises(Exception, match="sink 'the-sink' cannot serialize the record value") as caught:
        pipe(task, "in", b"k", b"12", 4, offset=2)
    assert caught.value.__notes__ == [
        "while processing a record of task 0_0 at processor 'the-sink': topic=in, partition=0, offset=2, timestamp=4"
    ]


def test_a_topic_extractor_sink_reads_the_context_of_the_fused_record(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    chosen: list[Any] = []

    def topic(key: Any, value: Any, context: Any) -> str:
        chosen.append((value, context.timestamp, context.topic))
        return f"out-{value}"

    stream(builder).flat_map_values(str.split).to(topic, Produced.with_(S, S))
    collector = ListCollector()
    task = make_task(builder.build(), tmp_path, collector=collector)
    pipe(task, "in", b"k", b"x y", 6)
    assert chosen == [("x", 6, "in"), ("y", 6, "in")]
    assert [s[0] for s in collector.sent] == ["out-x", "out-y"]


def test_a_processor_api_topology_keeps_the_node_by_node_walk(tmp_path: Path) -> None:
    seen: list[Any] = []
    topology = Topology().add_source("S", "in").add_processor("P", lambda: Recorder("P", seen), "S")
    task = make_task(topology, tmp_path)
    pipe(task, "in", b"k", b"v", 3, offset=4)
    assert seen == [("P", b"k", b"v", 3, ()), ("in", 0, 4, 3, ())]
