"""TopologyTestDriver: runs a Topology deterministically, without a broker, for unit tests.

This module holds the tasks, the processing loop and the mock clock; the input and output topics
are in `topology_test_driver_topics.py`, store access in `topology_test_driver_stores.py`.

Each sub-topology runs as one runtime `StreamTask` (id `<sub-topology>_0`; every topic has the
single partition 0), with its `PartitionGroup` and `RecordQueue`s and the runtime's record path,
over in-memory topics and a temporary state directory deleted on close. As in Kafka Streams'
driver (which drives one `StreamTask` the same way):

- a piped record is added to its task's queue, then every task processes one record at a time
  while it has records and is processable (`PartitionGroup.ready_to_process` on the mock wall
  clock), over all tasks the record one partition group of all their partitions would take
  (the lowest partition time; Java's driver has one task; ties: the order of arrival);
  records produced to a topic that a source reads are added to their task after the record
  that produced them, before the pipe call returns;
- after each record the task commits: its stores (and caches) are flushed, so output appears
  at once, as with `commit.interval.ms` and the cache size 0; a commit a processor requests
  happens then too;
- stream time is the highest timestamp processed so far over all tasks (as Kafka's driver,
  whose one task runs every sub-topology); after each record every task's stream-time
  punctuations due at that time fire;
- wall-clock time is a mock clock starting at `initial_wall_clock_time_ms` (0 by default) that
  moves only with `advance_wall_clock_time`, which fires the wall-clock punctuations due, commits
  and processes what became processable;
- `max.task.idle.ms` is the runtime's rule (KIP-695) with every partition caught up, as in
  Kafka's driver (its mock consumer has no end offsets; the tasks' default lag, `caught_up`):
  with a value > 0 a task with some source topics empty holds its records until the mock wall
  clock is that far past the moment each empty topic was first seen empty, then takes the record
  of the lowest partition time; 0 (the default) or -1 process at once;
- a timestamp extractor receives the partition time of the runtime (Kafka Streams' rule, see
  docs/runtime.md);
- records that fail to deserialize fail the pipe call, unless
  `default.deserialization.exception.handler` says otherwise (`dropped_records` counts skips);
- internal (repartition) topics are named `<application.id>-<name>`;
- global stores are filled by a global task from records piped (or produced) to their topics,
  at once; those records do not move stream time. Every task's processors can read the global
  stores.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

from streams_core.common.headers import Headers
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError, TopologyError
from streams_core.processor.internals.processor_node import SourceNode
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.processor.internals.record_deserializer import (
    DeserializationHandler,
    dead_letter_headers,
    resolve_deserialization_handler,
)
from streams_core.processor.internals.stream_time import UNKNOWN_TIME, StreamTime
from streams_core.processor.internals.task_processor import RecordReader, TaskProcessor
from streams_core.processor.topology import Topology
from streams_core.runtime.tasks.record_collector_impl import RecordCollectorImpl
from streams_core.runtime.tasks.stream_task import StreamTask
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.testing.fake_kafka_cluster import FakeRecord
from streams_core.testing.topology_test_driver_stores import TopologyTestDriverStores
from streams_core.testing.topology_test_driver_topics import TopologyTestDriverTopics

__all__ = ["TopologyTestDriver"]

log = logging.getLogger(__name__)

DEFAULT_APPLICATION_ID = "topology-test-driver"


if TYPE_CHECKING:
    from streams_core.clients.ports import RawRecord


class _DriverRecordCollector:
    """The RecordCollector of every task: appends to the driver's in-memory topics."""

    def __init__(self, driver: TopologyTestDriver) -> None:
        self._driver = driver

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None:
        self._driver.produce(topic, key, value, timestamp, headers)

    def partitions_for(self, topic: str) -> int:
        return 1


