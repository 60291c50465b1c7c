"""A two-instance application without a broker, for the REST layer's tests.

`FakeKafkaStreams` implements the part of `KafkaStreams` that `api/` uses, on real stores
(built and initialised by a `TopologyTestDriver`), the real `StreamsMetadataState` for
discovery, and the real queryable store types. `Cluster` holds two instances, A and B, of one
application whose source topic has two partitions: A owns partition 0 and keeps a standby of
partition 1, B the reverse. `ClusterTransport` routes httpx requests for `host:port` to the
instance's app in process, so forwarding between instances is exercised end to end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI

from api import ApiSettings, create_app
from streams_core import (
    HostInfo,
    InvalidStateStoreError,
    KeyQueryMetadata,
    Processor,
    Serdes,
    State,
    Stores,
    StreamsConfig,
    Topology,
    TopologyTestDriver,
    UnknownStateStoreError,
)
from streams_core.common.partitioner import default_partition
from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import StreamsNotStartedError
from streams_core.runtime.assignment import StreamsMetadataState
from streams_core.runtime.kafka_streams import LagInfo
from streams_core.runtime.queries.store_host import Deadline, StoreRead
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.state import QueryableStoreType
from streams_core.state.store_description import StoreDescription, describe_store

TOPIC = "words"
PARTITIONS = 2
COUNTS = "counts"
IDS = "ids"
WINDOWED = "windowed-counts"
SESSIONS = "sessions"
WINDOW_SIZE = 60_000
HOST_A = HostInfo("127.0.0.1", 7001)
HOST_B = HostInfo("127.0.0.1", 7002)


class _Noop(Processor[Any, Any, Any, Any]):
    def process(self, record: Any) -> None:
        pass


def build_topology() -> Topology:
    """One source, one processor, four stores: String and Long keyed, windowed, sessions."""
    day = 86_400_000
    counts = Stores.key_value_store_builder(Stores.in_memory_key_value_store(COUNTS), Serdes.String(), Serdes.Long())
    ids = Stores.key_value_store_builder(Stores.in_memory_key_value_store(IDS), Serdes.Long(), None)
    return (
        Topology()
        .add_source("SOURCE", TOPIC, key_serde=Serdes.String(), value_serde=Serdes.String())
        .add_processor("P", _Noop, "SOURCE")
        .add_state_store(counts, "P")
        .add_state_store(ids, "P")
        .add_state_store(
            Stores.window_store_builder(
                Stores.in_memory_window_store(WINDOWED, day, WINDOW_SIZE), Serdes.String(), Serdes.Long()
            ),
            "P",
        )
        .add_state_store(
            Stores.session_store_builder(Stores.in_memory_session_store(SESSIONS, day), Serdes.String(), Serdes.Long()),
            "P",
        )
    )


class FakeStoreQueries:
    """The asynchronous query path of a `FakeKafkaStreams`: its views read at once (an in-process thread)."""

    def __init__(self, streams: FakeKafkaStreams) -> None:
        self._streams = streams

    async def query(self, read: StoreRead, deadline: Deadline) -> Any:
        query = read.query
        view = self._streams.store(
            read.store, read.store_type, partition=query.partition, stale=query.stale, max_lag=query.max_lag
        )
        result = getattr(view, read.method)(*read.args)
        if read.with_position:
            partition = query.partition
            return result, None if partition is None else self._streams.store_position(read.store, partition)
        return result

    async def query_each(self, reads: Sequence[StoreRead], deadline: Deadline) -> list[tuple[bool, Any]]:
        outcomes: list[tuple[bool, Any]] = []
        for read in reads:
            try:
                outcomes.append((True, await self.query(read, deadline)))
            except Exception as exc:
                outcomes.append((False, exc))
        return outcomes

    def copies(self, store_name: str) -> dict[int, bool]:
        """Every partition: the instance's active ones, and a standby of each other one."""
        return {p: p in self._streams.active for p in range(PARTITIONS)}

    def hosts(self) -> list[Any]:
        return []


class _PartitionOf:
    """One partition's part of a driver's store, for an instance active for several partitions (the
    driver holds their keys in one store): scans answer only the keys of `partition`, as a task's copy would."""

    def __init__(self, store: Any, partition: int) -> None:
        self._store = store
        self._partition = partition

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _mine(self, entries: Iterator[Any]) -> Iterator[Any]:
        serde = self._store.key_serde
        return (kv for kv in entries if default_partition(serde.serialize(None, kv.key), PARTITIONS) == self._partition)

    def range(self, *args: Any) -> Iterator[Any]:
        return self._mine(self._store.range(*args))

    def reverse_range(self, *args: Any) -> Iterator[Any]:
        return self._mine(self._store.reverse_range(*args))

    def all(self) -> Iterator[Any]:
        return self._mine(self._store.all())


