"""Position and PositionBound (IQv2, KIP-796): how far a store copy has processed its input, and a query's lower bound.

A `Position` maps each source topic and partition of a store copy's task to the offset of the
last record the copy processed. A query with `PositionBound.at(position)` is answered by a copy
only once the copy has reached, for the copy's own partition, every offset the bound names for
that partition (Kafka's `StoreQueryUtils.isPermitted`); otherwise the partition's result is a
NOT_UP_TO_BOUND failure. Unlike Kafka's mutable `Position`, ours is an immutable value:
`with_component` and `merge` return new positions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from streams_core.common.topic_partition import TopicPartition

__all__ = ["Position", "PositionBound"]


@dataclass(frozen=True, slots=True)
class Position:
    """Per topic and partition, the offset of the last processed record (an immutable value)."""

    offsets: Mapping[TopicPartition, int] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", MappingProxyType(dict(self.offsets)))

    def __reduce__(self) -> tuple[type[Position], tuple[dict[TopicPartition, int]]]:
        return Position, (dict(self.offsets),)

    def __hash__(self) -> int:
        return hash(frozenset(self.offsets.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Position) and dict(self.offsets) == dict(other.offsets)

    @classmethod
    def of_offsets(cls, offsets: dict[TopicPartition, int]) -> Position:
        """A position over `offsets`, a dict the caller hands over (not copied: a copy's answer, made per query)."""
        position = object.__new__(cls)
        object.__setattr__(position, "offsets", MappingProxyType(offsets))
        return position

    @classmethod
    def empty_position(cls) -> Position:
        return cls()

    @classmethod
    def from_map(cls, offsets: Mapping[str, Mapping[int, int]]) -> Position:
        """A position from `{topic: {partition: offset}}` (Kafka's `Position.fromMap`)."""
        return cls({TopicPartition(topic, p): o for topic, parts in offsets.items() for p, o in parts.items()})

    def with_component(self, topic: str, partition: int, offset: int) -> Position:
        """This position with `topic`/`partition` at `offset` (a new value)."""
        return Position({**self.offsets, TopicPartition(topic, partition): offset})

    def merge(self, other: Position | None) -> Position:
        """The larger offset of the two per topic and partition (Kafka's `Position.merge`)."""
        if other is None:
            return self
        merged = dict(self.offsets)
        for tp, offset in other.offsets.items():
            merged[tp] = max(offset, merged.get(tp, offset))
        return Position(merged)

    def get_topics(self) -> set[str]:
        return {tp.topic for tp in self.offsets}

    def get_partition_positions(self, topic: str) -> dict[int, int]:
        return {tp.partition: offset for tp, offset in self.offsets.items() if tp.topic == topic}

    def is_empty(self) -> bool:
        return not self.offsets

    def reached(self, bound: Position, partitions: Iterable[int]) -> bool:
        """Whether this position is at or past `bound` for every entry of `bound` on one of `partitions`;
        an entry for a partition this position has not processed is not reached."""
        wanted = set(partitions)
        for tp, offset in bound.offsets.items():
            if tp.partition in wanted and self.offsets.get(tp, -1) < offset:
                return False
        return True

    def __repr__(self) -> str:
        entries = ", ".join(f"{tp.topic}:{tp.partition}:{o}" for tp, o in sorted(self.offsets.items()))
        return f"Position({entries})"


@dataclass(frozen=True, slots=True)
class PositionBound:
    """A query's lower bound on the position of the copy that answers it: unbounded, or at a position."""

    position: Position = field(default_factory=Position)
    _unbounded: bool = True

    @classmethod
    def unbounded(cls) -> PositionBound:
        """Any copy may answer, however far it has processed."""
        return cls()

    @classmethod
    def at(cls, position: Position) -> PositionBound:
        """Only a copy at or past `position` (for its partition) may answer."""
        return cls(position, False)

    def is_unbounded(self) -> bool:
        return self._unbounded

    def permits(self, position: Position | None, partition: int) -> bool:
        """Whether a copy of `partition` at `position` may answer (Kafka's `isPermitted`)."""
        return self._unbounded or (position or Position()).reached(self.position, (partition,))

    def __repr__(self) -> str:
        return "PositionBound(unbounded)" if self._unbounded else f"PositionBound.at({self.position!r})"
