"""TaskProcessor: the processing core of one active task, shared by the runtime, the driver and Spark.

It is the part of Kafka Streams' `StreamTask` that runs user code: it owns the task's
`ProcessorTopology`, its `ProcessorContextImpl` and punctuation queues, and talks to a state
manager and a record collector given by its owner. The owner (the runtime's `StreamTask` with
its partition group, which the `TopologyTestDriver` runs too, the global task, or Spark's
executor) picks records, keeps stream time and commits:

1. `init()` (or `init_state_stores()`, restore, then `init_processors()`);
2. per consumed record: the partition's `record_reader(topic, partition_time)` turns the raw
   record into a `Record` (or None: skipped), the owner advances `stream_time`, then
   `process_record(source, record, ...)` runs it through the sub-topology depth-first: the
   stateless DSL operators below each source as one function composed at `init_processors`
   (`stateless_chain.compose`), the other nodes node by node. This is the one record path of
   the runtime's `StreamTask` (which the test driver runs too) and of Spark;
3. `maybe_punctuate_stream_time(stream_time)` and `maybe_punctuate_wall_clock(now)`;
4. when `commit_needed` (and at once when `commit_requested`): `prepare_commit()` (flush the
   stores), flush the producer, commit offsets, `post_commit()`; or `commit()` with no offsets;
5. `close()`: processors first, then the stores.

An exception from user code propagates unchanged, with a note naming the task, the processor and
the input record (topic, partition, offset).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from streams_core.common.store import RestoreCallback, StateStore
from streams_core.common.task_id import TaskId
from streams_core.config import StreamsConfig
from streams_core.errors import DeserializationError, StreamsError
from streams_core.processor.consumer_record import ConsumerRecord
from streams_core.processor.internals.processor_context_impl import ProcessorContextImpl
from streams_core.processor.internals.processor_node import ProcessorNode, SinkNode, SourceNode
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.processor.internals.punctuation_queue import PunctuationQueue, PunctuationSchedule
from streams_core.processor.internals.record_collector import RecordCollector
from streams_core.processor.internals.record_deserializer import DeserializationHandler, RecordDeserializer
from streams_core.processor.internals.stateless_chain import Emit, compose, fusable
from streams_core.processor.internals.stream_time import UNKNOWN_TIME, StreamTime
from streams_core.processor.processor import PunctuationType, Punctuator, Record
from streams_core.processor.timestamp_extractor import FailOnInvalidTimestamp, LogAndSkipOnInvalidTimestamp
from streams_core.serde import Serdes

if TYPE_CHECKING:
    from streams_core.clients.ports import RawRecord

__all__ = ["UNKNOWN_TIME", "RecordReader", "StateManager", "TaskProcessor", "TaskProcessorState"]

log = logging.getLogger(__name__)

new_record = tuple.__new__
"""Builds a Record from its fields without the Python-level NamedTuple constructor (hot path)."""

_OWN_TIMESTAMP_EXTRACTORS = (FailOnInvalidTimestamp, LogAndSkipOnInvalidTimestamp)
"""Extractors that keep a valid record timestamp: the record pipeline reads it directly."""
_STRING_DESERIALIZE = Serdes.String().deserialize
"""A source with this deserializer for key and value: the record pipeline decodes UTF-8 itself."""
_BYTES_DESERIALIZE = Serdes.Bytes().deserialize
"""A source with this (identity) deserializer for key and value: the pipeline takes the bytes as they are."""


RecordReader: TypeAlias = "Callable[[RawRecord], Record[Any, Any] | None]"
"""One partition's record pipeline (`TaskProcessor.record_reader`): a raw record to the `Record`
to process, or None when it was skipped."""


def _plain_sink(node: ProcessorNode) -> bool:
    """A sink with a fixed topic: it reads nothing from the context."""
    return isinstance(node, SinkNode) and node.topic is not None


def system_time_ms() -> int:
    return time.time_ns() // 1_000_000


class StateManager(Protocol):
    """What the task needs from its state manager (ProcessorStateManager in streams_core.state)."""

    @property
    def task_dir(self) -> Path:
        """The task's state directory: <state.dir>/<application.id>/<task id>."""
        ...

    def register(self, store: StateStore, restore_callback: RestoreCallback | None = None) -> None: ...

    def get_store(self, name: str) -> StateStore | None: ...

    @property
    def stores(self) -> Mapping[str, StateStore]: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class TaskProcessorState(Enum):
    CREATED = "CREATED"
    STORES_INITIALISED = "STORES_INITIALISED"
    RUNNING = "RUNNING"
    CLOSED = "CLOSED"


