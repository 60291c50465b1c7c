"""SubtopologyExecutor: one sub-topology run on a Spark executor by the task core of our runtime.

Spark calls Python with Kafka rows (fused stateless stage: one Arrow batch at a time; keyed stage:
one key's rows per call); the executor deserializes them with the sources' serdes, runs them
depth-first through the very processors `KafkaStreams` would build (`TaskProcessor`), and returns
what the sinks serialized. So filters, maps, branches, merges and custom stateless processors
behave and encode exactly as on our runtime. Key-value stores are `KeyedStateStore`s: the one
key's entries, loaded from and saved to Spark state around each call.
"""

from __future__ import annotations

import copyreg
import heapq
import io
import logging
import pickle
import struct
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from streams_core.config import StreamsConfig
from streams_core.processor.internals.node_factories import ProcessorNodeFactory
from streams_core.processor.internals.processor_node import ProcessorNode
from streams_core.processor.internals.punctuation_queue import PunctuationSchedule
from streams_core.processor.internals.task_processor import TaskProcessor
from streams_core.processor.processor import Headers, PunctuationType, Punctuator
from streams_core.processor.task_id import TaskId
from streams_core.processor.topology import Topology
from streams_core.spark.errors import UnsupportedOnSparkError
from streams_core.spark.keyed_state_store import KeyedStateStore
from streams_core.state.store import RestoreCallback, StateStore

__all__ = [
    "TIMESTAMP_HEADER",
    "InputRow",
    "OutputRow",
    "SubtopologyExecutor",
    "SubtopologySpec",
    "kafka_order",
    "load_topology",
    "ship_topology",
]

log = logging.getLogger(__name__)

#: Spark's Kafka sink cannot set a record's timestamp, so records written to topics the topology
#: reads back (repartition and `through` topics) carry it in this header (8 bytes, big-endian);
#: the reading side takes the timestamp from it and drops the header.
TIMESTAMP_HEADER = "streams-core.spark.timestamp"
_TS = struct.Struct(">q")


class InputRow(NamedTuple):
    """One Kafka record as the Spark source gives it (timestamp in ms)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers


class OutputRow(NamedTuple):
    """One record for Spark's Kafka sink: no partition column, so the producer's murmur2 picks it."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def _reduce_struct(packer: struct.Struct) -> tuple[Any, tuple[str]]:
    return struct.Struct, (packer.format,)


# Serdes hold precompiled `struct.Struct`s, which pickle cannot copy: rebuild them from their format.
copyreg.pickle(struct.Struct, _reduce_struct)


def ship_topology(topology: Topology) -> bytes:
    """The topology as cloudpickle bytes for executors, without processors built so far.

    A processor factory remembers the last processor it built (to refuse suppliers that return
    the same instance twice); that processor and its task stay behind.
    """
    from pyspark import cloudpickle

    base: Any = cloudpickle.Pickler

    class _Pickler(base):  # type: ignore[misc]
        def reducer_override(self, obj: Any) -> Any:
            if type(obj) is ProcessorNodeFactory:
                return ProcessorNodeFactory, (obj.name, obj.parents, obj.make_processor, obj.store_names, None)
            return super().reducer_override(obj)

    buffer = io.BytesIO()
    pickler: Any = _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dump(topology)
    return buffer.getvalue()


def load_topology(payload: bytes) -> Topology:
    topology: Topology = pickle.loads(payload)
    return topology


@dataclass(frozen=True)
class SubtopologySpec:
    """What a Spark task needs to rebuild a sub-topology (a small picklable value)."""

    topology: bytes
    props: Mapping[str, Any]
    subtopology_id: int
    readback_topics: frozenset[str]


def kafka_order(rows: Iterable[InputRow]) -> list[InputRow]:
    """Rows in the order a Kafka Streams task takes them: offset order per partition, and across
    partitions the head with the lowest timestamp first (PartitionGroup's choice)."""
    by_partition: dict[tuple[str, int], list[InputRow]] = {}
    for row in rows:
        by_partition.setdefault((row.topic, row.partition), []).append(row)
    if len(by_partition) == 1:
        (only,) = by_partition.values()
        return sorted(only, key=lambda r: r.offset)
    queues = [sorted(part, key=lambda r: r.offset) for part in by_partition.values()]
    return list(heapq.merge(*queues, key=lambda r: r.timestamp))