class FakeKafkaStreams:
    """A started instance: its active partitions' stores in one driver, its standbys' in another."""

    def __init__(
        self,
        host: HostInfo | None,
        active: set[int],
        metadata_state: StreamsMetadataState,
        topology: Callable[[], Topology] = build_topology,
    ) -> None:
        props = {"application.id": "api-test", "default.value.serde": "json"}
        if host is not None:
            props["application.server"] = str(host)
        self.topology = topology()
        self.config = StreamsConfig(props)
        self.application_id = "api-test"
        self.topology.internal_topology_builder.set_application_id(self.application_id)
        self.metadata = TopologyMetadata(self.topology.internal_topology_builder, self.application_id)
        self.metadata_state = metadata_state
        self.host = host
        self.active = set(active)
        self.state = State.RUNNING
        self.stores_fail = False
        self.lags: dict[str, dict[int, LagInfo]] = {}
        """Lags of the standby copies, by store and partition (checked against `max_lag`)."""
        self.positions: dict[int, int] = {}
        self.active_driver = TopologyTestDriver(topology(), props)
        self.standby_driver = TopologyTestDriver(topology(), props)
        self.store_queries = FakeStoreQueries(self)

    def close(self) -> None:
        self.active_driver.close()
        self.standby_driver.close()

    def describe_store(self, name: str) -> StoreDescription:
        if name not in self.metadata.store_source_topics and name not in self.metadata.global_store_names:
            raise UnknownStateStoreError(f"no state store named {name!r}")
        return describe_store(self.topology, name, self.config["default.key.serde"])

    def store_partitions(self, name: str) -> frozenset[TopicPartition]:
        """Every source topic has `PARTITIONS` partitions."""
        if name not in self.metadata.store_source_topics and name not in self.metadata.global_store_names:
            raise UnknownStateStoreError(f"no state store named {name!r}")
        topics = self.metadata.store_source_topics.get(name, frozenset())
        return frozenset(TopicPartition(topic, p) for topic in topics for p in range(PARTITIONS))

    def store(
        self,
        name: str,
        store_type: QueryableStoreType[Any],
        *,
        partition: int | None = None,
        stale: bool = False,
        max_lag: int | None = None,
    ) -> Any:
        self._require_started()
        if name not in self.metadata.store_source_topics:
            raise UnknownStateStoreError(f"no state store named {name!r}")
        outer = self

        class _Provider:
            def stores(self, store_name: str, kind: QueryableStoreType[Any]) -> list[Any]:
                return outer._stores(store_name, kind, partition, stale, max_lag)

        self._stores(name, store_type, partition, stale, max_lag)
        return store_type.create(_Provider(), name)

    def store_position(self, store_name: str, partition: int) -> dict[TopicPartition, int] | None:
        """The input position of the active copy: `positions[partition]` once set (nothing processed before)."""
        if partition not in self.active:
            return None
        offset = self.positions.get(partition)
        return {} if offset is None else {TopicPartition(TOPIC, partition): offset}

    def _stores(
        self, name: str, store_type: QueryableStoreType[Any], partition: int | None, stale: bool, max_lag: int | None
    ) -> list[Any]:
        if self.stores_fail or not (self.state is State.RUNNING or (stale and self.state is State.REBALANCING)):
            raise InvalidStateStoreError(f"state store {name!r} cannot be queried now: {self.state.name}")
        stores: list[Any] = []
        if partition is None or partition in self.active:
            store = self.active_driver.get_state_store(name)
            several = partition is not None and len(self.active) > 1  # one active partition: the driver's store is its
            stores.append(_PartitionOf(store, partition) if several and partition is not None else store)
        standby_lag = max((lag.offset_lag for lag in self.lags.get(name, {}).values()), default=0)
        within = max_lag is None or standby_lag <= max_lag
        if stale and within and (partition is None or partition not in self.active):
            stores.append(self.standby_driver.get_state_store(name))
        for store in stores:
            if not store_type.accepts(store):
                raise InvalidStateStoreError(f"state store {name!r} is not a {store_type!r}")
        if partition is not None and not stores:
            raise InvalidStateStoreError(f"no queryable copy of store {name!r} for partition {partition} here now")
        return stores

    def _require_started(self) -> None:
        if self.state is State.CREATED:
            raise StreamsNotStartedError("KafkaStreams is not started: call start() first")

    def all_metadata(self) -> list[Any]:
        self._require_started()
        return self.metadata_state.all_metadata()

    def all_metadata_for_store(self, store_name: str) -> list[Any]:
        self._require_started()
        return self.metadata_state.all_metadata_for_store(store_name)

    def query_metadata_for_key(self, store_name: str, key: Any, key_serializer: Any = None) -> KeyQueryMetadata:
        self._require_started()
        serde = key_serializer or self.config["default.key.serde"]
        return self.metadata_state.query_metadata_for_key(store_name, serde.serialize(None, key))

    def metrics(self) -> dict[str, Any]:
        thread = {
            "thread": "t-1", "processed_records": 120, "commit_count": 4, "commit_latency_ms_avg": 2.5,
            "restored_records": 7, "poll_count": 10, "poll_latency_ms_total": 50.0, "process_latency_ms_total": 240.0,
            "cache": {"hits": 3, "misses": 1, "evictions": 2}, "tasks": ["0_0"], "standby_tasks": [],
            "task_metrics": {"0_0": {
                "processed_records": 120, "dropped_records": 1, "restored_records": 7,
                "partitions": {"words-0": {"buffered": 5, "skipped": 1, "paused": True, "records_lag": 9}},
            }},
        }  # fmt: skip
        return {"state": self.state.name, "threads": [thread]}

    async def all_local_store_partition_lags(self) -> dict[str, dict[int, LagInfo]]:
        self._require_started()
        return self.lags