class TopologyTestDriver(TopologyTestDriverTopics, TopologyTestDriverStores):
    """Drives a Topology with piped records and a mock clock; use as a context manager.

    `config` is a mapping of Kafka Streams properties (or a StreamsConfig); `application.id`
    defaults to "topology-test-driver" and `state.dir` is replaced by a temporary directory.
    """

    def __init__(
        self,
        topology: Topology,
        config: Mapping[str, Any] | None = None,
        *,
        initial_wall_clock_time_ms: int = 0,
    ) -> None:
        self._builder = topology.internal_topology_builder
        self._builder.validate()
        props = config.explicit() if isinstance(config, StreamsConfig) else dict(config or {})
        props.setdefault("application.id", DEFAULT_APPLICATION_ID)
        validated = StreamsConfig(props)
        self._builder.set_application_id(validated["application.id"])
        self._state_root = Path(tempfile.mkdtemp(prefix="streams-core-ttd-"))
        self.config = validated.with_overrides({"state.dir": str(self._state_root)})
        self._wall_clock_ms = initial_wall_clock_time_ms
        self._topics: dict[str, deque[FakeRecord]] = {}
        self._next_offsets: dict[str, int] = {}
        self._produced: deque[FakeRecord] = deque()
        """Records produced to topics that sources read, not yet added to their task."""
        self._arrivals: dict[StreamTask, deque[int]] = {}
        """Per task, the arrival numbers of the records it buffers (the oldest first)."""
        self._arrival_count = 0
        self._task_of_topic: dict[str, StreamTask | None] = {}
        self._reads_topic: dict[str, bool] = {}
        self._global_readers: dict[str, tuple[RecordReader, SourceNode]] = {}
        self._closed = False
        self._running = False
        self._collector = _DriverRecordCollector(self)
        handler = resolve_deserialization_handler(
            self.config["default.deserialization.exception.handler"], self._send_to_dead_letter_topic
        )
        self._tasks: dict[int, StreamTask] = {}
        self._global_task: TaskProcessor | None = None
        self._global_stores: dict[str, Any] = {}
        try:
            global_topology = self._builder.build_global_subtopology(self.config)
            if global_topology is not None:
                self._global_task = self._create_global_task(global_topology, handler)
                self._global_stores = dict(global_topology.state_stores)
            topic_groups = self._builder.topic_groups()
            for subtopology_id in self._builder.node_groups():
                built = self._builder.build_subtopology(subtopology_id, self.config)
                topics = topic_groups[subtopology_id].source_topics
                self._tasks[subtopology_id] = self._create_task(built, topics, handler)
        except BaseException:
            self.close()
            raise

    def _state_manager(self, task_id: TaskId, directory: str, global_stores: dict[str, Any] | None) -> ProcessorStateManager:
        application_id = self.config["application.id"]
        task_dir = self._state_root / application_id / directory
        return ProcessorStateManager(task_id, application_id, task_dir, global_stores=global_stores)

    def _create_task(
        self, topology: ProcessorTopology, topics: frozenset[str], handler: DeserializationHandler | None
    ) -> StreamTask:
        """A runtime task over partition 0 of the sub-topology's topics (no checkpoint per commit: the
        state directory is temporary)."""
        task_id = TaskId(topology.subtopology_id, 0)
        state_manager = self._state_manager(task_id, str(task_id), self._global_stores)
        try:
            task = StreamTask(
                task_id,
                [TopicPartition(topic, 0) for topic in topics],
                topology,
                self.config,
                state_manager,
                cast(RecordCollectorImpl, self._collector),  # the task only hands it to its processors
                deserialization_handler=handler,
                wall_clock=lambda: self._wall_clock_ms,
                checkpoint_on_commit=False,
            )
            task.processor.init()
        except BaseException:
            state_manager.close()
            raise
        return task

    def _create_global_task(self, topology: ProcessorTopology, handler: DeserializationHandler | None) -> TaskProcessor:
        task_id = TaskId(topology.subtopology_id, 0)
        state_manager = self._state_manager(task_id, "global", None)
        try:
            task = TaskProcessor(
                task_id,
                topology,
                self.config,
                state_manager,
                self._collector,
                deserialization_handler=handler,
                wall_clock=lambda: self._wall_clock_ms,
                global_task=True,
            )
            task.init()
        except BaseException:
            state_manager.close()
            raise
        return task

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TopologyTestDriver(tasks={[str(t.id) for t in self._tasks.values()]})"

    # -- processing ---------------------------------------------------------------------------

    def pipe_raw_record(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers = ()
    ) -> None:
        """Append a serialized record to an input topic and process it with all its consequences."""
        self._check_open()
        if not self._reads(topic):
            raise TopologyError(f"topic {topic!r} is not read by any source of the topology")
        self._add(FakeRecord(topic, 0, self._next_offset(topic), timestamp, key, value, tuple(headers)))
        self._complete_all_processable_work()

    def advance_wall_clock_time(self, ms: int) -> None:
        """Move the mock clock forward, fire the wall-clock punctuations due, commit, then process
        what became processable."""
        self._check_open()
        if ms < 0:
            raise ValueError(f"cannot move the wall clock backwards ({ms} ms)")
        self._wall_clock_ms += ms
        for task in self._tasks.values():
            task.punctuate_wall_clock(self._wall_clock_ms)
            self._commit(task)
        self._complete_all_processable_work()

    @property
    def wall_clock_time_ms(self) -> int:
        return self._wall_clock_ms

    @property
    def stream_time_ms(self) -> int:
        """The highest timestamp processed so far (-1 before the first record)."""
        return max((task.stream_time for task in self._tasks.values()), default=UNKNOWN_TIME)

    @property
    def dropped_records(self) -> int:
        """Records dropped: skipped by the deserialization handler, for a negative extracted
        timestamp, or by DSL processors (null keys where a key is needed, records too late for
        their window); as Kafka Streams' `dropped-records` metric."""
        dropped = sum(task.dropped_records for task in self._tasks.values())
        return dropped + (0 if self._global_task is None else self._global_task.dropped_records)

    def _complete_all_processable_work(self) -> None:
        """Kafka's driver loop: add what was produced, then one record at a time (each followed by
        the stream-time punctuations and a commit) while a task can go on."""
        if self._running:
            return
        self._running = True
        try:
            self._add_produced()
            while self._process_next():
                self._add_produced()
            if waiting := [task for task, arrivals in self._arrivals.items() if arrivals]:
                log.info(
                    "records of tasks %s wait for max.task.idle.ms (advance the wall clock or pipe records "
                    "to their empty topics)", sorted(str(task.id) for task in waiting),
                )
        finally:
            self._running = False

    def _process_next(self) -> bool:
        """Process one record of a task that may process now: the one whose next record has the
        lowest partition time, as one partition group of every task's partitions would choose
        (Java's driver runs all sub-topologies in one task; ties: the task whose oldest record
        arrived first); False when none may."""
        now = self._wall_clock_ms
        arrivals = self._arrivals
        waiting = [task for task, numbers in arrivals.items() if numbers]
        waiting.sort(key=lambda task: (self._next_partition_time(task), arrivals[task][0]))
        for task in waiting:
            try:
                processed = task.process(1, now)
            except BaseException:
                arrivals[task].popleft()
                raise
            if not processed:
                continue
            arrivals[task].popleft()
            stream_time = task.stream_time  # the highest: every task was at the driver's stream time
            for each in self._tasks.values():
                processor = each.processor
                processor.clock.advance(stream_time)
                if stream_time >= processor.stream_time_punctuations.due:
                    processor.maybe_punctuate_stream_time()
            for each in self._tasks.values():
                self._commit(each)
            return True
        return False

    @staticmethod
    def _next_partition_time(task: StreamTask) -> int:
        """The partition time of the queue the task's partition group takes its next record from."""
        group = task.partition_group
        return min(group.partition_time(tp) for tp in group.partitions if group.num_buffered(tp))

    @staticmethod
    def _commit(task: StreamTask) -> None:
        """Kafka's `prepareCommit` and `postCommit`: flush when the task processed or punctuated
        (the driver has no offsets, so skipped records alone need no commit)."""
        if task.processor.commit_needed or task.commit_requested:
            task.prepare_commit()
            task.post_commit({})

    def _add_produced(self) -> None:
        produced = self._produced
        while produced:
            self._add(produced.popleft())

    def _add(self, record: FakeRecord) -> None:
        """Buffer a record in its task, or apply it to the global stores at once."""
        task = self._task_for(record.topic)
        if task is None:
            self._update_global(record)
            return
        tp = TopicPartition(record.topic, 0)
        if tp not in task.partitions:
            task.add_input_partition(tp)
        before = task.num_buffered()
        task.add_records(tp, (record,))
        if task.num_buffered() > before:
            self._arrivals.setdefault(task, deque()).append(self._arrival_count)
            self._arrival_count += 1

    def _update_global(self, record: FakeRecord) -> None:
        """Kafka's GlobalStateUpdateTask.update then flushState: the record through the global task's
        reader and processors, then its stores flushed."""
        task = self._global_task
        assert task is not None
        topic = record.topic
        if topic not in self._global_readers:
            self._global_readers[topic] = (task.record_reader(topic, StreamTime(), extract_timestamps=False), task.source_node(topic))
        reader, source = self._global_readers[topic]
        read = reader(record)
        if read is not None:
            task.process_record(source, read, topic, 0, record.offset)
        task.commit()

    def _send_to_dead_letter_topic(self, record: RawRecord) -> None:
        topic = self.config["errors.dead.letter.queue.topic.name"]
        self.produce(topic, record.key, record.value, record.timestamp, dead_letter_headers(record))

    # -- closing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Commit and close every task (processors, then stores) and delete the state directory."""
        if self._closed:
            return
        self._closed = True
        errors: list[BaseException] = []
        for task in self._tasks.values():
            try:
                self._commit(task)
            except Exception as exc:
                errors.append(exc)
            try:
                task.close()
            except Exception as exc:
                errors.append(exc)
        if self._global_task is not None:
            try:
                self._global_task.close()
            except Exception as exc:
                errors.append(exc)
        shutil.rmtree(self._state_root, ignore_errors=True)
        log.debug("TopologyTestDriver closed; removed %s", self._state_root)
        if errors:
            raise errors[0]

    def _check_open(self) -> None:
        if self._closed:
            raise StreamsError("the TopologyTestDriver is closed")
