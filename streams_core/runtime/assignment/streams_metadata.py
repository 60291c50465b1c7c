"""KIP-67 discovery values: StreamsMetadata (what one instance hosts) and KeyQueryMetadata."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from streams_core.common.host_info import HostInfo
from streams_core.common.topic_partition import TopicPartition

__all__ = ["KeyQueryMetadata", "StreamsMetadata"]


@dataclass(slots=True, frozen=True)
class StreamsMetadata:
    """One instance of the application: its endpoint, stores and partitions, active and standby.

    `StreamsMetadata.NOT_AVAILABLE` stands for "not known now" (a rebalance is in progress or the
    metadata has not arrived): retry later.
    """

    host_info: HostInfo
    state_store_names: frozenset[str] = frozenset()
    topic_partitions: frozenset[TopicPartition] = frozenset()
    standby_state_store_names: frozenset[str] = frozenset()
    standby_topic_partitions: frozenset[TopicPartition] = frozenset()

    NOT_AVAILABLE: ClassVar[StreamsMetadata]

    @property
    def host(self) -> str:
        return self.host_info.host

    @property
    def port(self) -> int:
        return self.host_info.port


StreamsMetadata.NOT_AVAILABLE = StreamsMetadata(HostInfo.UNAVAILABLE)


@dataclass(slots=True, frozen=True)
class KeyQueryMetadata:
    """Where a key of a store lives: the active host, the standby hosts, and the partition.

    `KeyQueryMetadata.NOT_AVAILABLE` (unavailable host, partition -1) means "retry later".
    """

    active_host: HostInfo
    standby_hosts: frozenset[HostInfo]
    partition: int

    NOT_AVAILABLE: ClassVar[KeyQueryMetadata]


KeyQueryMetadata.NOT_AVAILABLE = KeyQueryMetadata(HostInfo.UNAVAILABLE, frozenset(), -1)
