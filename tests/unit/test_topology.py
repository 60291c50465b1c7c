"""Topology: chaining, validation errors naming the nodes, processor suppliers, sub-topologies."""

from __future__ import annotations

import re
from typing import Any

import cloudpickle
import pytest

from streams_core import (
    FixedKeyProcessor,
    Processor,
    Record,
    Serdes,
    StreamsBuilder,
    StreamsConfig,
    Topology,
    TopologyError,
    TopologyTestDriver,
)


class Noop(Processor[Any, Any, Any, Any]):
    def process(self, record: Record[Any, Any]) -> None:
        pass


class StoreBuilderStub:
    """The part of a StoreBuilder the topology uses: a name and build()."""

    def __init__(self, name: str) -> None:
        self.name = name

    def build(self) -> object:
        return object()


def test_every_method_chains() -> None:
    topology = Topology()
    assert topology.add_source("S", "in") is topology
    assert topology.add_processor("P", Noop, "S") is topology
    assert topology.add_state_store(StoreBuilderStub("store")) is topology
    assert topology.connect_processor_and_state_stores("P", "store") is topology
    assert topology.add_sink("K", "out", "P") is topology


# -- validation: every error names the nodes involved ---------------------------------------


def test_duplicate_node_name() -> None:
    topology = Topology().add_source("S", "in")
    with pytest.raises(TopologyError, match="cannot add processor 'S': a source named 'S' is already added"):
        topology.add_processor("S", Noop, "S")
    topology.add_processor("P", Noop, "S")
    with pytest.raises(TopologyError, match="cannot add sink 'P': a processor named 'P' is already added"):
        topology.add_sink("P", "out", "S")
    with pytest.raises(TopologyError, match="cannot add source 'P': a processor named 'P' is already added"):
        topology.add_source("P", "other")


def test_unknown_parent() -> None:
    topology = Topology().add_source("S", "in")
    with pytest.raises(TopologyError, match="processor 'P' names unknown parent 'Q'"):
        topology.add_processor("P", Noop, "S", "Q")
    with pytest.raises(TopologyError, match="sink 'K' names unknown parent 'nope'"):
        topology.add_sink("K", "out", "nope")


def test_missing_and_self_parent() -> None:
    topology = Topology().add_source("S", "in")
    with pytest.raises(TopologyError, match="processor 'P' needs at least one parent"):
        topology.add_processor("P", Noop)
    with pytest.raises(TopologyError, match="sink 'K' needs at least one parent"):
        topology.add_sink("K", "out")
    with pytest.raises(TopologyError, match="processor 'P' cannot be its own parent"):
        topology.add_processor("P", Noop, "P")


def test_sink_as_parent() -> None:
    topology = Topology().add_source("S", "in").add_sink("K", "out", "S")
    with pytest.raises(TopologyError, match=r"sink 'K' cannot be a parent \(of processor 'P'\)"):
        topology.add_processor("P", Noop, "K")
    with pytest.raises(TopologyError, match=r"sink 'K' cannot be a parent \(of sink 'K2'\)"):
        topology.add_sink("K2", "out2", "K")


def test_store_connected_to_no_processor_fails_at_build() -> None:
    topology = Topology().add_source("S", "in").add_processor("P", Noop, "S")
    topology.add_state_store(StoreBuilderStub("lonely"))
    builder = topology.internal_topology_builder
    with pytest.raises(TopologyError, match=r"state store\(s\) 'lonely' connected to no processor"):
        builder.validate()
    with pytest.raises(TopologyError, match="'lonely' connected to no processor"):
        builder.build_subtopology(0, StreamsConfig({"application.id": "a"}))
    topology.connect_processor_and_state_stores("P", "lonely")
    builder.validate()


