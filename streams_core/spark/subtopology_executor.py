"""SubtopologyExecutor: one sub-topology run on a Spark executor by the task core of our runtime.

Spark calls Python with Kafka rows (fused stateless stage: one Arrow batch at a time; keyed stage:
one key's rows per call); the executor deserializes them with the sources' serdes, runs them
depth-first through the very processors `KafkaStreams` would build (`TaskProcessor`), and returns
what the sinks serialized. So filters, maps, branches, merges and custom stateless processors
behave and encode exactly as on our runtime. Key-value stores keep their serdes over a
`KeyedStateStore`: the one key's changelog entries (bytes), loaded from and saved to Spark state
around each call.

Re-exported for the callers that import them from here: the Kafka rows and runner headers
(`spark_rows`) and the carried stream-time punctuations (`carried_punctuations`).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streams_core.clients.ports import RawRecord
from streams_core.common.headers import Headers
from streams_core.common.store import RestoreCallback, StateStore
from streams_core.common.task_id import TaskId
from streams_core.config import StreamsConfig
from streams_core.errors import DeserializationError, StreamsError
from streams_core.processor.internals import topology_shipping
from streams_core.processor.internals.processor_node import ProcessorNode, SinkNode, SourceNode
from streams_core.processor.internals.record_deserializer import DeserializationHandler, resolve_deserialization_handler
from streams_core.processor.internals.stateless_chain import Emit, compose, fused_nodes
from streams_core.processor.internals.stream_time import StreamTime
from streams_core.processor.internals.task_processor import RecordReader, TaskProcessor
from streams_core.processor.processor import Record
from streams_core.processor.topology import Topology
from streams_core.runtime.tasks.dead_letter_sink import DeadLetterSink, RecordSender
from streams_core.spark.carried_punctuations import SCHEDULES, PunctuationNeedsTask, Schedule, SparkTaskProcessor
from streams_core.spark.keyed_state_store import KeyedStateStore, keyed_store
from streams_core.spark.spark_rows import (
    ORIGIN_HEADER,
    TIMESTAMP_HEADER,
    InputRow,
    OutputRow,
    event_time,
    iter_rows,
    kafka_order,
    origin_header,
    runner_headers,
    timestamp_header,
)
from streams_core.state.internals.store_names import store_changelog_topic
from streams_core.state.versioned_key_value_store import VersionedKeyValueStore

__all__ = [
    "ORIGIN_HEADER",
    "SCHEDULES",
    "TIMESTAMP_HEADER",
    "InputRow",
    "OutputRow",
    "PunctuationNeedsTask",
    "SubtopologyExecutor",
    "SubtopologySpec",
    "deserialization_handler",
    "event_time",
    "iter_rows",
    "kafka_order",
    "load_topology",
    "ship_topology",
]

log = logging.getLogger(__name__)

new_record = tuple.__new__


#: Key of a versioned store's observed stream time in `carried_state()`: (VERSIONED, store name).
VERSIONED = "versioned-store"


def ship_topology(topology: Topology) -> bytes:
    """The topology as bytes for executors (`topology_shipping.ship`: user code by value)."""
    return topology_shipping.ship(topology)


def load_topology(payload: bytes) -> Topology:
    topology: Topology = topology_shipping.load(payload)
    return topology


@dataclass(frozen=True)
class SubtopologySpec:
    """What a Spark task needs to rebuild a sub-topology (a small picklable value)."""

    topology: bytes
    props: Mapping[str, Any]
    subtopology_id: int
    readback_topics: frozenset[str]
    stamp_origin: bool = False
    #: True for the task stage: the sub-topology's own stores, restored from and logged to a
    #: changelog the stage keeps in Spark state (see `restore_changelog`, `take_changelog`).
    task_stores: bool = False
    #: Partition counts of the sink topics, for sinks with a custom `StreamPartitioner` (set by
    #: the runner when a query starts).
    sink_partitions: Mapping[str, int] = field(default_factory=dict)
    #: The global topics' records up to their end when the run started (read by the runner), which
    #: fill the global stores before the task's first record, as a global thread bootstraps.
    global_records: tuple[InputRow, ...] = ()
    #: Task stage reading several topics: per source partition, the offset of its last record when
    #: the run started. A task holds its records while one of its partitions is empty and has not
    #: been read up to there (`partition_group.take_ready`: Kafka Streams waits for it the same way).
    wait_offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)
    #: A Spark accumulator counting the records the deserialization handler skipped (set by the
    #: runner when a query starts; None in tests without Spark).
    skipped: Any = field(default=None, compare=False)

    def count_skipped(self, records: int) -> None:
        """Add to the query's count of records the deserialization handler skipped."""
        if records and self.skipped is not None:
            self.skipped.add(records)


