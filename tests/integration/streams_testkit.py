"""Helpers for runtime integration tests: topologies, instances of one application, waiting.

Several `KafkaStreams` instances of one application run in the test's event loop (their stream
threads are asyncio tasks), each with its own `application.server` (nothing binds it: the
runtime only carries it through the group protocol) and its own `state.dir` under `tmp_path`.
`StreamsApp` starts and closes them and always closes what it started. Client settings are
tuned for fast rebalances on the local broker (`group.min.session.timeout.ms` is 1000 there).

Recording processors write what they see into a `Recorder` shared by every task of every
instance (same process), so tests can check order per task and count what was processed.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from streams_core import Processor, ProcessorContext, Record, Serdes, Stores, TaskId, Topology
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.kafka_streams import KafkaStreams, State
from streams_core.runtime.tasks.partition_group import PartitionGroup
from tests.integration.group_protocol import UNDER_STREAMS, standby_replicas_of_the_group
from tests.kafka_utils import Consumed, Rec, read_all, unique_topic

__all__ = [
    "FAST_CONFIG",
    "CountingProcessor",
    "RecordSender",
    "Recorder",
    "RecordingProcessor",
    "Seen",
    "StreamsApp",
    "committed_offsets",
    "counts_by_key",
    "instance_tasks",
    "metric_total",
    "partition_groups",
    "partitions_of",
    "passthrough_topology",
    "recording_topology",
    "stateful_topology",
    "tasks_of",
    "wait_for_output_keys",
    "wait_spread",
    "wait_until",
]

FAST_CONFIG: dict[str, Any] = {
    "commit.interval.ms": 100,
    "poll.ms": 50,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "linger.ms": 5,
}
"""Settings for quick commits and rebalances against the test broker."""

_ports = itertools.count(17070)


# -- waiting ---------------------------------------------------------------------------------


async def wait_until(
    predicate: Callable[[], bool | Awaitable[bool]],
    timeout: float = 30.0,
    *,
    interval: float = 0.05,
    message: str | Callable[[], str] = "condition",
) -> float:
    """Poll `predicate` (sync or async) until it is true; returns the seconds it took.

    Raises AssertionError naming `message` (a string or a callable describing the current
    situation) when `timeout` seconds pass first.
    """
    start = time.monotonic()
    deadline = start + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return time.monotonic() - start
        if time.monotonic() > deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"not met within {timeout} s: {text}")
        await asyncio.sleep(interval)


async def wait_spread(instances: Iterable[KafkaStreams], timeout: float = 30.0) -> None:
    """Under the streams protocol, wait until every instance is RUNNING with an active task: a member
    that joins runs nothing until a later heartbeat brings the tasks the others revoked meanwhile
    (their RUNNING passes through REBALANCING again). Under the classic protocol the instances'
    first RUNNING already follows the whole rebalance: nothing to wait for."""
    if not UNDER_STREAMS:
        return
    waiting = list(instances)
    await wait_until(
        lambda: all(s.state is State.RUNNING and instance_tasks(s) for s in waiting),
        timeout,
        message=lambda: f"instances without tasks or not RUNNING: {[(s.state.name, sorted(map(str, instance_tasks(s)))) for s in waiting]}",
    )


async def wait_for_output_keys(
    bootstrap: str, topic: str, keys: Iterable[bytes], timeout: float = 60.0
) -> list[Consumed]:
    """Read `topic` (beginning to end, repeatedly) until every key of `keys` is in it."""
    wanted = set(keys)
    records: list[Consumed] = []

    async def all_there() -> bool:
        nonlocal records
        records = await read_all(bootstrap, topic)
        return wanted <= {r.key for r in records}

    await wait_until(
        all_there,
        timeout,
        interval=0.2,
        message=lambda: f"{len(wanted - {r.key for r in records})} of {len(wanted)} keys missing in {topic}",
    )
    return records


class RecordSender:
    """A started producer for sending at a precise moment (kafka_utils.produce starts one per call)."""

    def __init__(self, bootstrap: str) -> None:
        self._producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)

    async def __aenter__(self) -> RecordSender:
        await self._producer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._producer.stop()

    async def send(self, topic: str, records: Iterable[Rec]) -> None:
        """Send `records` and wait until all are acknowledged."""
        futures = [
            await self._producer.send(
                topic, r.value, r.key, r.partition, r.timestamp_ms, list(r.headers) or None
            )
            for r in records
        ]
        await asyncio.gather(*futures)


async def committed_offsets(bootstrap: str, group_id: str) -> dict[TopicPartition, int]:
    """The offsets the consumer group (an application.id) has committed."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group_id)
    finally:
        await admin.close()
    return {TopicPartition(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}


def counts_by_key(records: Iterable[Consumed]) -> Counter[bytes | None]:
    """How often each key appears."""
    return Counter(r.key for r in records)


# -- topologies ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Seen:
    """One record as a recording processor saw it."""

    server: str
    task: TaskId
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    processed_at: float
    """time.monotonic() when the processor got it."""


@dataclass
class Recorder:
    """Everything the recording processors of a test saw, in processing order.

    `fail_on`: keys whose first processing raises `fail_with` (once per key, over all tasks
    and instances), to kill a stream thread from user code.
    """

    seen: list[Seen] = field(default_factory=list)
    fail_on: set[Any] = field(default_factory=set)
    fail_with: type[Exception] = RuntimeError
    failed: list[Any] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.seen)

    def by_task(self) -> dict[TaskId, list[Seen]]:
        out: dict[TaskId, list[Seen]] = {}
        for seen in self.seen:
            out.setdefault(seen.task, []).append(seen)
        return out

    def keys(self) -> Counter[Any]:
        return Counter(s.key for s in self.seen)

    def processor(self) -> RecordingProcessor:
        return RecordingProcessor(self)


