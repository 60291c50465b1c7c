"""StreamsInstance: the part of `KafkaStreams` the REST layer uses, as a Protocol.

`KafkaStreams` satisfies it; so can a fake in tests. Keeping the list here makes plain what the
REST layer needs from the runtime (discovery, stores, state, metrics, the topology's stores).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from streams_core import KeyQueryMetadata, State, StoreDescription, StreamsMetadata, Topology

__all__ = ["StreamsInstance"]


class StreamsInstance(Protocol):
    """One instance of a streams-core application, as the REST layer sees it."""

    application_id: str
    config: Any
    """`config["application.server"]` and `config["default.key.serde"]` are read."""
    topology: Topology
    """Described by `/topology` (the dashboard draws it)."""

    @property
    def state(self) -> State: ...

    def store(
        self,
        name: str,
        store_type: Any,
        /,
        *,
        partition: int | None = None,
        stale: bool = False,
        max_lag: int | None = None,
    ) -> Any: ...

    def store_position(self, store_name: str, partition: int) -> Mapping[Any, int] | None:
        """Per source partition, the offset of the last record the local active copy processed."""
        ...

    def describe_store(self, store_name: str) -> StoreDescription:
        """Kind, key serde and window size of a store; UnknownStateStoreError for an unknown name."""
        ...

    def all_metadata(self) -> list[StreamsMetadata]: ...

    def all_metadata_for_store(self, store_name: str) -> list[StreamsMetadata]: ...

    def query_metadata_for_key(self, store_name: str, key: Any, key_serializer: Any = None) -> KeyQueryMetadata: ...

    def metrics(self) -> dict[str, Any]: ...

    async def all_local_store_partition_lags(self) -> Mapping[str, Mapping[int, Any]]: ...
