"""A global store's processor cannot schedule punctuations (Kafka's GlobalProcessorContextImpl.schedule
throws UnsupportedOperationException): the global thread runs none, so scheduling one is an error at
init, not a punctuation that silently never fires."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams_core import KafkaStreams, PunctuationType, Serdes, Stores, StreamsError, Topology
from streams_core.processor.processor import Processor, Record
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.topology_test_driver import TopologyTestDriver

from .harness import Instance, eventually, streams_config

S = Serdes.String()


class SchedulingGlobalUpdater(Processor[str, str, None, None]):
    """Copies records into the global store, and (wrongly) schedules a punctuation."""

    def init(self, context: Any) -> None:
        self.store = context.get_state_store("global-copy")
        context.schedule(10, PunctuationType.WALL_CLOCK_TIME, lambda now: None)

    def process(self, record: Record[str, str]) -> None:
        self.store.put(record.key, record.value)


def scheduling_global_topology() -> Topology:
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("global-copy"), S, S).with_logging_disabled()
    return (Topology()
            .add_global_store(store, "G-SOURCE", "reference", "G-UPDATE", SchedulingGlobalUpdater, key_serde=S, value_serde=S)
            .add_source("SOURCE", "in", key_serde=S, value_serde=S)
            .add_sink("SINK", "out", "SOURCE", key_serde=S, value_serde=S))  # fmt: skip


def test_the_driver_refuses_a_punctuation_of_a_global_processor(tmp_path: Path) -> None:
    with pytest.raises(StreamsError, match=r"'G-UPDATE': schedule\(\) is not supported in a global store's processor"):
        TopologyTestDriver(scheduling_global_topology(), {"state.dir": str(tmp_path)})


async def test_an_instance_whose_global_processor_schedules_a_punctuation_fails_to_start(tmp_path: Path) -> None:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out", "reference"):
        cluster.create_topic(topic, 1)
    instance = Instance(cluster, scheduling_global_topology(), streams_config(tmp_path))
    with pytest.raises(StreamsError, match=r"schedule\(\) is not supported in a global store's processor"):
        await instance.start()
    await eventually(lambda: instance.streams.state is KafkaStreams.State.ERROR, what="ERROR (a global store that fails to start)")
    await instance.close()