class RecordingProcessor(Processor[Any, Any, Any, Any]):
    """Records each record (with task, input topic/partition/offset) and forwards it unchanged."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.server = context.config["application.server"]

    def process(self, record: Record[Any, Any]) -> None:
        recorder, context = self.recorder, self.context
        if record.key in recorder.fail_on and record.key not in recorder.failed:
            recorder.failed.append(record.key)
            raise recorder.fail_with(f"processor fails once on key {record.key!r}")
        recorder.seen.append(
            Seen(
                self.server,
                context.task_id,
                context.topic or "",
                context.partition if context.partition is not None else -1,
                context.offset if context.offset is not None else -1,
                record.timestamp,
                record.key,
                record.value,
                time.monotonic(),
            )
        )
        context.forward(record)


class CountingProcessor(Processor[Any, Any, Any, Any]):
    """Counts records per key in the key-value store `store_name` and forwards each record."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.context = context
        self.store = context.get_state_store(self.store_name)

    def process(self, record: Record[Any, Any]) -> None:
        self.store.put(record.key, (self.store.get(record.key) or 0) + 1)
        self.context.forward(record)


def passthrough_topology(source: str, sink: str) -> Topology:
    """source -> sink, bytes in and out."""
    return Topology().add_source("SOURCE", source).add_sink("SINK", sink, "SOURCE")


def recording_topology(
    sources: str | Iterable[str],
    sink: str,
    recorder: Recorder,
    *,
    value_serde: Any = None,
) -> Topology:
    """One source node per topic, all feeding one recording processor, then a sink.

    Two or more topics make one sub-topology of co-partitioned topics (several source nodes
    into one processor). `value_serde` (default: the application's) is the sources' and the
    sink's value serde.
    """
    topics = [sources] if isinstance(sources, str) else list(sources)
    topology = Topology()
    names = []
    for index, topic in enumerate(topics):
        name = f"SOURCE-{index}"
        topology.add_source(name, topic, value_serde=value_serde)
        names.append(name)
    topology.add_processor("RECORD", recorder.processor, *names)
    topology.add_sink("SINK", sink, "RECORD", value_serde=value_serde)
    return topology


def stateful_topology(source: str, sink: str, store_name: str = "counts") -> Topology:
    """source -> counting processor with a persistent key-value store -> sink.

    Its tasks have state (a SQLite file per task directory), so the assignor's stickiness
    follows the task directories on disk. Logging is off: no changelog topic is needed.
    """
    store = Stores.key_value_store_builder(
        Stores.persistent_key_value_store(store_name), Serdes.Bytes(), Serdes.Long()
    ).with_logging_disabled()
    return (
        Topology()
        .add_source("SOURCE", source)
        .add_processor("COUNT", lambda: CountingProcessor(store_name), "SOURCE")
        .add_state_store(store, "COUNT")
        .add_sink("SINK", sink, "COUNT")
    )


# -- instances -------------------------------------------------------------------------------


def instance_tasks(streams: KafkaStreams) -> frozenset[TaskId]:
    """The active tasks of every stream thread of an instance (in-process or worker processes)."""
    return frozenset(task.task_id for thread in streams.metadata_for_local_threads() for task in thread.active_tasks)


def partition_groups(streams: KafkaStreams) -> dict[TaskId, PartitionGroup[Any]]:
    """The partition group of every active task of an instance."""
    return {
        task_id: task.partition_group
        for thread in streams.threads
        if thread.task_manager is not None
        for task_id, task in thread.task_manager.tasks.items()
    }


def metric_total(streams: KafkaStreams, name: str) -> int:
    """A per-thread counter of `streams.metrics()` summed over the threads."""
    return sum(int(thread[name]) for thread in streams.metrics()["threads"])


