"""Topology.add_read_only_state_store (KIP-813).

Translated from Kafka Streams' TopologyTest.readOnlyStateStoresShouldHaveTheirOwnSubTopology and
readOnlyStateStoresShouldNotLog (streams/src/test/java/org/apache/kafka/streams/TopologyTest.java)
and ReadOnlyStoreTest.shouldConnectProcessorAndWriteDataToReadOnlyStore
(streams/src/test/java/org/apache/kafka/streams/processor/ReadOnlyStoreTest.java), with their
inputs and expected outputs.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams_core import Processor, ProcessorContext, Record, Serdes, Stores, Topology, TopologyError, TopologyTestDriver

INT, STR = Serdes.Integer(), Serdes.String()


class _Writer(Processor[int, str, None, None]):
    def init(self, context: ProcessorContext[None, None]) -> None:
        self.store = context.get_state_store("readOnlyStore")

    def process(self, record: Record[int, str]) -> None:
        self.store.put(record.key, record.value)


class _Reader(Processor[int, str, int, str]):
    def init(self, context: ProcessorContext[int, str]) -> None:
        self.context, self.store = context, context.get_state_store("readOnlyStore")

    def process(self, record: Record[int, str]) -> None:
        self.context.forward(record.with_value(f"{record.value} -- {self.store.get(record.key)}"))


def _store_builder(name: str = "readOnlyStore") -> Any:
    return Stores.key_value_store_builder(Stores.in_memory_key_value_store(name), INT, STR)


def test_read_only_state_stores_have_their_own_subtopology() -> None:
    """readOnlyStateStoresShouldHaveTheirOwnSubTopology."""
    topology = Topology().add_read_only_state_store(_store_builder("store"), "source", "topic", "processor", _Writer)
    assert str(topology.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: source (topics: [topic])\n"
        "      --> processor\n"
        "    Processor: processor (stores: [store])\n"
        "      --> none\n"
        "      <-- source\n\n"
    )


def test_read_only_state_stores_do_not_log() -> None:
    """readOnlyStateStoresShouldNotLog: the topic is the changelog."""
    topology = Topology().add_read_only_state_store(_store_builder("store"), "source", "topic", "processor", _Writer)
    builder = topology.internal_topology_builder
    assert builder.store_builder("store").logging_enabled is False
    assert builder.source_store_topics == {"store": "topic"}


def test_processor_connected_to_read_only_store() -> None:
    """ReadOnlyStoreTest.shouldConnectProcessorAndWriteDataToReadOnlyStore."""
    topology = (
        Topology()
        .add_read_only_state_store(_store_builder(), "readOnlySource", "storeTopic", "readOnlyProcessor", _Writer,
                                   key_serde=INT, value_serde=STR)
        .add_source("source", "inputTopic", key_serde=INT, value_serde=STR)
        .add_processor("processor", _Reader, "source")
        .connect_processor_and_state_stores("processor", "readOnlyStore")
        .add_sink("sink", "outputTopic", "processor", key_serde=INT, value_serde=STR)
    )
    with TopologyTestDriver(topology, {"application.id": "read-only"}) as driver:
        store_topic = driver.create_input_topic("storeTopic", INT, STR)
        store_topic.pipe_input(1, "foo")
        store_topic.pipe_input(2, "bar")
        source = driver.create_input_topic("inputTopic", INT, STR)
        source.pipe_input(1, "bar")
        source.pipe_input(2, "foo")
        assert list(driver.get_key_value_store("readOnlyStore").all()) == [(1, "foo"), (2, "bar")]
        assert driver.create_output_topic("outputTopic", INT, STR).read_key_values_to_list() == [
            (1, "bar -- foo"), (2, "foo -- bar"),
        ]  # fmt: skip
    assert len(topology.describe().subtopologies) == 1  # the shared store joins both sources' nodes


def test_read_only_store_names_taken() -> None:
    """The source, the processor and the store follow Topology's rules (a taken name is refused)."""
    topology = Topology().add_source("source", "other")
    with pytest.raises(TopologyError, match="'source'"):
        topology.add_read_only_state_store(_store_builder(), "source", "storeTopic", "processor", _Writer)