class TaskProcessor:
    """Runs records and punctuations of one task through its sub-topology.

    Stream time is the `StreamTime` cell `clock`, advanced by the owner (the runtime's partition
    group, or Spark's executor) before `process_record`; `maybe_punctuate_stream_time(t)` raises
    it to t.
    """

    def __init__(
        self,
        task_id: TaskId,
        topology: ProcessorTopology,
        config: StreamsConfig,
        state_manager: StateManager,
        record_collector: RecordCollector,
        *,
        deserialization_handler: DeserializationHandler | None = None,
        wall_clock: Callable[[], int] = system_time_ms,
        global_task: bool = False,
    ) -> None:
        """`global_task`: the global stores' processors (their context refuses `schedule()` and
        `current_stream_time_ms()`, as Kafka's GlobalProcessorContextImpl: the global thread runs no
        punctuations and keeps no stream time)."""
        self.task_id = task_id
        self.global_task = global_task
        self.topology = topology
        self.clock = StreamTime()
        self.commit_needed = False
        self.commit_requested = False
        self.wall_clock_time = wall_clock
        self._state = TaskProcessorState.CREATED
        self._state_manager = state_manager
        self._context = ProcessorContextImpl(self, config, state_manager, record_collector)
        self._deserializer = RecordDeserializer(deserialization_handler)
        self._dropped_by_timestamp = 0
        self._stream_time_punctuations = PunctuationQueue()
        self._wall_clock_punctuations = PunctuationQueue()
        self._chains: dict[SourceNode, Emit] = {}
        """Per source with fused operators (or only plain sinks) below it: its composed chain."""

    def __repr__(self) -> str:
        return f"TaskProcessor({self.task_id}, {self._state.name})"

    @property
    def stream_time_punctuations(self) -> PunctuationQueue:
        """The stream-time schedules (`due` tells the runtime's loop when to call `maybe_punctuate_stream_time`)."""
        return self._stream_time_punctuations

    @property
    def stream_time(self) -> int:
        """The task's stream time (the `clock` cell's value)."""
        return self.clock.value

    @stream_time.setter
    def stream_time(self, value: int) -> None:
        self.clock.value = value

    @property
    def state(self) -> TaskProcessorState:
        return self._state

    @property
    def context(self) -> ProcessorContextImpl:
        return self._context

    @property
    def dropped_records(self) -> int:
        """Records dropped: skipped by the deserialization handler, for a negative extracted timestamp,
        or by the DSL's processors (null keys, records too late for their window), as Kafka Streams'
        `dropped-records` metric."""
        dropped_by_processors = sum(getattr(node.processor, "dropped_records", 0) for node in self.topology.nodes)
        return self._deserializer.dropped_records + self._dropped_by_timestamp + dropped_by_processors

    # -- lifecycle ----------------------------------------------------------------------------

    def init(self) -> None:
        """Initialise the stores, then the processors (no restoration in between)."""
        self.init_state_stores()
        self.init_processors()

    def init_state_stores(self) -> None:
        """Initialise every store of the sub-topology; each registers with the state manager."""
        self._expect(TaskProcessorState.CREATED, "initialise its state stores")
        for name, store in self.topology.state_stores.items():
            store.init(self._context, store)
            if self._state_manager.get_store(name) is None:
                raise StreamsError(f"task {self.task_id}: state store {name!r} did not register itself in init()")
        self._state = TaskProcessorState.STORES_INITIALISED
        log.debug("Task %s: state stores initialised: %s", self.task_id, list(self.topology.state_stores))

    def init_processors(self) -> None:
        """Initialise the nodes in topological order (each processor's `init(context)`)."""
        self._expect(TaskProcessorState.STORES_INITIALISED, "initialise its processors")
        context = self._context
        for node in self.topology.nodes:
            context.init_node = node
            try:
                node.init(context)
            except Exception as exc:
                exc.add_note(f"while initialising processor {node.name!r} of task {self.task_id}")
                raise
            finally:
                context.init_node = None
        self._chains = {source: chain for source in self.topology.sources if (chain := self._chain(source)) is not None}
        self._state = TaskProcessorState.RUNNING
        log.info("Task %s: running (sub-topology %d)", self.task_id, self.topology.subtopology_id)

    def close(self) -> None:
        """Close the processors in topological order, then the stores; the first error is raised."""
        if self._state is TaskProcessorState.CLOSED:
            return
        errors: list[BaseException] = []
        context = self._context
        context.node = None
        if self._state is TaskProcessorState.RUNNING:
            for node in self.topology.nodes:
                context.init_node = node
                try:
                    node.close()
                except Exception as exc:
                    exc.add_note(f"while closing processor {node.name!r} of task {self.task_id}")
                    errors.append(exc)
            context.init_node = None
        self._stream_time_punctuations.clear()
        self._wall_clock_punctuations.clear()
        try:
            self._state_manager.close()
        except Exception as exc:
            exc.add_note(f"while closing the state stores of task {self.task_id}")
            errors.append(exc)
        self._state = TaskProcessorState.CLOSED
        log.info("Task %s: closed", self.task_id)
        for extra in errors[1:]:
            log.error("Task %s: further error while closing: %r", self.task_id, extra)
        if errors:
            raise errors[0]

    # -- records ------------------------------------------------------------------------------

    def source_node(self, topic: str) -> SourceNode:
        """The source reading `topic` in this task's sub-topology."""
        source = self.topology.source(topic)
        if source is None:
            raise StreamsError(
                f"task {self.task_id} has no source for topic {topic!r} "
                f"(its sources read {sorted(self.topology.source_topics)})"
            )
        return source

    def _drop_negative_timestamp(self, record: ConsumerRecord, timestamp: int) -> None:
        self._dropped_by_timestamp += 1
        log.warning(
            "Task %s: dropping record at topic=%s, partition=%d, offset=%d: negative extracted timestamp %d",
            self.task_id,
            record.topic,
            record.partition,
            record.offset,
            timestamp,
        )

    def record_reader(self, topic: str, partition_time: StreamTime, *, extract_timestamps: bool = True) -> RecordReader:
        """The pipeline of one partition, built once: raw bytes → the source's key and value serdes
        → the timestamp → the processor `Record`, one object per consumed record; None when skipped.

        A failure goes to the deserialization handler; a negative timestamp is dropped, logged and
        counted. Extractors other than the two that keep the record's own timestamp see a
        ConsumerRecord and `partition_time.value`: Kafka Streams' partition time, the highest
        timestamp this reader extracted so far (UNKNOWN at first). The reader advances the cell
        only for those extractors: the other two never read it, and the default path stays as
        cheap as it was. `extract_timestamps=False` keeps every record's own timestamp, with no
        extractor and no negative-timestamp drop: a global store's update (GlobalStateUpdateTask).
        """
        source = self.source_node(topic)
        key_of = source.key_serde.deserialize
        value_of = source.value_serde.deserialize
        extract = source.extract_timestamp
        own_timestamp = not extract_timestamps or isinstance(getattr(extract, "__self__", None), _OWN_TIMESTAMP_EXTRACTORS)
        on_error = self._deserializer.skip_or_raise
        drop = self._drop_negative_timestamp
        # Serdes.String() or Serdes.Bytes() both ways (the common cases): two Python calls fewer a record
        texts = key_of == _STRING_DESERIALIZE and value_of == _STRING_DESERIALIZE
        raw_bytes = key_of == _BYTES_DESERIALIZE and value_of == _BYTES_DESERIALIZE

        def read(raw: RawRecord) -> Record[Any, Any] | None:
            key: Any
            value: Any
            try:
                if raw_bytes:
                    key, value = raw.key, raw.value
                elif texts:
                    raw_key, raw_value = raw.key, raw.value
                    try:
                        key = None if raw_key is None else raw_key.decode()
                        value = None if raw_value is None else raw_value.decode()
                    except UnicodeDecodeError:  # the serde's own DeserializationError
                        key, value = key_of(topic, raw_key), value_of(topic, raw_value)
                else:
                    key = key_of(topic, raw.key)
                    value = value_of(topic, raw.value)
            except DeserializationError as exc:
                on_error(exc, raw)
                return None
            timestamp = raw.timestamp
            if not own_timestamp or (timestamp < 0 and extract_timestamps):
                consumed = ConsumerRecord(topic, raw.partition, raw.offset, timestamp, key, value, raw.headers)
                timestamp = extract(consumed, partition_time.value)
                if timestamp < 0:
                    drop(consumed, timestamp)
                    return None
                if timestamp > partition_time.value:
                    partition_time.value = timestamp
            return new_record(Record, (key, value, timestamp, raw.headers))

        return read

    def _chain(self, source: SourceNode) -> Emit | None:
        """The source's fused chain, or None when the node-by-node walk costs no more (no fused
        operator below it, and a child that needs a `Record` anyway)."""
        children = source.children
        if not any(map(fusable, children)):
            if not all(_plain_sink(child) for child in children):
                return None
            if len(children) == 1:
                return children[0].send  # type: ignore[attr-defined, no-any-return]
        return compose(source, self._terminal)

    def _terminal(self, node: ProcessorNode) -> Emit:
        """How a fused chain hands a record to a node it does not fuse: as `context.forward` would
        (the node current, the record in the context), then no node current again, so that a
        failure in a fused operator is found by its line (`_failed_node`). A plain sink reads no
        context: it is called directly."""
        if _plain_sink(node):
            return node.send  # type: ignore[attr-defined, no-any-return]
        context = self._context
        process = node.process

        def end(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            context.node = node
            context.record = record = new_record(Record, (key, value, timestamp, headers))
            process(record)
            context.node = None

        return end

    def _failed_node(self, source: SourceNode, exc: BaseException) -> str:
        """The node a record's failure came from: the current node (an unfused node sets it), or
        the fused operator or plain sink whose line in the chain the traceback passed last."""
        node = self._context.node
        if node is not None:
            return node.name
        chain = self._chains.get(source)
        lines: dict[int, str] = getattr(chain, "chain_nodes", {})
        code = getattr(chain, "__code__", None)
        name = source.children[0].name if len(source.children) == 1 else source.name
        traceback = exc.__traceback__
        while traceback is not None and code is not None:
            if traceback.tb_frame.f_code.co_filename == code.co_filename:
                name = lines.get(traceback.tb_lineno, name)
            traceback = traceback.tb_next
        return name

    def process_record(self, source: SourceNode, record: Record[Any, Any], topic: str, partition: int, offset: int) -> None:
        """Run a record the `record_reader` built through the sub-topology from `source`, depth-first.

        Only while RUNNING: the owner checks (no per-record state check on the hot path)."""
        context = self._context
        context.input_topic = topic
        context.input_partition = partition
        context.input_offset = offset
        chain = self._chains.get(source)
        try:
            if chain is not None:
                chain(*record)
            else:  # the source's forward, inlined
                context.record = record
                for child in source.children:
                    context.node = child
                    child.process(record)
        except Exception as exc:
            exc.add_note(
                f"while processing a record of task {self.task_id} at processor "
                f"{self._failed_node(source, exc)!r}: topic={topic}, partition={partition}, "
                f"offset={offset}, timestamp={record.timestamp}"
            )
            raise
        finally:
            context.node = None
            context.record = None
        self.commit_needed = True

    # -- punctuation --------------------------------------------------------------------------

    def schedule(
        self, node: ProcessorNode, interval_ms: int, punctuation_type: PunctuationType, punctuator: Punctuator
    ) -> PunctuationSchedule:
        """Schedule a punctuation for `node` (called through the context).

        Stream-time schedules start at 0, so they fire with the first record processed (Kafka
        Streams aligns them to 0); wall-clock schedules first fire `interval_ms` from now. The
        global task refuses (StreamsError, as Kafka's GlobalProcessorContextImpl throws
        UnsupportedOperationException): the global thread runs no punctuations.
        """
        if self.global_task:
            raise StreamsError(
                f"processor {node.name!r}: schedule() is not supported in a global store's processor "
                "(the global thread runs no punctuations; schedule them in a stream task's processor)"
            )
        if punctuation_type is PunctuationType.STREAM_TIME:
            schedule = PunctuationSchedule(node, punctuator, interval_ms, punctuation_type, 0)
            return self._stream_time_punctuations.schedule(schedule)
        first = self.wall_clock_time() + interval_ms
        schedule = PunctuationSchedule(node, punctuator, interval_ms, punctuation_type, first)
        return self._wall_clock_punctuations.schedule(schedule)

    def maybe_punctuate_stream_time(self, stream_time: int | None = None) -> bool:
        """Fire the stream-time punctuations due at `stream_time` (default: `self.stream_time`)."""
        if stream_time is not None and stream_time > self.stream_time:
            self.stream_time = stream_time
        if self.stream_time == UNKNOWN_TIME or self._state is not TaskProcessorState.RUNNING:
            return False
        return self._stream_time_punctuations.maybe_punctuate(self.stream_time, self._punctuate)

    def maybe_punctuate_wall_clock(self, now: int | None = None) -> bool:
        """Fire the wall-clock punctuations due at `now` (default: the task's wall clock)."""
        if self._state is not TaskProcessorState.RUNNING:
            return False
        return self._wall_clock_punctuations.maybe_punctuate(
            self.wall_clock_time() if now is None else now, self._punctuate
        )

    def _punctuate(self, schedule: PunctuationSchedule, now: int) -> None:
        context = self._context
        context.input_topic = context.input_partition = context.input_offset = None
        context.record = None
        context.punctuation_time = now
        context.node = schedule.node
        try:
            schedule.punctuator(now)
        except Exception as exc:
            exc.add_note(
                f"while punctuating processor {schedule.node.name!r} of task {self.task_id} "
                f"({schedule.punctuation_type.name} at {now})"
            )
            raise
        finally:
            context.node = None
            context.record = None
            context.punctuation_time = None
        self.commit_needed = True

    # -- commit -------------------------------------------------------------------------------

    def request_commit(self) -> None:
        """A processor asked for a commit (`context.commit()`); honoured by the owner after this record."""
        self.commit_requested = True

    def prepare_commit(self) -> None:
        """Step 1 of a commit: flush the stores (and their caches, which may forward to sinks)."""
        self._state_manager.flush()

    def post_commit(self) -> None:
        """Last step of a commit: nothing left to commit, and no pending request."""
        self.commit_needed = False
        self.commit_requested = False

    def commit(self) -> None:
        """A commit for owners without offsets to commit (the global task, Spark's executor)."""
        self.prepare_commit()
        self.post_commit()

    def _expect(self, state: TaskProcessorState, action: str) -> None:
        if self._state is not state:
            raise StreamsError(f"task {self.task_id} cannot {action} while {self._state.name}")
