"""A global store's processor has no punctuations and no stream time: Kafka's GlobalProcessorContextImpl
throws UnsupportedOperationException from schedule() and from currentStreamTimeMs(). The global
thread runs no punctuations and keeps no stream time, so either call is an error (from init: the
start fails), not a punctuation that never fires nor a stream time that never moves."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams_core import KafkaStreams, PunctuationType, Serdes, Stores, StreamsError, Topology
from streams_core.processor.processor import Processor, Record
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.topology_test_driver import TopologyTestDriver

from .harness import Instance, eventually, streams_config

S = Serdes.String()

REFUSED: dict[str, tuple[Callable[[Any], object], str]] = {
    "schedule": (lambda context: context.schedule(10, PunctuationType.WALL_CLOCK_TIME, lambda now: None),
                 r"'G-UPDATE': schedule\(\) is not supported in a global store's processor"),
    "stream-time": (lambda context: context.current_stream_time_ms(),
                    r"'G-UPDATE': there is no concept of stream-time for a global processor"),
}  # fmt: skip


def global_topology(in_init: Callable[[Any], object] | None = None, in_process: Callable[[Any], object] | None = None) -> Topology:
    """A global store copied by G-UPDATE, which makes the given call in init or process; a stream task's
    processor (STAMP) forwards each record with the stream time it reads."""

    class GlobalUpdater(Processor[str, str, None, None]):
        def init(self, context: Any) -> None:
            self.context = context
            self.store = context.get_state_store("global-copy")
            if in_init is not None:
                in_init(context)

        def process(self, record: Record[str, str]) -> None:
            if in_process is not None:
                in_process(self.context)
            self.store.put(record.key, record.value)

    class Stamp(Processor[str, str, str, str]):
        def init(self, context: Any) -> None:
            self.context = context

        def process(self, record: Record[str, str]) -> None:
            self.context.forward(record.with_value(str(self.context.current_stream_time_ms())))

    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("global-copy"), S, S).with_logging_disabled()
    return (Topology()
            .add_global_store(store, "G-SOURCE", "reference", "G-UPDATE", GlobalUpdater, key_serde=S, value_serde=S)
            .add_source("SOURCE", "in", key_serde=S, value_serde=S)
            .add_processor("STAMP", Stamp, "SOURCE")
            .add_sink("SINK", "out", "STAMP", key_serde=S, value_serde=S))  # fmt: skip


@pytest.mark.parametrize("call", sorted(REFUSED))
def test_the_driver_refuses_the_call_from_a_global_processors_init(call: str, tmp_path: Path) -> None:
    make, message = REFUSED[call]
    with pytest.raises(StreamsError, match=message):
        TopologyTestDriver(global_topology(in_init=make), {"state.dir": str(tmp_path)})


def test_a_global_processor_reading_stream_time_fails_on_its_record_and_a_task_reads_its_own(tmp_path: Path) -> None:
    make, message = REFUSED["stream-time"]
    with TopologyTestDriver(global_topology(in_process=make), {"state.dir": str(tmp_path)}) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", timestamp=42)
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [("k", "42")], \
            "a stream task's processor reads its stream time"  # fmt: skip
        with pytest.raises(StreamsError, match=message):
            driver.create_input_topic("reference", S, S).pipe_input("r", "x", timestamp=7)


@pytest.mark.parametrize("call", sorted(REFUSED))
async def test_an_instance_whose_global_processor_makes_the_call_fails_to_start(call: str, tmp_path: Path) -> None:
    make, message = REFUSED[call]
    cluster = FakeKafkaCluster()
    for topic in ("in", "out", "reference"):
        cluster.create_topic(topic, 1)
    instance = Instance(cluster, global_topology(in_init=make), streams_config(tmp_path))
    with pytest.raises(StreamsError, match=message):
        await instance.start()
    await eventually(lambda: instance.streams.state is KafkaStreams.State.ERROR, what="ERROR (a global store that fails to start)")
    await instance.close()
