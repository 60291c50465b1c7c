"""StreamPartitioner: how a sink picks the partition of each record it writes."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["StreamPartitioner"]


class StreamPartitioner(Protocol):
    """A callable `(topic, key, value, num_partitions) -> partition`, given to `Topology.add_sink`.

    Returning None leaves the choice to the producer's default partitioner (murmur2 of the
    serialized key, as Java's). A result outside [0, num_partitions) is an error.
    """

    def __call__(self, topic: str, key: Any, value: Any, num_partitions: int, /) -> int | None: ...