class ClusterTransport(httpx.AsyncBaseTransport):
    """Routes requests for `host:port` to that instance's app; records every request it routes."""

    def __init__(self) -> None:
        self.apps: dict[str, httpx.ASGITransport] = {}
        self.down: set[str] = set()
        self.requests: list[httpx.Request] = []

    def mount(self, host: HostInfo, app: FastAPI) -> None:
        self.apps[str(host)] = httpx.ASGITransport(app, raise_app_exceptions=False)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        address = f"{request.url.host}:{request.url.port}"
        if address not in self.apps or address in self.down:
            raise httpx.ConnectError(f"cannot connect to {address}", request=request)
        return await self.apps[address].handle_async_request(request)

    def forwarded_to(self, host: HostInfo) -> list[httpx.Request]:
        """The requests one instance sent to `host` (they carry the hop header)."""
        return [r for r in self.requests if r.url.port == host.port and "x-streams-forwarded-by" in r.headers]


class Cluster:
    """Instances A and B of one application, their apps, and a transport that reaches both."""

    def __init__(self, settings: ApiSettings | None = None, **options: Any) -> None:
        """`options` are ApiSettings fields besides the cluster's own transport (credentials, principal...)."""
        topology = build_topology()
        store_topics = TopologyMetadata(topology.internal_topology_builder, "api-test").store_source_topics
        self.transport = ClusterTransport()
        self.instances: dict[HostInfo, FakeKafkaStreams] = {}
        self.settings = settings or ApiSettings(transport=self.transport, **options)
        self.headers: dict[str, str] = {}
        """Sent by every `client()` (e.g. credentials)."""
        for host, active in ((HOST_A, {0}), (HOST_B, {1})):
            self.instances[host] = FakeKafkaStreams(host, active, StreamsMetadataState(store_topics, host))
        self.assign()
        self.app = {host: create_app(streams, settings=self.settings) for host, streams in self.instances.items()}
        for host, app in self.app.items():
            self.transport.mount(host, app)

    @property
    def a(self) -> FakeKafkaStreams:
        return self.instances[HOST_A]

    @property
    def b(self) -> FakeKafkaStreams:
        return self.instances[HOST_B]

    def assign(self) -> None:
        """Give every instance the same assignment: A owns partition 0, B partition 1, each the other's standby."""
        active = {HOST_A: [TopicPartition(TOPIC, 0)], HOST_B: [TopicPartition(TOPIC, 1)]}
        standby = {HOST_A: [TopicPartition(TOPIC, 1)], HOST_B: [TopicPartition(TOPIC, 0)]}
        for streams in self.instances.values():
            streams.metadata_state.on_change(active, standby, {TOPIC: PARTITIONS})

    def rebalance(self) -> None:
        """Every instance starts a rebalance: state REBALANCING, the last assignment's metadata kept."""
        for streams in self.instances.values():
            streams.state = State.REBALANCING

    def owner(self, key: Any, serde: Any = None) -> FakeKafkaStreams:
        """The instance whose active copy holds `key` (serialized with `serde`, String by default)."""
        return self.instances[self.owner_host(key, serde)]

    def owner_host(self, key: Any, serde: Any = None) -> HostInfo:
        data = (serde or Serdes.String()).serialize(None, key) or b""
        partition = default_partition(data, PARTITIONS)
        return next(host for host, streams in self.instances.items() if partition in streams.active)

    def _copies(self, key: Any, serde: Any) -> Iterator[TopologyTestDriver]:
        """The owner's active driver and the other instance's standby driver."""
        owner = self.owner(key, serde)
        for streams in self.instances.values():
            yield streams.active_driver if streams is owner else streams.standby_driver

    def put(self, store: str, key: Any, value: Any, serde: Any = None) -> None:
        """Write key=value on its owner's active copy and on the other instance's standby copy."""
        for driver in self._copies(key, serde):
            driver.get_key_value_store(store).put(key, value)

    def put_window(self, key: str, value: int, start: int) -> None:
        for driver in self._copies(key, None):
            driver.get_window_store(WINDOWED).put(key, value, start)

    def client(self, host: HostInfo = HOST_A) -> httpx.AsyncClient:
        """An HTTP client talking to one instance (through the cluster transport)."""
        return httpx.AsyncClient(transport=self.transport, base_url=f"http://{host}", headers=self.headers)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Cluster]:
        """Run every app's lifespan (the forwarding clients) for the duration of the block."""
        async with AsyncExitStack() as stack:
            for app in self.app.values():
                await stack.enter_async_context(app.router.lifespan_context(app))
            yield self

    def close(self) -> None:
        for streams in self.instances.values():
            streams.close()
