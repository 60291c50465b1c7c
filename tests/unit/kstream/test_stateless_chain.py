"""The fused stateless chain: the same records reach each sink as through the TopologyTestDriver."""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import Branched, Named, Serdes, StreamsBuilder, Topology, TopologyTestDriver
from streams_core.config import StreamsConfig
from streams_core.processor.internals.processor_node import ProcessorNode, SinkNode
from streams_core.processor.internals.stateless_chain import compose, fused_nodes

S = Serdes.String()
CONFIG = {"application.id": "chain", "statestore.cache.max.bytes": 0}
RECORDS = [("k1", "apple pie", 1), ("k2", "Berry", 2), (None, "avocado toast now", 3), ("k4", "", 4), ("k5", "cherry", 5)]


def chained(topology: Topology) -> dict[str, list[tuple[Any, Any, int]]]:
    """What each sink topic gets when the sub-topology's records run through the composed chain."""
    builder = topology.internal_topology_builder
    builder.set_application_id("chain")
    (sid,) = builder.topic_groups()
    built = builder.build_subtopology(sid, StreamsConfig(CONFIG))
    out: dict[str, list[tuple[Any, Any, int]]] = {}

    def terminal(node: ProcessorNode) -> Any:
        assert isinstance(node, SinkNode), f"only sinks end this chain, got {node}"
        records = out.setdefault(str(node.topic), [])
        return lambda key, value, timestamp, headers: records.append((key, value, timestamp))

    (source,) = built.sources
    run = compose(source, terminal)
    for key, value, timestamp in RECORDS:
        run(key, value, timestamp, ())
    return out


def driven(topology: Topology, topics: list[str]) -> dict[str, list[tuple[Any, Any, int]]]:
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record_list(RECORDS)
        return {
            t: [(r.key, r.value, r.timestamp) for r in driver.create_output_topic(t, S, S).read_records_to_list()]
            for t in topics
        }


def test_every_stateless_operator_fused_gives_the_drivers_output() -> None:
    def build() -> Topology:
        builder = StreamsBuilder()
        seen: list[Any] = []
        lines = builder.stream("in", key_serde=S, value_serde=S).peek(lambda k, v: seen.append(v))
        words = lines.filter(lambda k, v: k is not None).flat_map_values(str.split).map_values(str.upper)
        keyed = words.select_key(lambda k, v: v[:1]).map(lambda k, v: (k, f"{k}:{v}"))
        pairs = lines.flat_map(lambda k, v: [(w, k or "-") for w in v.split()[:2]])
        merged = keyed.merge(pairs.filter_not(lambda k, v: k.startswith("a")))
        branches = merged.split(Named.as_("s-")).branch(lambda k, v: k < "B", Branched.as_("low")).default_branch(Branched.as_("high"))
        branches["s-low"].map_values(lambda k, v: f"{k}/{v}").to("low")
        branches["s-high"].to("high")
        lines.filter(lambda k, v: not v).map_values(lambda v: "empty").to("empty")
        return builder.build()

    topics = ["low", "high", "empty"]
    expected = driven(build(), topics)
    assert sum(map(len, expected.values())) > 5, expected
    assert chained(build()) == {t: expected[t] for t in topics if expected[t]}


def test_the_chain_stops_at_stateful_nodes_and_names_what_it_fused() -> None:
    builder = StreamsBuilder()
    words = builder.stream("in", key_serde=S, value_serde=S).flat_map_values(str.split).group_by(lambda k, w: w)
    words.count().to_stream().to("counts")
    topology = builder.build()
    b = topology.internal_topology_builder
    b.set_application_id("chain")
    built = b.build_subtopology(0, StreamsConfig(CONFIG))
    (source,) = built.sources
    fused, terminals = fused_nodes(source)
    assert [type(n.processor).__name__ for n in fused] == ["KStreamFlatMapValues", "KStreamSelectKey", "KStreamFilter"]
    assert [type(n).__name__ for n in terminals] == ["SinkNode"]
    reached: list[tuple[Any, Any]] = []
    run = compose(source, lambda node: lambda k, v, t, h: reached.append((k, v)))
    run("line", "b a", 1, ())
    assert reached == [("b", "b"), ("a", "a")]


def test_a_linear_chain_is_one_generated_function_and_errors_propagate() -> None:
    builder = StreamsBuilder()
    words = builder.stream("in", key_serde=S, value_serde=S).flat_map_values(str.split).group_by(lambda k, w: w)
    words.count().to_stream().to("counts")
    b = builder.build().internal_topology_builder
    b.set_application_id("chain")
    (source,) = b.build_subtopology(0, StreamsConfig(CONFIG)).sources
    reached: list[Any] = []
    run = compose(source, lambda node: lambda k, v, t, h: reached.append(k))
    assert run.chain_source.count("def ") == 1, run.chain_source  # type: ignore[attr-defined]
    run("line", "x y", 1, ())
    assert reached == ["x", "y"]
    with pytest.raises(TypeError):
        run("line", None, 2, ())  # str.split(None): the user function's own error, as on the runtime


def test_a_failing_user_function_is_traced_to_its_processor_node() -> None:
    import traceback

    builder = StreamsBuilder()
    builder.stream("in", key_serde=S, value_serde=S).map_values(lambda v: v + "!", Named.as_("shout")).to("out")
    b = builder.build().internal_topology_builder
    b.set_application_id("chain")
    (source,) = b.build_subtopology(0, StreamsConfig(CONFIG)).sources
    run = compose(source, lambda node: lambda k, v, t, h: None)
    with pytest.raises(TypeError) as failure:
        run("k", None, 1, ())
    assert "# shout" in "".join(traceback.format_exception(failure.value))


def test_each_line_calling_user_code_names_its_node() -> None:
    builder = StreamsBuilder()
    branches = (
        builder.stream("in", key_serde=S, value_serde=S)
        .filter(lambda k, v: True, Named.as_("keep"))
        .flat_map_values(str.split, Named.as_("words"))
        .split(Named.as_("s-"))
        .branch(lambda k, v: v < "b", Branched.as_("low"))
        .default_branch(Branched.as_("high"))
    )
    branches["s-low"].to("low")
    branches["s-high"].to("high")
    topology = builder.build()
    internal = topology.internal_topology_builder
    internal.set_application_id("chain")
    (source,) = internal.build_subtopology(0, StreamsConfig(CONFIG)).sources
    run = compose(source, lambda node: lambda k, v, t, h: None)
    lines = run.chain_source.splitlines()  # type: ignore[attr-defined]
    named = {lines[n - 1].split("  # ")[0].strip(): name for n, name in run.chain_nodes.items()}  # type: ignore[attr-defined]
    sinks = {node.name for node in fused_nodes(source)[1]}
    assert len(sinks) == 2
    assert set(named.values()) == {"keep", "words", "s-", *sinks}, run.chain_source  # type: ignore[attr-defined]
    for line, name in named.items():
        assert line.startswith("end") if name in sinks else line.startswith(("if", "elif", "for")), named