def test_store_connection_errors() -> None:
    topology = Topology().add_source("S", "in").add_processor("P", Noop, "S").add_sink("K", "out", "P")
    with pytest.raises(TopologyError, match="cannot connect processor 'P' to state store 'ghost': no such store"):
        topology.connect_processor_and_state_stores("P", "ghost")
    with pytest.raises(TopologyError, match="cannot connect state store 'st' to processor 'X': no such processor"):
        topology.add_state_store(StoreBuilderStub("st"), "X")
    with pytest.raises(TopologyError, match="cannot connect state store 'st' to source 'S'"):
        topology.connect_processor_and_state_stores("S", "st")
    with pytest.raises(TopologyError, match="cannot connect state store 'st' to sink 'K'"):
        topology.connect_processor_and_state_stores("K", "st")
    with pytest.raises(TopologyError, match="a different state store named 'st' is already added"):
        topology.add_state_store(StoreBuilderStub("st"), "P")
    with pytest.raises(TopologyError, match="expected a StoreBuilder"):
        topology.add_state_store(object(), "P")


def test_topic_consumed_by_two_sources() -> None:
    topology = Topology().add_source("A", "t1", "t2")
    with pytest.raises(
        TopologyError, match="topic 't2' is already consumed by source 'A'; source 'B' cannot also consume it"
    ):
        topology.add_source("B", "t3", "t2")
    with pytest.raises(
        TopologyError, match=r"pattern 't\.' of source 'C' matches topic 't1' already consumed by source 'A'"
    ):
        topology.add_source("C", pattern="t.")
    topology.add_source("D", pattern=r"other-\d+")
    with pytest.raises(
        TopologyError,
        match=r"topic 'other-7' of source 'E' matches pattern 'other-\\\\d\+' already consumed by source 'D'",
    ):
        topology.add_source("E", "other-7")
    with pytest.raises(TopologyError, match=r"already consumed by source 'D'; source 'F' cannot also consume it"):
        topology.add_source("F", pattern=re.compile(r"other-\d+"))


def test_source_arguments() -> None:
    with pytest.raises(TopologyError, match="source 'S' needs at least one topic or a pattern"):
        Topology().add_source("S")
    with pytest.raises(TopologyError, match="source 'S' takes topics or a pattern, not both"):
        Topology().add_source("S", "t", pattern="x.*")
    with pytest.raises(TopologyError, match="source 'S' lists a topic more than once"):
        Topology().add_source("S", "t", "t")
    with pytest.raises(TopologyError, match="source 'S': invalid pattern"):
        Topology().add_source("S", pattern="(")
    with pytest.raises(TopologyError, match="source 'S': a timestamp extractor needs"):
        Topology().add_source("S", "t", timestamp_extractor=42)


def test_sink_arguments() -> None:
    topology = Topology().add_source("S", "in")
    with pytest.raises(TopologyError, match="sink 'K': expected a topic name or a topic extractor"):
        topology.add_sink("K", 42, "S")  # type: ignore[arg-type]
    with pytest.raises(TopologyError, match="sink 'K': the partitioner must be callable"):
        topology.add_sink("K", "out", "S", partitioner=3)  # type: ignore[arg-type]


def test_empty_topology_is_valid() -> None:
    builder = Topology().internal_topology_builder
    builder.validate()
    assert builder.node_groups() == {}


# -- processor suppliers ----------------------------------------------------------------------


class Supplier:
    def get(self) -> Noop:
        return Noop()


class _Upper(FixedKeyProcessor[str, str, str]):
    def init(self, context: Any) -> None:
        self._context = context

    def process(self, record: Any) -> None:
        self._context.forward(record.with_value(record.value.upper()))


def _processor_of(topology: Topology, name: str) -> Any:
    built = topology.internal_topology_builder.build_subtopology(0, StreamsConfig({"application.id": "a"}))
    return built.node(name).processor


@pytest.mark.parametrize("supplier", [Noop, lambda: Noop(), Supplier()], ids=["class", "factory", "supplier"])
def test_supplier_forms_give_a_new_processor_per_task(supplier: Any) -> None:
    topology = Topology().add_source("S", "in").add_processor("P", supplier, "S")
    first, second = _processor_of(topology, "P"), _processor_of(topology, "P")
    assert isinstance(first, Noop) and isinstance(second, Noop)
    assert first is not second