class _StateManager:
    """The task's state manager: its stores and their restore callbacks; state lives in Spark."""

    def __init__(self, task_dir: Path, global_stores: Mapping[str, StateStore] | None = None) -> None:
        self._task_dir = task_dir
        self._stores: dict[str, StateStore] = {}
        self._global_stores = global_stores or {}
        self.restore_callbacks: dict[str, RestoreCallback] = {}

    @property
    def task_dir(self) -> Path:
        return self._task_dir

    def register(self, store: StateStore, restore_callback: RestoreCallback | None = None) -> None:
        self._stores[store.name] = store
        if restore_callback is not None:
            self.restore_callbacks[store.name] = restore_callback

    def get_store(self, name: str) -> StateStore | None:
        return self._stores.get(name) or self._global_stores.get(name)

    @property
    def stores(self) -> Mapping[str, StateStore]:
        return self._stores

    def flush(self) -> None:
        """Flush caching stores (their changelog writes reach the collector); the stage saves Spark state."""
        for store in self._stores.values():
            store.flush()

    def close(self) -> None:
        self._stores.clear()


class _Collector:
    """The RecordCollector: sink output becomes Spark rows (with the runner's headers for read-back topics)."""

    keeps_store_bytes = True
    """The ChangeLogging layers send the stores' own bytes (a timestamped store's value with its
    timestamp in front, not Java's changelog format): the task stage keeps them in Spark state and
    restores them through the stores' restore callbacks, never through a Kafka changelog."""

    def __init__(self, readback_topics: frozenset[str], stamp_origin: bool, sink_partitions: Mapping[str, int]) -> None:
        self.rows: list[OutputRow] = []
        self._sink_partitions = sink_partitions
        self._readback = readback_topics
        self._stamp = stamp_origin
        self.changelog_topics: frozenset[str] = frozenset()
        self.changelog: dict[tuple[str, bytes], bytes | None] = {}
        self.origin: tuple[str, int, int] = ("", 0, 0)
        self.index = 0

    def start(self, row: InputRow) -> None:
        """The next sends come from `row`."""
        self.origin = (row.topic, row.partition, row.offset)
        self.index = 0

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers,
        partition: int | None,
    ) -> None:  # fmt: skip
        if topic in self.changelog_topics:
            assert key is not None, "changelog records have keys"
            self.changelog[(topic, key)] = value
            return
        out = [(str(k), bytes(v)) for k, v in headers]
        if topic in self._readback:
            out.append(timestamp_header(timestamp))
            if self._stamp:
                out.append(origin_header(*self.origin, self.index))
                self.index += 1
        self.rows.append(OutputRow(topic, key, value, out, partition))

    def partitions_for(self, topic: str) -> int:
        count = self._sink_partitions.get(topic)
        if count is None:
            raise StreamsError(f"the partition count of {topic!r} is unknown (does the topic exist?)")
        return count


