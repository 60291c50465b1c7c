"""Topology: the graph of sources, processors, sinks and state stores of a Processor API application.

Every method returns the topology, so a graph is written as one chain:

    topology = (Topology()
        .add_source("SOURCE", "input", key_serde=Serdes.String(), value_serde=Serdes.Long())
        .add_processor("PROCESS", Summer, "SOURCE")
        .add_state_store(store_builder, "PROCESS")
        .add_sink("SINK", "output", "PROCESS"))

A parent must be added before its children. Mistakes raise `TopologyError` naming the nodes
involved: when the node is added, or, for what needs the whole graph (a state store connected to
no processor), when the topology is built by `TopologyTestDriver` or `KafkaStreams`.
"""

from __future__ import annotations

import re
from typing import Any

from streams_core.processor.connected_store_provider import supplier_stores
from streams_core.processor.internals.internal_topology_builder import InternalTopologyBuilder
from streams_core.processor.stream_partitioner import StreamPartitioner
from streams_core.processor.topic_name_extractor import TopicNameExtractor
from streams_core.processor.topology_description import TopologyDescription
from streams_core.serde import Serde

__all__ = ["Topology"]


class Topology:
    """A processor topology under construction; run it with KafkaStreams or TopologyTestDriver."""

    def __init__(self) -> None:
        self._builder = InternalTopologyBuilder()

    @property
    def internal_topology_builder(self) -> InternalTopologyBuilder:
        """The builder behind this topology (for the runtime, the test driver and the DSL)."""
        return self._builder

    def add_source(
        self,
        name: str,
        *topics: str,
        pattern: str | re.Pattern[str] | None = None,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        timestamp_extractor: Any = None,
    ) -> Topology:
        """A source reading `topics` (or every topic whose whole name matches `pattern`).

        Serdes default to `default.key.serde` / `default.value.serde`; the timestamp extractor to
        `default.timestamp.extractor` (else the record's timestamp, failing on negative ones).
        A topic can be read by one source only.
        """
        self._builder.add_source(name, topics, pattern, key_serde, value_serde, timestamp_extractor)
        return self

    def add_processor(self, name: str, supplier: Any, *parent_names: str) -> Topology:
        """A processor child of `parent_names`; `supplier` makes one processor per task.

        `supplier` is a Processor class (called without arguments), a zero-argument factory, or
        a ProcessorSupplier with `get()`; each call must return a new instance. A supplier's
        `stores()` (a ConnectedStoreProvider) are added and connected to the processor.
        """
        self._builder.add_processor(name, supplier, parent_names)
        for store_builder in supplier_stores(supplier):
            self._builder.add_state_store(store_builder, (name,))
        return self

    def add_sink(
        self,
        name: str,
        topic: str | TopicNameExtractor,
        *parent_names: str,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        partitioner: StreamPartitioner | None = None,
    ) -> Topology:
        """A sink writing what `parent_names` forward to `topic`.

        `topic` is a name or a `TopicNameExtractor` `(key, value, record_context) -> topic`.
        Serdes default as for sources; `partitioner(topic, key, value, num_partitions)` picks
        the partition (None: the producer's murmur2 of the key).
        """
        self._builder.add_sink(name, topic, parent_names, key_serde, value_serde, partitioner)
        return self

    def add_state_store(self, store_builder: Any, *processor_names: str) -> Topology:
        """A state store built per task by `store_builder`, connected to `processor_names`."""
        self._builder.add_state_store(store_builder, processor_names)
        return self

    def add_global_store(
        self,
        store_builder: Any,
        source_name: str,
        topic: str,
        processor_name: str,
        state_update_supplier: Any,
        *,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        timestamp_extractor: Any = None,
    ) -> Topology:
        """A global store, filled from every partition of `topic` by the processor `state_update_supplier` makes.

        The source `source_name` and the processor `processor_name` make no tasks: each
        application instance keeps a full copy of the store. The topic is the store's
        changelog, so the builder must have logging disabled (`with_logging_disabled()`).
        Processors read the store after `connect_processor_and_state_stores`.
        """
        self._builder.add_global_store(
            store_builder, source_name, topic, processor_name, state_update_supplier, key_serde, value_serde,
            timestamp_extractor,
        )  # fmt: skip
        return self

    def add_read_only_state_store(
        self,
        store_builder: Any,
        source_name: str,
        topic: str,
        processor_name: str,
        state_update_supplier: Any,
        *,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        timestamp_extractor: Any = None,
    ) -> Topology:
        """A store filled from `topic` by the processor `state_update_supplier` makes (KIP-813).

        Unlike a global store it is partitioned: the source `source_name` and the processor
        `processor_name` make a sub-topology with one task per partition of `topic`, and other
        processors of that sub-topology may read the store once connected to it. The topic is
        the store's changelog, so logging is turned off on the builder.
        """
        store_builder.with_logging_disabled()
        self._builder.add_source(source_name, (topic,), None, key_serde, value_serde, timestamp_extractor)
        self._builder.add_processor(processor_name, state_update_supplier, (source_name,))
        self._builder.add_state_store(store_builder, (processor_name,))
        self._builder.connect_source_store_and_topic(store_builder.name, topic)
        return self

    def connect_processor_and_state_stores(self, processor_name: str, *state_store_names: str) -> Topology:
        """Give `processor_name` access to stores already added."""
        self._builder.connect_processor_and_state_stores(processor_name, state_store_names)
        return self

    def describe(self) -> TopologyDescription:
        """Sub-topologies, nodes and links; `str()` of it prints like Kafka Streams' description."""
        return self._builder.describe()

    def __repr__(self) -> str:
        return f"Topology(nodes={list(self._builder.node_names)})"
