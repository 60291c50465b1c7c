"""TopologyTestDriver: runs a Topology deterministically, without a broker, for unit tests.

Each sub-topology runs as one task (id `<sub-topology>_0`; every topic has the single partition
0) on the same `TaskProcessor` core as the runtime, with in-memory topics and a temporary state
directory deleted on close. As in Kafka Streams' driver:

- a piped record is processed depth-first at once; records produced to a topic that a source
  reads are fed back in, in production order, before the pipe call returns;
- stream time is the highest timestamp processed so far (over all topics); after each record
  every task's stream-time punctuations due at that time fire;
- wall-clock time is a mock clock starting at `initial_wall_clock_time_ms` (0 by default) that
  moves only with `advance_wall_clock_time`, which fires the wall-clock punctuations due;
- after each record and each clock advance every task that processed or punctuated commits
  (its stores are flushed), so a commit requested by a processor happens at once;
- with `max.task.idle.ms` > 0 a task holds records back while one of its source topics is
  empty, until that topic gets a record or the mock wall clock passes the idle deadline (set
  when the topic was first seen empty), then takes the record with the lowest timestamp first,
  as Kafka Streams' driver does (its PartitionGroup); 0 (the default) or -1 process at once;
- records that fail to deserialize fail the pipe call, unless
  `default.deserialization.exception.handler` says otherwise (`dropped_records` counts skips);
- internal (repartition) topics are named `<application.id>-<name>`;
- global stores are filled by a global task from records piped (or produced) to their topics;
  those records do not move stream time. Every task's processors can read the global stores.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, TypeVar, overload

from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError, TopologyError, UnknownStateStoreError
from streams_core.processor.internals.processor_topology import ProcessorTopology
from streams_core.processor.internals.record_deserializer import RawRecord, dead_letter_headers, resolve_deserialization_handler
from streams_core.processor.internals.task_processor import TaskProcessor
from streams_core.processor.processor import Headers
from streams_core.processor.task_id import TaskId
from streams_core.processor.topology import Topology
from streams_core.serde import Serde
from streams_core.state.internals.processor_state_manager import ProcessorStateManager
from streams_core.testing.test_input_topic import TestInputTopic
from streams_core.testing.test_output_topic import TestOutputTopic

__all__ = ["TopologyTestDriver"]

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

DEFAULT_APPLICATION_ID = "topology-test-driver"


class ProducedRecord(NamedTuple):
    """A record in one of the driver's in-memory topics, as bytes."""

    topic: str
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers


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


