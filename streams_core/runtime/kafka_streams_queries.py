"""The queries a KafkaStreams client answers: its local stores (KIP-67's `store()`, IQv2's
`query()`, KIP-535's stale reads and lags) and where the application's stores live (KIP-67
discovery). A mixin of `KafkaStreams`, which owns the state it reads.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, TypeVar, overload

from streams_core.common.store import ReadOnlyKeyValueStore
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.errors import InvalidStateStoreError, StreamsNotStartedError, UnknownStateStoreError
from streams_core.processor.topology import Topology
from streams_core.query.state_query_request import StateQueryRequest
from streams_core.query.state_query_result import StateQueryResult
from streams_core.runtime.assignment import KeyQueryMetadata, StreamPartitioner, StreamsMetadata, StreamsMetadataState
from streams_core.runtime.client_state import ClientStateMachine, State
from streams_core.runtime.queries.interactive_query import DEFAULT_QUERY_TIMEOUT_S, query_off_loop, query_store
from streams_core.runtime.queries.state_store_providers import LagInfo, QueryableStoreProvider, StoreQuery
from streams_core.runtime.thread_mode import remote_global_stores
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.state.queryable_store_types import QueryableStoreType, QueryableStoreTypes
from streams_core.state.store_description import StoreDescription, describe_store

if TYPE_CHECKING:
    from streams_core.runtime.threads.global_stream_thread import GlobalStreamThread
    from streams_core.runtime.threads.stream_threads import StreamThreads

__all__ = ["KafkaStreamsQueries"]

T = TypeVar("T")


class KafkaStreamsQueries:
    """Interactive queries and discovery over what `KafkaStreams` holds (the attributes below)."""

    config: StreamsConfig
    topology: Topology
    metadata: TopologyMetadata
    metadata_state: StreamsMetadataState
    _lifecycle: ClientStateMachine
    _store_provider: QueryableStoreProvider
    _partition_counts: dict[str, int]
    _loop: asyncio.AbstractEventLoop | None
    _global_thread: GlobalStreamThread | None
    _inline: bool
    _threads: StreamThreads

    @overload
    def store(
        self,
        store_name: str,
        store_type: None = None,
        *,
        partition: int | None = None,
        stale: bool = False,
        max_lag: int | None = None,
    ) -> ReadOnlyKeyValueStore[Any, Any]: ...

    @overload
    def store(
        self,
        store_name: str,
        store_type: QueryableStoreType[T],
        *,
        partition: int | None = None,
        stale: bool = False,
        max_lag: int | None = None,
    ) -> T: ...

    def store(
        self,
        store_name: str,
        store_type: QueryableStoreType[Any] | None = None,
        *,
        partition: int | None = None,
        stale: bool = False,
        max_lag: int | None = None,
    ) -> Any:
        """A read-only view over this instance's copies of `store_name` (one per task).

        Queries raise `InvalidStateStoreError` (retriable) while the instance is not RUNNING or
        the store is closed or migrating, never answering partially. `stale=True` also reads
        standby copies whose lag is known and at most `max_lag` (any, when None) and answers while
        rebalancing (KIP-535); `partition` limits the view to one partition's task. Unknown names
        raise `UnknownStateStoreError`. The view is over every stream thread's store provider.
        """
        self._require_started()
        self._require_store(store_name)
        kind, query = store_type or QueryableStoreTypes.key_value_store(), StoreQuery(partition, stale, max_lag)
        self._store_provider.local_stores(store_name, kind, query)
        return self._store_provider.get_store(store_name, kind, query)

    async def query(self, request: StateQueryRequest[T], *, timeout: float = DEFAULT_QUERY_TIMEOUT_S) -> StateQueryResult[T]:
        """IQv2 (KIP-796): `request` answered per partition by this instance's copies through the one
        store path, each host within `timeout` s (runtime/queries/interactive_query.py, docs/iqv2.md)."""
        self._require_started()
        self._require_store(request.store_name)
        live = None if self._lifecycle.state.is_running_or_rebalancing() else self._lifecycle.state.name
        return await query_store(self._store_provider, self.metadata, self._partition_counts, request, timeout, live)

    def query_sync(self, request: StateQueryRequest[T], *, timeout: float = DEFAULT_QUERY_TIMEOUT_S) -> StateQueryResult[T]:
        """`query()` for code on another thread than the instance's event loop (Kafka's blocking call)."""
        return query_off_loop(self._loop, lambda: self.query(request, timeout=timeout), timeout)

    def store_position(self, store_name: str, partition: int) -> dict[TopicPartition, int] | None:
        """How far the local active copy of a store's partition has processed its input: per source
        partition the offset of the last record (IQv2's Position); None without an active copy here."""
        self._require_store(store_name)
        return self._store_provider.position(store_name, partition)

    def _global_stores(self) -> dict[str, Any]:
        """The instance's global stores by name (none before the global thread started); a worker's in process mode."""
        if self._global_thread is not None:
            return self._global_thread.stores
        return {} if self._inline else remote_global_stores(self._threads.all(), self.metadata.global_store_names)

    def _require_store(self, store_name: str) -> None:
        if store_name not in self.metadata.store_source_topics and store_name not in self.metadata.global_store_names:
            raise UnknownStateStoreError(
                f"no state store named {store_name!r} in the topology "
                f"(stores: {sorted(self.metadata.store_source_topics)})"
            )

    def _check_queryable(self, store_name: str, stale: bool) -> None:
        state = self._lifecycle.state
        if not (state is State.RUNNING or (stale and state is State.REBALANCING)):
            raise InvalidStateStoreError(
                f"state store {store_name!r} cannot be queried now: the instance is {state.name} "
                "(retry; stale=True also reads standby copies while rebalancing)"
            )

    def describe_store(self, store_name: str) -> StoreDescription:
        """What kind of store `store_name` is, its key serde and window size (for query layers such as REST)."""
        self._require_store(store_name)
        return describe_store(self.topology, store_name, self.config["default.key.serde"])

    def store_partitions(self, store_name: str) -> frozenset[TopicPartition]:
        """The input partitions of the store's tasks (its sub-topology's source partitions): a scan of
        the whole store must find every one on a host. Empty for a global store; InvalidStateStoreError
        (retriable) while a source topic's partition count is not known (before start)."""
        self._require_store(store_name)
        topics = self.metadata.store_source_topics.get(store_name, frozenset())
        unknown = sorted(topic for topic in topics if topic not in self._partition_counts)
        if unknown:
            raise InvalidStateStoreError(f"state store {store_name!r}: partition counts of {unknown} not known yet")
        return frozenset(TopicPartition(topic, p) for topic in topics for p in range(self._partition_counts[topic]))

    def store_names(self) -> list[str]:
        """The names of the topology's queryable stores, sorted."""
        return sorted(self.metadata.store_source_topics)

    async def all_local_store_partition_lags(self) -> dict[str, dict[int, LagInfo]]:
        """Per local store and partition (active and standby): changelog position, end, and lag."""
        self._require_started()
        return await self._store_provider.lags()

    # -- discovery (KIP-67) -------------------------------------------------------------------

    def _require_started(self) -> None:
        if self._lifecycle.state is State.CREATED:
            raise StreamsNotStartedError("KafkaStreams is not started: call start() first")

    def all_metadata(self) -> list[StreamsMetadata]:
        """Every instance of the application with its application.server, stores and partitions."""
        self._require_started()
        return self.metadata_state.all_metadata()

    def all_metadata_for_store(self, store_name: str) -> list[StreamsMetadata]:
        """The instances that host `store_name`."""
        self._require_started()
        return self.metadata_state.all_metadata_for_store(store_name)

    def metadata_for_key(
        self, store_name: str, key: Any, key_serializer: Any = None, partitioner: StreamPartitioner | None = None
    ) -> StreamsMetadata:
        """The instance whose store holds `key` (serialized with `key_serializer` or the default key serde)."""
        self._require_started()
        return self.metadata_state.metadata_for_key(store_name, self._lookup_key(key, key_serializer, partitioner), partitioner)

    def query_metadata_for_key(
        self, store_name: str, key: Any, key_serializer: Any = None, partitioner: StreamPartitioner | None = None
    ) -> KeyQueryMetadata:
        """Active host, standby hosts and partition of `key` in `store_name`."""
        self._require_started()
        return self.metadata_state.query_metadata_for_key(store_name, self._lookup_key(key, key_serializer, partitioner), partitioner)

    def _lookup_key(self, key: Any, key_serializer: Any, partitioner: StreamPartitioner | None) -> Any:
        """The key as the metadata lookup wants it: the object for a partitioner, else its bytes."""
        if partitioner is not None or (isinstance(key, bytes) and key_serializer is None):
            return key
        serde = key_serializer or self.config["default.key.serde"]
        return serde.serialize(None, key)