class StreamsApp:
    """Instances of one application (one `application.id`) in this event loop.

    Instance `i` has `application.server` 127.0.0.1:<port i> and `state.dir`
    `<tmp_path>/instance-<i>`; restarting an index reuses both (a restarted process).
    Use as `async with StreamsApp(...) as app:`; every started instance is closed on exit. Under the
    streams protocol a `num.standby.replicas` in `config` is set on the group before the first start.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        tmp_path: Path,
        topology: Callable[[], Topology],
        *,
        application_id: str | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.tmp_path = tmp_path
        self.topology = topology
        self.application_id = application_id or unique_topic("app")
        self.config = {**FAST_CONFIG, **(config or {})}
        self.ports: dict[int, int] = {}
        self.instances: dict[int, KafkaStreams] = {}
        self._all: list[KafkaStreams] = []
        self._group_configured = "num.standby.replicas" not in self.config

    async def __aenter__(self) -> StreamsApp:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close_all()

    def server(self, index: int) -> str:
        """The application.server of instance `index`."""
        if index not in self.ports:
            self.ports[index] = next(_ports)
        return f"127.0.0.1:{self.ports[index]}"

    def state_dir(self, index: int) -> Path:
        return self.tmp_path / f"instance-{index}"

    def instance_config(self, index: int, **extra: Any) -> dict[str, Any]:
        return {
            "application.id": self.application_id,
            "bootstrap.servers": self.bootstrap_servers,
            "application.server": self.server(index),
            "state.dir": self.state_dir(index),
            **self.config,
            **extra,
        }

    def create(self, index: int, **extra: Any) -> KafkaStreams:
        """A new (not started) instance `index`, registered to be closed at the end."""
        if index in self.instances and self.instances[index].state not in (State.NOT_RUNNING, State.ERROR):
            raise RuntimeError(f"instance {index} is still {self.instances[index].state.name}")
        streams = KafkaStreams(self.topology(), self.instance_config(index, **extra))
        self.instances[index] = streams
        self._all.append(streams)
        return streams

    async def start(self, index: int, **extra: Any) -> KafkaStreams:
        """Create and start instance `index` (returns once its threads run, maybe rebalancing)."""
        if not self._group_configured:
            standbys = self.config["num.standby.replicas"]
            await standby_replicas_of_the_group(self.bootstrap_servers, self.application_id, standbys)
            self._group_configured = True
        streams = self.create(index, **extra)
        await streams.start()
        return streams

    async def stop(self, index: int) -> None:
        """Close instance `index` cleanly (it leaves the group)."""
        streams = self.instances.pop(index)
        assert await streams.close(timeout=30), f"instance {index} did not close in time"

    async def close_all(self) -> None:
        """Close every instance ever started, even if some close fails."""
        errors = []
        for streams in self._all:
            try:
                await streams.close(timeout=30)
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)
        self.instances.clear()
        if errors:
            raise errors[0]

    @property
    def started(self) -> list[KafkaStreams]:
        """Every instance created so far, restarted ones included, oldest first."""
        return list(self._all)

    @property
    def live(self) -> dict[int, KafkaStreams]:
        """The instances by index that are neither closed nor failed."""
        return {i: s for i, s in self.instances.items() if s.state not in (State.NOT_RUNNING, State.ERROR)}

    def tasks(self) -> dict[int, frozenset[TaskId]]:
        """Active tasks per live instance."""
        return {i: instance_tasks(s) for i, s in self.live.items()}

    def settled(self, all_tasks: Iterable[TaskId]) -> bool:
        """Every live instance is RUNNING with at least one task, and their tasks partition `all_tasks`.

        Under the eager protocol every member takes part in each rebalance, so once every live
        member runs a new generation and the tasks add up, the rebalance is over.
        """
        wanted = frozenset(all_tasks)
        live = self.live
        if not live or any(s.state is not State.RUNNING for s in live.values()):
            return False
        tasks = [instance_tasks(s) for s in live.values()]
        if any(not t for t in tasks) and len(live) <= len(wanted):
            return False
        union = frozenset().union(*tasks)
        return union == wanted and sum(map(len, tasks)) == len(wanted)

    async def wait_settled(self, all_tasks: Iterable[TaskId], timeout: float = 45.0) -> dict[int, frozenset[TaskId]]:
        """Wait until `settled(all_tasks)`; returns the tasks per instance."""
        wanted = frozenset(all_tasks)
        await wait_until(
            lambda: self.settled(wanted),
            timeout,
            message=lambda: f"not settled: states { {i: s.state.name for i, s in self.live.items()} }, "
            f"tasks { {i: sorted(map(str, t)) for i, t in self.tasks().items()} }",
        )
        return self.tasks()


def tasks_of(num_partitions: int, subtopology: int = 0) -> frozenset[TaskId]:
    """The tasks of a sub-topology over `num_partitions` partitions."""
    return frozenset(TaskId(subtopology, p) for p in range(num_partitions))


def partitions_of(tasks: Iterable[TaskId], topics: Iterable[str]) -> frozenset[TopicPartition]:
    """The source partitions of `tasks` (default grouper: task p holds partition p of each topic)."""
    return frozenset(TopicPartition(t, task.partition) for task in tasks for t in topics)
