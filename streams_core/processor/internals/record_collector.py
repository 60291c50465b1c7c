"""RecordCollector: where sink nodes send their serialized records.

The runtime implements it over an aiokafka producer (buffering sends and flushing at commit);
the TopologyTestDriver over in-memory topics. Sinks serialize and pick the partition before
calling it, so the collector only moves bytes.
"""

from __future__ import annotations

from typing import Protocol

from streams_core.common.headers import Headers

__all__ = ["RecordCollector"]


class RecordCollector(Protocol):
    """Accepts the records a task produces."""

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None:
        """Queue one record for `topic`; partition None means the producer's default partitioner."""
        ...

    def partitions_for(self, topic: str) -> int:
        """How many partitions `topic` has; asked only by sinks that have a custom partitioner."""
        ...
