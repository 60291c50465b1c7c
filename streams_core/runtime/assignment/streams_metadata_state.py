"""StreamsMetadataState: answers KIP-67 discovery queries from the latest assignment.

Fed by the lead after each rebalance with the `partitions_by_host` maps every member receives
in its AssignmentInfo, and with the partition counts of the source topics. A store is hosted
where the source partitions of its sub-topology are; a key's partition is computed as the
producer computes it (murmur2 of the serialized key, unless a partitioner is given).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from streams_core.common.host_info import HostInfo
from streams_core.common.partitioner import default_partition
from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import UnknownStateStoreError
from streams_core.processor.stream_partitioner import StreamPartitioner
from streams_core.runtime.assignment.streams_metadata import KeyQueryMetadata, StreamsMetadata

__all__ = ["StreamPartitioner", "StreamsMetadataState"]

HostPartitions = Mapping[HostInfo, Collection[TopicPartition]]


class StreamsMetadataState:
    """Discovery over the latest assignment; NOT_AVAILABLE before the first one.

    As in Kafka Streams, a rebalance does not clear it: until the next assignment arrives,
    queries are routed by the last one (stale reads keep answering; an instance that lost a
    task answers 503 for it, so a stale route never yields a wrong value).

    `store_source_topics` maps each store of the topology to the source topics of the
    sub-topology it belongs to. An unknown store name raises `UnknownStateStoreError`. Global
    stores are on every instance: a key of one is answered by this instance (as Kafka's
    StreamsMetadataState, partition -1).
    """

    def __init__(
        self,
        store_source_topics: Mapping[str, Collection[str]],
        this_host: HostInfo | None = None,
        global_stores: Collection[str] = (),
    ) -> None:
        self._store_topics = {store: frozenset(topics) for store, topics in store_source_topics.items()}
        self._global_stores = frozenset(global_stores)
        self.this_host = this_host
        self._metadata: list[StreamsMetadata] | None = None
        self._partition_counts: dict[str, int] = {}

    @property
    def store_names(self) -> frozenset[str]:
        return frozenset(self._store_topics)

    @property
    def is_initialized(self) -> bool:
        return self._metadata is not None

    def on_change(
        self,
        partitions_by_host: HostPartitions,
        standby_partitions_by_host: HostPartitions,
        partition_counts: Mapping[str, int],
    ) -> None:
        """Take the host maps of a completed assignment and the source topics' partition counts."""
        hosts = sorted(set(partitions_by_host) | set(standby_partitions_by_host))
        metadata = []
        for host in hosts:
            active = frozenset(partitions_by_host.get(host, ()))
            standby = frozenset(standby_partitions_by_host.get(host, ()))
            metadata.append(
                StreamsMetadata(host, self._stores_of(active), active, self._stores_of(standby), standby)
            )
        self._metadata = metadata
        self._partition_counts = dict(partition_counts)

    def _stores_of(self, partitions: frozenset[TopicPartition]) -> frozenset[str]:
        topics = {tp.topic for tp in partitions}
        return frozenset(store for store, sources in self._store_topics.items() if sources & topics)

    def _sources(self, store_name: str) -> frozenset[str]:
        try:
            return self._store_topics[store_name]
        except KeyError:
            raise UnknownStateStoreError(
                f"no state store named {store_name!r} in the topology "
                f"(stores: {', '.join(sorted(self._store_topics)) or 'none'})"
            ) from None

    def all_metadata(self) -> list[StreamsMetadata]:
        """Every instance with an application.server, sorted by host; empty when not available."""
        return list(self._metadata or ())

    def all_metadata_for_store(self, store_name: str) -> list[StreamsMetadata]:
        """The instances hosting an active or standby copy of the store (every instance for a global store)."""
        if store_name in self._global_stores:
            return self.all_metadata()
        self._sources(store_name)
        return [
            m
            for m in self._metadata or ()
            if store_name in m.state_store_names or store_name in m.standby_state_store_names
        ]

    def local_metadata(self) -> StreamsMetadata | None:
        """This instance's entry, if it has an application.server and is in the assignment."""
        return next((m for m in self._metadata or () if m.host_info == self.this_host), None)

    def _partition_for_key(
        self, store_name: str, key: Any, partitioner: StreamPartitioner | None
    ) -> tuple[frozenset[str], int] | None:
        sources = self._sources(store_name)
        counts = [(self._partition_counts[t], t) for t in sorted(sources) if t in self._partition_counts]
        if self._metadata is None or not counts or len(counts) < len(sources):
            return None
        num_partitions, topic = min(counts, key=lambda c: (-c[0], c[1]))
        if partitioner is None:
            if not isinstance(key, (bytes, bytearray, memoryview)):
                raise TypeError(f"without a partitioner the key must be serialized bytes, got {type(key).__name__}")
            return sources, default_partition(bytes(key), num_partitions)
        partition = partitioner(topic, key, None, num_partitions)
        return (sources, partition) if partition is not None else None

    def query_metadata_for_key(
        self, store_name: str, key: Any, partitioner: StreamPartitioner | None = None
    ) -> KeyQueryMetadata:
        """The active host, standby hosts and partition of a key; NOT_AVAILABLE while unknown.

        `key` is the serialized key (bytes) unless a partitioner is given; the partition is then
        the partitioner's answer for the source topic with the most partitions.
        """
        if store_name in self._global_stores:
            here = self.this_host if self._metadata is not None and self.this_host is not None else HostInfo.UNAVAILABLE
            return KeyQueryMetadata(here, frozenset(), -1)
        found = self._partition_for_key(store_name, key, partitioner)
        if found is None:
            return KeyQueryMetadata.NOT_AVAILABLE
        sources, partition = found
        wanted = {TopicPartition(t, partition) for t in sources}
        active = HostInfo.UNAVAILABLE
        standbys: set[HostInfo] = set()
        for metadata in self._metadata or ():
            if not wanted.isdisjoint(metadata.topic_partitions):
                active = metadata.host_info
            if not wanted.isdisjoint(metadata.standby_topic_partitions):
                standbys.add(metadata.host_info)
        return KeyQueryMetadata(active, frozenset(standbys), partition)

    def metadata_for_key(
        self, store_name: str, key: Any, partitioner: StreamPartitioner | None = None
    ) -> StreamsMetadata:
        """The instance with the active copy of the key's partition (KIP-67 metadataForKey)."""
        query = self.query_metadata_for_key(store_name, key, partitioner)
        if query.active_host == HostInfo.UNAVAILABLE:
            return StreamsMetadata.NOT_AVAILABLE
        if store_name in self._global_stores:
            return self.local_metadata() or StreamsMetadata.NOT_AVAILABLE
        return next(m for m in self._metadata or () if m.host_info == query.active_host)
