"""TableJoined: the name and partitioners of a foreign-key table-table join (KIP-775)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from streams_core.kstream.internals.names import check_topic_name
from streams_core.processor.stream_partitioner import StreamPartitioner

__all__ = ["TableJoined"]


@dataclass(frozen=True, slots=True)
class TableJoined:
    """`TableJoined.with_(partitioner, other_partitioner)`, `TableJoined.as_(name)`.

    `name` names the join's processors, store and internal topics (`<name>-subscription-...`);
    `partitioner` says how the left table's topic is partitioned (the response topic follows it),
    `other_partitioner` the right table's (the subscription topic follows it). Both are
    `(topic, key, value, num_partitions) -> partition` callables; None means the default.
    """

    partitioner: StreamPartitioner | None = None
    other_partitioner: StreamPartitioner | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.name is not None:
            check_topic_name(self.name, "TableJoined name")

    @staticmethod
    def with_(partitioner: StreamPartitioner | None = None, other_partitioner: StreamPartitioner | None = None) -> TableJoined:
        return TableJoined(partitioner, other_partitioner)

    @staticmethod
    def as_(name: str) -> TableJoined:
        return TableJoined(name=name)

    def with_name(self, name: str) -> TableJoined:
        return replace(self, name=name)

    def with_partitioner(self, partitioner: StreamPartitioner | None) -> TableJoined:
        return replace(self, partitioner=partitioner)

    def with_other_partitioner(self, partitioner: StreamPartitioner | None) -> TableJoined:
        return replace(self, other_partitioner=partitioner)