class SubtopologyExecutor:
    """Builds the sub-topology once and runs batches of Kafka rows through it."""

    def __init__(self, spec: SubtopologySpec, partition: int = 0, schedules: Iterable[Schedule] = ()) -> None:
        """`schedules`: the task's stream-time schedules of an earlier batch (`carried_state()[SCHEDULES]`)."""
        self._tmp = tempfile.TemporaryDirectory(prefix="streams-core-spark-")
        props = dict(spec.props)
        props["state.dir"] = self._tmp.name
        config = StreamsConfig(props)
        builder = load_topology(spec.topology).internal_topology_builder
        application_id = config["application.id"]
        builder.set_application_id(application_id)
        if spec.task_stores:
            for name in builder.state_store_names:
                store_builder = builder.store_builder(name)
                if not store_builder.logging_enabled:  # its changelog is what the stage keeps between batches
                    store_builder.with_logging_enabled()
        built = builder.build_subtopology(spec.subtopology_id, config)
        self.stores: dict[str, KeyedStateStore] = {}
        if not spec.task_stores:
            for name, store in list(built.state_stores.items()):
                built.state_stores[name], self.stores[name] = keyed_store(store)
        self._nodes = built.nodes
        #: Versioned stores: their observed stream time is carried with the task (their versions are in the changelog).
        self._versioned = {name: s for name, s in built.state_stores.items() if isinstance(s, VersionedKeyValueStore)}
        self._global = _global_task(builder, config, Path(self._tmp.name, "global"), spec.global_records)
        global_stores = {} if self._global is None else dict(self._global.topology.state_stores)
        self._collector = _Collector(spec.readback_topics, spec.stamp_origin, spec.sink_partitions)
        self._state = _StateManager(Path(self._tmp.name), global_stores)
        task_id = TaskId(spec.subtopology_id, partition)
        #: Records the deserialization handler skipped (or sent to the dead-letter topic) so far.
        self.skipped_records = 0
        self._task = SparkTaskProcessor(task_id, built, config, self._state, self._collector,
                                         deserialization_handler=self._counting(deserialization_handler(config, self._collector)),
                                         punctuations=spec.task_stores, carried=schedules)
        self._task.init()
        self._readers: dict[tuple[str, int], tuple[RecordReader, SourceNode]] = {}
        self._fused = _fused_chains(built.sources) if not built.state_stores and self._global is None else None
        self._changelogs = {store_changelog_topic(application_id, name): name for name in self._state.restore_callbacks}
        if spec.task_stores:
            self._collector.changelog_topics = frozenset(self._changelogs)

    def _counting(self, handler: DeserializationHandler | None) -> DeserializationHandler | None:
        """`handler`, counting in `skipped_records` the records it lets the task skip."""
        if handler is None:
            return None

        def counted(error: DeserializationError, raw: RawRecord) -> bool:
            skip = handler(error, raw)
            self.skipped_records += bool(skip)
            return skip

        return counted

    def process(
        self, rows: Iterable[InputRow], applied: dict[tuple[str, int], tuple[int, int]] | None = None
    ) -> list[OutputRow]:
        """Run the rows in the given order; the sinks' output, in order.

        With `applied` (origin partition -> last origin (offset, index) applied, kept by the
        caller), rows whose origin was applied already are replays and are skipped.
        """
        task = self._task
        collector = self._collector
        punctuations = task.stream_time_punctuations
        for row in rows:
            timestamp, headers, origin = runner_headers(row)
            if applied is not None and origin is not None:
                source, position = (origin[0], origin[1]), (origin[2], origin[3])
                last = applied.get(source)
                if last is not None and position <= last:
                    log.debug("skipping a replayed record from %s (applied up to %s)", origin, last)
                    continue
                applied[source] = position
            collector.start(row)
            if timestamp != row.timestamp or headers is not row.headers:
                row = row._replace(timestamp=timestamp, headers=headers)
            reader, node = self._reader(row.topic, row.partition)
            record = reader(row)
            if record is None:
                continue
            task.clock.advance(record.timestamp)
            if self._fused is None:
                task.process_record(node, record, row.topic, row.partition, row.offset)
                if task.clock.value >= punctuations.due:  # as the runtime's StreamTask, after each record
                    task.maybe_punctuate_stream_time()
                continue
            try:
                self._fused[node.name](*record)
            except Exception as exc:
                exc.add_note(f"while processing a record of task {task.task_id}: topic={row.topic}, "
                             f"partition={row.partition}, offset={row.offset}, timestamp={record.timestamp}")
                raise
        return self.take_rows()

    def _reader(self, topic: str, partition: int) -> tuple[RecordReader, SourceNode]:
        """The task's record pipeline of one input partition and its source; the partition time
        it gives extractors lives as long as this executor."""
        found = self._readers.get((topic, partition))
        if found is None:
            found = self._readers[topic, partition] = (
                self._task.record_reader(topic, StreamTime()), self._task.source_node(topic)
            )
        return found

    def commit(self) -> list[OutputRow]:
        """Flush the stores' caches as a commit does; the sinks' output that forwarded."""
        self._task.commit()
        return self.take_rows()

    def punctuate_wall_clock(self, now: int | None) -> tuple[list[OutputRow], int | None]:
        """Fire the wall-clock punctuations due at `now` (None: none fire): their output, and when the
        next is due (None: none is scheduled)."""
        if now is not None:
            self._task.maybe_punctuate_wall_clock(now)
        return self.take_rows(), self._task.wall_clock_due

    def take_rows(self) -> list[OutputRow]:
        """The sinks' output since the last call, in order."""
        out = self._collector.rows
        self._collector.rows = []
        return out

    # -- the task stage: the task's stores and stream time carried between micro-batches --------

    def restore_changelog(self, entries: Iterable[tuple[str, bytes, bytes]]) -> None:
        """Restore the stores from their changelog (topic, key, value) as saved by the stage, through
        the stores' own restore path."""
        by_topic: dict[str, list[tuple[bytes, bytes | None]]] = {}
        for topic, key, value in entries:
            by_topic.setdefault(topic, []).append((key, value))
        for topic, records in by_topic.items():
            restore = self.restore_callback(topic)
            if restore is None:
                log.warning("changelog %s in Spark state belongs to no store of this sub-topology; ignored", topic)
                continue
            restore(records)

    def restore_callback(self, changelog_topic: str) -> RestoreCallback | None:
        """How the store of `changelog_topic` restores (its bound `restore_batch`), None if no store logs there."""
        name = self._changelogs.get(changelog_topic)
        return None if name is None else self._state.restore_callbacks[name]

    def take_changelog(self) -> dict[tuple[str, bytes], bytes | None]:
        """Flush the stores and return what they wrote to their changelogs since the last call."""
        self._task.commit()
        changes = self._collector.changelog
        self._collector.changelog = {}
        return changes

    def carried_state(self) -> dict[Any, Any]:
        """The task's stream time, its stream-time schedules (`SCHEDULES`) and what its processors
        keep outside stores (by node name)."""
        carried: dict[Any, Any] = {"": self._task.stream_time}
        if schedules := self._task.schedules():
            carried[SCHEDULES] = schedules
        for node in self._nodes:
            state = getattr(node.processor, "carried_state", None)
            if state is not None:
                carried[node.name] = state()
        for name, store in self._versioned.items():
            carried[(VERSIONED, name)] = store.observed_stream_time
        return carried

    def restore_carried_state(self, carried: Mapping[Any, Any]) -> None:
        """Resume from `carried_state()` of an earlier batch of the same task."""
        self._task.stream_time = carried.get("", self._task.stream_time)
        for node in self._nodes:
            if node.name and node.name in carried:
                node.processor.restore_carried_state(carried[node.name])
        for name, store in self._versioned.items():
            store.observed_stream_time = carried.get((VERSIONED, name), store.observed_stream_time)

    def close(self) -> None:
        try:
            self._task.close()
            if self._global is not None:
                self._global.close()
        finally:
            self._tmp.cleanup()