class TopologyTestDriver:
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
        self._stream_time = -1
        self._partition_times: dict[str, int] = {}
        self._topics: dict[str, deque[ProducedRecord]] = {}
        self._next_offsets: dict[str, int] = {}
        self._pending: deque[ProducedRecord] = deque()
        self._idle_ms = validated["max.task.idle.ms"]
        self._buffered: dict[str, deque[ProducedRecord]] = {}
        self._idle_deadlines: dict[str, int] = {}
        self._task_of_topic: dict[str, TaskProcessor | None] = {}
        self._closed = False
        self._running = False
        self._collector = _DriverRecordCollector(self)
        handler = resolve_deserialization_handler(
            self.config["default.deserialization.exception.handler"], self._send_to_dead_letter_topic
        )
        self._tasks: dict[int, TaskProcessor] = {}
        self._global_task: TaskProcessor | None = None
        self._global_stores: dict[str, Any] = {}
        try:
            global_topology = self._builder.build_global_subtopology(self.config)
            if global_topology is not None:
                self._global_task = self._create_task(global_topology, "global", handler)
                self._global_stores = dict(global_topology.state_stores)
            for subtopology_id in self._builder.node_groups():
                built = self._builder.build_subtopology(subtopology_id, self.config)
                self._tasks[subtopology_id] = self._create_task(built, None, handler)
        except BaseException:
            self.close()
            raise

    def _create_task(self, topology: ProcessorTopology, directory: str | None, handler: Any) -> TaskProcessor:
        task_id = TaskId(topology.subtopology_id, 0)
        application_id = self.config["application.id"]
        task_dir = self._state_root / application_id / (directory or str(task_id))
        global_stores = self._global_stores if directory is None else None
        state_manager = ProcessorStateManager(task_id, application_id, task_dir, global_stores=global_stores)
        try:
            task = TaskProcessor(
                task_id,
                topology,
                self.config,
                state_manager,
                self._collector,
                deserialization_handler=handler,
                wall_clock=lambda: self._wall_clock_ms,
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
        return f"TopologyTestDriver(tasks={[str(t.task_id) for t in self._tasks.values()]})"

    # -- topics -------------------------------------------------------------------------------

    @overload
    def create_input_topic(
        self,
        name: str,
        key_serde: Serde[K],
        value_serde: Serde[V],
        *,
        start_timestamp_ms: int | None = None,
        auto_advance_ms: int = 0,
    ) -> TestInputTopic[K, V]: ...

    @overload
    def create_input_topic(
        self,
        name: str,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        *,
        start_timestamp_ms: int | None = None,
        auto_advance_ms: int = 0,
    ) -> TestInputTopic[Any, Any]: ...

    def create_input_topic(
        self,
        name: str,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        *,
        start_timestamp_ms: int | None = None,
        auto_advance_ms: int = 0,
    ) -> TestInputTopic[Any, Any]:
        """An input topic read by a source of the topology; serdes default to the config's.

        Records piped without a timestamp start at `start_timestamp_ms` (default: the mock
        wall-clock time) and advance by `auto_advance_ms` each.
        """
        self._check_open()
        if self._builder.source_for_topic(name) is None and self._task_for(name) is None:
            raise TopologyError(
                f"topic {name!r} is not read by any source of the topology "
                f"(sources read {sorted(self._builder.source_topics)}"
                + (
                    f" and patterns {[p.pattern for p in self._builder.source_patterns]}"
                    if self._builder.source_patterns
                    else ""
                )
                + ")"
            )
        start = self._wall_clock_ms if start_timestamp_ms is None else start_timestamp_ms
        return TestInputTopic(
            self,
            name,
            key_serde or self.config["default.key.serde"],
            value_serde or self.config["default.value.serde"],
            start,
            auto_advance_ms,
        )

    @overload
    def create_output_topic(self, name: str, key_serde: Serde[K], value_serde: Serde[V]) -> TestOutputTopic[K, V]: ...

    @overload
    def create_output_topic(
        self, name: str, key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None
    ) -> TestOutputTopic[Any, Any]: ...

    def create_output_topic(
        self, name: str, key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None
    ) -> TestOutputTopic[Any, Any]:
        """Reads what the topology produced to `name`; serdes default to the config's."""
        self._check_open()
        return TestOutputTopic(
            self, name, key_serde or self.config["default.key.serde"], value_serde or self.config["default.value.serde"]
        )

    def produced_topic_names(self) -> set[str]:
        """Every topic the topology has produced to so far."""
        return set(self._topics)

    def read_raw_record(self, topic: str) -> ProducedRecord | None:
        """Remove and return the oldest unread record of `topic`, or None."""
        queue = self._topics.get(topic)
        return queue.popleft() if queue else None

    def queued_record_count(self, topic: str) -> int:
        return len(self._topics.get(topic, ()))

    # -- processing ---------------------------------------------------------------------------

    def pipe_raw_record(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers = ()
    ) -> None:
        """Append a serialized record to an input topic and process it with all its consequences."""
        self._check_open()
        if self._task_for(topic) is None:
            raise TopologyError(f"topic {topic!r} is not read by any source of the topology")
        self._pending.append(ProducedRecord(topic, self._next_offset(topic), timestamp, key, value, headers))
        self._run()

    def produce(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers) -> None:
        """Append a record from a sink to `topic`; queue it for processing when a source reads it."""
        record = ProducedRecord(topic, self._next_offset(topic), timestamp, key, value, tuple(headers))
        self._topics.setdefault(topic, deque()).append(record)
        if self._task_for(topic) is not None:
            self._pending.append(record)

    def advance_wall_clock_time(self, ms: int) -> None:
        """Move the mock clock forward, fire the wall-clock punctuations due, process what they produced."""
        self._check_open()
        if ms < 0:
            raise ValueError(f"cannot move the wall clock backwards ({ms} ms)")
        self._wall_clock_ms += ms
        try:
            for task in self._tasks.values():
                task.maybe_punctuate_wall_clock(self._wall_clock_ms)
            self._commit_tasks()
        except BaseException:
            self._pending.clear()
            raise
        self._run()

    @property
    def wall_clock_time_ms(self) -> int:
        return self._wall_clock_ms

    @property
    def stream_time_ms(self) -> int:
        """The highest timestamp processed so far (-1 before the first record)."""
        return self._stream_time

    @property
    def dropped_records(self) -> int:
        """Records dropped: skipped by the deserialization handler, for a negative extracted
        timestamp, or by DSL processors (null keys where a key is needed, records too late for
        their window); as Kafka Streams' `dropped-records` metric."""
        return sum(task.dropped_records for task in self._all_tasks())

    def _run(self) -> None:
        if self._running:
            return
        pending = self._pending
        self._running = True
        try:
            while True:
                while pending:
                    raw = pending.popleft()
                    if self._idle_ms > 0 and self._task_for(raw.topic) is not self._global_task:
                        self._buffered.setdefault(raw.topic, deque()).append(raw)
                    else:
                        self._process(raw)
                if self._idle_ms <= 0 or not self._process_buffered_record():
                    break
        except BaseException:
            pending.clear()
            raise
        finally:
            self._running = False

    def _process_buffered_record(self) -> bool:
        """Process one held-back record of a task that may go on (max.task.idle.ms); False if none may."""
        topic_groups = self._builder.topic_groups()
        for subtopology_id in sorted(self._tasks):
            topics = sorted(topic_groups[subtopology_id].source_topics)
            ready = [t for t in topics if self._buffered.get(t)]
            if not ready:
                continue
            waiting = False
            for topic in topics:
                if self._buffered.get(topic):
                    self._idle_deadlines.pop(topic, None)
                elif self._wall_clock_ms < self._idle_deadlines.setdefault(topic, self._wall_clock_ms + self._idle_ms):
                    waiting = True
            if waiting:
                log.info("records of task %s_0 wait for max.task.idle.ms (advance the wall clock or pipe records "
                         "to its empty topics)", subtopology_id)  # fmt: skip
                continue
            topic = min(ready, key=lambda t: self._buffered[t][0].timestamp)
            self._process(self._buffered[topic].popleft())
            return True
        return False

    def _process(self, raw: ProducedRecord) -> None:
        topic = raw.topic
        task = self._task_for(topic)
        assert task is not None
        record = task.deserialize(topic, 0, raw.offset, raw.timestamp, raw.key, raw.value, raw.headers)
        if record is None:
            return
        timestamp = task.extract_timestamp(record, self._partition_times.get(topic, -1))
        if timestamp is None:
            return
        if task is self._global_task:
            task.process(record, timestamp)
            task.commit()
            return
        if timestamp > self._partition_times.get(topic, -1):
            self._partition_times[topic] = timestamp
        self._stream_time = max(self._stream_time, timestamp)
        task.stream_time = self._stream_time
        task.process(record, timestamp)
        for each in self._tasks.values():
            each.maybe_punctuate_stream_time(self._stream_time)
        self._commit_tasks()

    def _commit_tasks(self) -> None:
        for task in self._all_tasks():
            if task.commit_needed or task.commit_requested:
                task.commit()

    def _task_for(self, topic: str) -> TaskProcessor | None:
        if topic not in self._task_of_topic:
            subtopology_id = self._builder.subtopology_for_topic(topic)
            if subtopology_id is not None:
                self._task_of_topic[topic] = self._tasks[subtopology_id]
            elif topic in self._builder.global_topics:
                self._task_of_topic[topic] = self._global_task
            else:
                self._task_of_topic[topic] = None
        return self._task_of_topic[topic]

    def _all_tasks(self) -> list[TaskProcessor]:
        tasks = list(self._tasks.values())
        return tasks if self._global_task is None else [self._global_task, *tasks]

    def _next_offset(self, topic: str) -> int:
        offset = self._next_offsets.get(topic, 0)
        self._next_offsets[topic] = offset + 1
        return offset

    def _send_to_dead_letter_topic(self, record: RawRecord) -> None:
        topic = self.config["errors.dead.letter.queue.topic.name"]
        self.produce(topic, record.key, record.value, record.timestamp, dead_letter_headers(record))

    # -- state --------------------------------------------------------------------------------

    def get_all_state_stores(self) -> dict[str, Any]:
        """Every state store of the topology by name (global stores included)."""
        self._check_open()
        return {name: store for task in self._all_tasks() for name, store in task.topology.state_stores.items()}

    def get_state_store(self, name: str) -> Any:
        """The state store named `name`; UnknownStateStoreError naming the known ones otherwise."""
        stores = self.get_all_state_stores()
        store = stores.get(name)
        if store is None:
            raise UnknownStateStoreError(f"no state store named {name!r}; the topology has {sorted(stores)}")
        return store

    def get_key_value_store(self, name: str) -> Any:
        """The key-value store named `name` (typed: keys and values as the processors see them)."""
        return self._typed_store(name, "key-value", ("get", "put", "all"))

    def get_window_store(self, name: str) -> Any:
        """The window store named `name` (typed; a DSL windowed aggregate's store gives plain aggregates)."""
        return self._typed_store(name, "window", ("fetch", "fetch_all", "window_size"))

    def get_timestamped_key_value_store(self, name: str) -> Any:
        """The DSL key-value store named `name`, answering `ValueAndTimestamp(value, timestamp)`s (as Java's)."""
        return self._timestamped(self.get_key_value_store(name), name)

    def get_timestamped_window_store(self, name: str) -> Any:
        """The DSL window store named `name`, answering `ValueAndTimestamp(value, timestamp)`s (as Java's)."""
        return self._timestamped(self.get_window_store(name), name)

    @staticmethod
    def _timestamped(store: Any, name: str) -> Any:
        timestamped = getattr(store, "timestamped", None)
        if timestamped is None:
            raise StreamsError(f"state store {name!r} keeps no timestamps (a DSL table or aggregate's store does)")
        return timestamped

    def get_session_store(self, name: str) -> Any:
        """The session store named `name` (typed)."""
        return self._typed_store(name, "session", ("find_sessions", "fetch_session"))

    def _typed_store(self, name: str, kind: str, methods: tuple[str, ...]) -> Any:
        store = self.get_state_store(name)
        if not all(hasattr(store, method) for method in methods):
            raise StreamsError(f"state store {name!r} is not a {kind} store ({type(store).__name__})")
        return store

    # -- closing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Commit and close every task (processors, then stores) and delete the state directory."""
        if self._closed:
            return
        self._closed = True
        errors: list[BaseException] = []
        for task in self._all_tasks():
            try:
                if task.commit_needed or task.commit_requested:
                    task.commit()
            except Exception as exc:
                errors.append(exc)
            try:
                task.close()
            except Exception as exc:
                errors.append(exc)
        shutil.rmtree(self._state_root, ignore_errors=True)
        log.debug("TopologyTestDriver closed; removed %s", self._state_root)
        if errors:
            raise errors[0]

    def _check_open(self) -> None:
        if self._closed:
            raise StreamsError("the TopologyTestDriver is closed")