def test_supplier_returning_the_same_instance_is_an_error() -> None:
    shared = Noop()
    topology = Topology().add_source("S", "in").add_processor("P", lambda: shared, "S")
    _processor_of(topology, "P")
    with pytest.raises(TopologyError, match="processor 'P': its supplier returned the same instance twice"):
        _processor_of(topology, "P")


def test_a_topology_that_ran_pickles_without_its_processors() -> None:
    """The supplier check remembers the last processor (its task, nodes and stores); a pickle of the
    topology (to Spark's executors, to worker processes) leaves it behind and keeps the check."""
    builder = StreamsBuilder()
    builder.stream("in").process_values(_Upper).group_by_key().count().to_stream().to("out")
    topology = builder.build()
    with TopologyTestDriver(topology, {"application.id": "a"}) as driver:
        driver.create_input_topic("in", Serdes.String(), Serdes.String()).pipe_input("k", "v")
    copy = cloudpickle.loads(cloudpickle.dumps(topology))
    with TopologyTestDriver(copy, {"application.id": "a"}) as driver:
        driver.create_input_topic("in", Serdes.String(), Serdes.String()).pipe_input("k", "v")
        out = driver.create_output_topic("out", Serdes.String(), Serdes.Long())
        assert out.read_key_values_to_list() == [("k", 1)]
    shared = Noop()
    checked = cloudpickle.loads(cloudpickle.dumps(Topology().add_source("S", "in").add_processor("P", lambda: shared, "S")))
    _processor_of(checked, "P")
    with pytest.raises(TopologyError, match="the same instance twice"):
        _processor_of(checked, "P")


def test_processor_instance_instead_of_supplier_is_an_error() -> None:
    class NotCallable:
        def process(self, record: Any) -> None: ...

    with pytest.raises(TopologyError, match="processor 'P': got a processor instance"):
        Topology().add_source("S", "in").add_processor("P", NotCallable(), "S")
    with pytest.raises(TopologyError, match="processor 'P': expected a Processor class"):
        Topology().add_source("S", "in").add_processor("P", 42, "S")


def test_supplier_result_without_process_is_an_error() -> None:
    topology = Topology().add_source("S", "in").add_processor("P", lambda: object(), "S")
    with pytest.raises(TopologyError, match=r"processor 'P': its supplier returned .* which has no process"):
        _processor_of(topology, "P")


# -- sub-topologies -----------------------------------------------------------------------------


def _two_subtopologies_joined_through_a_topic() -> Topology:
    """source → filter → sink to "through"; a second source reads "through" → count (store) → sink."""
    return (
        Topology()
        .add_source("SOURCE", "input", key_serde=Serdes.String(), value_serde=Serdes.Long())
        .add_processor("FILTER", Noop, "SOURCE")
        .add_sink("TO-THROUGH", "through", "FILTER")
        .add_source("THROUGH-SOURCE", "through")
        .add_processor("COUNT", Noop, "THROUGH-SOURCE")
        .add_state_store(StoreBuilderStub("counts"), "COUNT")
        .add_sink("OUTPUT", "output", "COUNT")
    )


def test_split_into_subtopologies_with_stable_ids() -> None:
    builder = _two_subtopologies_joined_through_a_topic().internal_topology_builder
    assert builder.node_groups() == {
        0: ("SOURCE", "FILTER", "TO-THROUGH"),
        1: ("THROUGH-SOURCE", "COUNT", "OUTPUT"),
    }
    groups = builder.topic_groups()
    assert groups[0].source_topics == {"input"} and groups[0].sink_topics == {"through"}
    assert groups[0].state_stores == ()
    assert groups[1].source_topics == {"through"} and groups[1].sink_topics == {"output"}
    assert groups[1].state_stores == ("counts",)
    assert builder.subtopology_for_topic("through") == 1
    assert builder.subtopology_for_topic("output") is None


def test_shared_store_joins_subtopologies_and_ids_follow_first_node() -> None:
    topology = (
        Topology()
        .add_source("A", "a")
        .add_source("B", "b")
        .add_source("C", "c")
        .add_processor("PC", Noop, "C")
        .add_processor("PA", Noop, "A")
        .add_processor("PB", Noop, "B")
        .add_state_store(StoreBuilderStub("shared"), "PB", "PC")
    )
    assert topology.internal_topology_builder.node_groups() == {
        0: ("A", "PA"),
        1: ("B", "C", "PC", "PB"),
    }