def _fused_chains(sources: Iterable[SourceNode]) -> dict[str, Emit] | None:
    """Each source's fused stateless chain down to its sinks (`stateless_chain`), when every processor
    of the sub-topology fuses and every sink has a fixed topic; None otherwise (the TaskProcessor path)."""
    chains: dict[str, Emit] = {}
    for source in sources:
        _, terminals = fused_nodes(source)
        if not all(isinstance(t, SinkNode) and t.topic is not None for t in terminals):
            return None

        def terminal(node: ProcessorNode) -> Emit:
            process = node.process
            return lambda key, value, timestamp, headers: process(new_record(Record, (key, value, timestamp, headers)))

        chains[source.name] = compose(source, terminal)
    return chains


def _global_task(builder: Any, config: StreamsConfig, task_dir: Path, rows: Iterable[InputRow]) -> TaskProcessor | None:
    """The global stores' task, its stores filled with `rows` in order (None without global stores)."""
    topology = builder.build_global_subtopology(config)
    if topology is None:
        return None
    task_dir.mkdir(parents=True, exist_ok=True)
    task = SparkTaskProcessor(TaskId(topology.subtopology_id, 0), topology, config, _StateManager(task_dir),
                               _Collector(frozenset(), False, {}), punctuations=None, global_task=True)
    task.init()
    readers: dict[str, tuple[RecordReader, SourceNode]] = {}
    for row in rows:
        if row.topic not in readers:
            readers[row.topic] = (task.record_reader(row.topic, StreamTime(), extract_timestamps=False), task.source_node(row.topic))
        reader, source = readers[row.topic]
        record = reader(row)
        if record is not None:
            task.process_record(source, record, row.topic, row.partition, row.offset)
    task.commit()
    return task


def deserialization_handler(config: StreamsConfig, sender: RecordSender) -> DeserializationHandler | None:
    """`default.deserialization.exception.handler` as the runtime applies it, its dead letters written
    through `sender` (the stage's output rows, so the query's Kafka sink writes them)."""
    dead_letters = DeadLetterSink(sender, config["errors.dead.letter.queue.topic.name"])
    return resolve_deserialization_handler(config["default.deserialization.exception.handler"], dead_letters.send)
