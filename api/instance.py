"""StreamsInstance: the part of `KafkaStreams` the REST layer uses, as a Protocol.

`KafkaStreams` satisfies it; so can a fake in tests. Keeping the list here makes plain what the
REST layer needs from the runtime (discovery, stores and their partitions, state, metrics, the
topology's stores).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from streams_core import KeyQueryMetadata, State, StoreDescription, StreamsMetadata, Topology
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.queries.store_host import Deadline, StoreHost, StoreRead

__all__ = ["StoreQueries", "StreamsInstance"]


class StoreQueries(Protocol):
    """The instance's asynchronous query path (`KafkaStreams.store_queries`), which the REST layer's IQv2
    queries take (api/reads.py, `runtime/queries/interactive_query.py`): every read with a deadline."""

    def copies(self, store_name: str) -> dict[int, bool]:
        """Partition -> whether active, of this instance's copies of the store (as far as it knows now)."""
        ...

    async def query(self, read: StoreRead, deadline: Deadline) -> Any:
        """`read` answered by this instance's copies; InvalidStateStoreError when it cannot be now,
        `StoreQueryTimeoutError` when a stream thread's worker does not answer by `deadline`."""
        ...

    async def query_each(self, reads: Sequence[StoreRead], deadline: Deadline) -> list[tuple[bool, Any]]:
        """Each read's `(True, answer)` or `(False, exception)`: a scan's partitions, one request per host."""
        ...

    def hosts(self) -> Sequence[StoreHost]:
        """The stream threads that hold copies (worker processes in process mode), for health reports."""
        ...


class StreamsInstance(Protocol):
    """One instance of a streams-core application, as the REST layer sees it."""

    application_id: str
    config: Any
    """`config["application.server"]` and `config["default.key.serde"]` are read."""
    topology: Topology
    """Described by `/topology` (the dashboard draws it)."""

    @property
    def state(self) -> State: ...

    @property
    def store_queries(self) -> StoreQueries:
        """How the REST layer reads stores: asynchronously, never blocking its event loop."""
        ...

    def describe_store(self, store_name: str) -> StoreDescription:
        """Kind, key serde and window size of a store; UnknownStateStoreError for an unknown name."""
        ...

    def store_partitions(self, store_name: str) -> frozenset[TopicPartition]:
        """The source partitions of the store's tasks, which a gathered scan's hosts must cover; empty
        for a global store; InvalidStateStoreError while not known."""
        ...

    def all_metadata(self) -> list[StreamsMetadata]: ...

    def all_metadata_for_store(self, store_name: str) -> list[StreamsMetadata]: ...

    def query_metadata_for_key(self, store_name: str, key: Any, key_serializer: Any = None) -> KeyQueryMetadata: ...

    def metrics(self) -> dict[str, Any]: ...

    async def all_local_store_partition_lags(self) -> Mapping[str, Mapping[int, Any]]: ...