def test_subtopology_built_per_task_with_children_in_order() -> None:
    topology = (
        Topology()
        .add_source("S", "in")
        .add_processor("P1", Noop, "S")
        .add_processor("P2", Noop, "S")
        .add_processor("JOIN", Noop, "P1", "P2")
        .add_state_store(StoreBuilderStub("st"), "P1", "JOIN")
        .add_sink("K", "out", "JOIN")
    )
    built = topology.internal_topology_builder.build_subtopology(0, StreamsConfig({"application.id": "a"}))
    assert [n.name for n in built.nodes] == ["S", "P1", "P2", "JOIN", "K"]
    assert [c.name for c in built.node("S").children] == ["P1", "P2"]
    assert [c.name for c in built.node("P2").children] == ["JOIN"]
    assert list(built.state_stores) == ["st"]
    assert built.node("JOIN").store_names == {"st"}
    assert [s.name for s in built.sources] == ["S"] and [s.name for s in built.sinks] == ["K"]


# -- describe() ---------------------------------------------------------------------------------


def test_describe_two_subtopologies_joined_through_a_topic() -> None:
    description = _two_subtopologies_joined_through_a_topic().describe()
    assert str(description) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: SOURCE (topics: [input])\n"
        "      --> FILTER\n"
        "    Processor: FILTER (stores: [])\n"
        "      --> TO-THROUGH\n"
        "      <-- SOURCE\n"
        "    Sink: TO-THROUGH (topic: through)\n"
        "      <-- FILTER\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: THROUGH-SOURCE (topics: [through])\n"
        "      --> COUNT\n"
        "    Processor: COUNT (stores: [counts])\n"
        "      --> OUTPUT\n"
        "      <-- THROUGH-SOURCE\n"
        "    Sink: OUTPUT (topic: output)\n"
        "      <-- COUNT\n"
        "\n"
    )
    first, second = description.subtopologies
    assert (first.id, [n.name for n in first.nodes]) == (0, ["SOURCE", "FILTER", "TO-THROUGH"])
    count = second.node("COUNT")
    assert count.stores == {"counts"}  # type: ignore[attr-defined]
    assert [n.name for n in count.predecessors] == ["THROUGH-SOURCE"]
    assert [n.name for n in count.successors] == ["OUTPUT"]


def test_describe_orders_nodes_like_kafka_streams() -> None:
    def route(key: Any, value: Any, context: Any) -> str:
        return "somewhere"

    topology = (
        Topology()
        .add_source("S", "b-topic", "a-topic")
        .add_processor("SMALL", Noop, "S")
        .add_processor("BIG", Noop, "S")
        .add_processor("BIG-CHILD", Noop, "BIG")
        .add_sink("ROUTED", route, "BIG-CHILD", "SMALL")
        .add_source("P", pattern=r"logs-\d+")
        .add_sink("LOGS", "all-logs", "P")
    )
    assert str(topology.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: S (topics: [b-topic, a-topic])\n"  # Java prints its HashSet order
        "      --> BIG, SMALL\n"
        "    Processor: BIG (stores: [])\n"
        "      --> BIG-CHILD\n"
        "      <-- S\n"
        "    Processor: BIG-CHILD (stores: [])\n"
        "      --> ROUTED\n"
        "      <-- BIG\n"
        "    Processor: SMALL (stores: [])\n"
        "      --> ROUTED\n"
        "      <-- S\n"
        "    Sink: ROUTED (extractor class: test_describe_orders_nodes_like_kafka_streams.<locals>.route)\n"
        "      <-- BIG-CHILD, SMALL\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: P (topics: logs-\\d+)\n"
        "      --> LOGS\n"
        "    Sink: LOGS (topic: all-logs)\n"
        "      <-- P\n"
        "\n"
    )


def test_describe_empty_topology() -> None:
    assert str(Topology().describe()) == "Topologies:\n "