class _StateManager:
    """The task's state manager: the keyed stores, nothing on disk."""

    def __init__(self, task_dir: Path) -> None:
        self._task_dir = task_dir
        self._stores: dict[str, StateStore] = {}

    @property
    def task_dir(self) -> Path:
        return self._task_dir

    def register(self, store: StateStore, restore_callback: RestoreCallback | None = None) -> None:
        self._stores[store.name] = store

    def get_store(self, name: str) -> StateStore | None:
        return self._stores.get(name)

    @property
    def stores(self) -> Mapping[str, StateStore]:
        return self._stores

    def flush(self) -> None:
        """Spark state is saved by the keyed stage after each key."""

    def close(self) -> None:
        self._stores.clear()


class _Collector:
    """The RecordCollector: sink output becomes Spark rows (with the timestamp header for read-back topics)."""

    def __init__(self, readback_topics: frozenset[str]) -> None:
        self.rows: list[OutputRow] = []
        self._readback = readback_topics

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers,
        partition: int | None,
    ) -> None:  # fmt: skip
        out = [(str(k), bytes(v)) for k, v in headers]
        if topic in self._readback:
            out.append((TIMESTAMP_HEADER, _TS.pack(timestamp)))
        self.rows.append(OutputRow(topic, key, value, out))

    def partitions_for(self, topic: str) -> int:
        raise UnsupportedOnSparkError("a custom StreamPartitioner", topic, "the Spark sink partitions by murmur2 only")


class _SparkTaskProcessor(TaskProcessor):
    """A TaskProcessor that refuses punctuations: Spark has no per-task stream-time clock to fire them."""

    def schedule(
        self, node: ProcessorNode, interval_ms: int, punctuation_type: PunctuationType, punctuator: Punctuator
    ) -> PunctuationSchedule:
        raise UnsupportedOnSparkError(
            f"{type(node.processor).__name__}.schedule()", node.name, "punctuations have no Spark equivalent"
        )


class SubtopologyExecutor:
    """Builds the sub-topology once and runs batches of Kafka rows through it."""

    def __init__(self, spec: SubtopologySpec, partition: int = 0) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="streams-core-spark-")
        props = dict(spec.props)
        props["state.dir"] = self._tmp.name
        config = StreamsConfig(props)
        builder = load_topology(spec.topology).internal_topology_builder
        builder.set_application_id(config["application.id"])
        built = builder.build_subtopology(spec.subtopology_id, config)
        self.stores: dict[str, KeyedStateStore] = {name: KeyedStateStore(name) for name in built.state_stores}
        built.state_stores.clear()
        built.state_stores.update(self.stores)
        self._collector = _Collector(spec.readback_topics)
        task_id = TaskId(spec.subtopology_id, partition)
        self._task = _SparkTaskProcessor(
            task_id, built, config, _StateManager(Path(self._tmp.name)), self._collector
        )
        self._task.init()

    def process(self, rows: Iterable[InputRow]) -> list[OutputRow]:
        """Run the rows in the given order; the sinks' output, in order."""
        task = self._task
        for row in rows:
            timestamp, headers = _event_time(row)
            record = task.deserialize(row.topic, row.partition, row.offset, timestamp, row.key, row.value, headers)
            if record is None:
                continue
            extracted = task.extract_timestamp(record, task.stream_time)
            if extracted is None:
                continue
            if extracted > task.stream_time:
                task.stream_time = extracted
            task.process(record, extracted)
        out = self._collector.rows
        self._collector.rows = []
        return out

    def close(self) -> None:
        try:
            self._task.close()
        finally:
            self._tmp.cleanup()


def _event_time(row: InputRow) -> tuple[int, Headers]:
    """The record's timestamp and headers, with the Spark runner's timestamp header taken out."""
    headers = row.headers
    if headers and headers[-1][0] == TIMESTAMP_HEADER:
        return _TS.unpack(headers[-1][1])[0], tuple(headers[:-1])
    return row.timestamp, headers


def iter_rows(rows: Iterable[Any]) -> Iterator[InputRow]:
    """InputRows from mappings or Spark Rows with the source's column names."""
    for r in rows:
        get = r.__getitem__
        headers = get("headers") or ()
        yield InputRow(
            get("topic"), get("partition"), get("offset"), get("timestamp"), get("key"), get("value"),
            tuple((h["key"], h["value"]) for h in headers),
        )  # fmt: skip
