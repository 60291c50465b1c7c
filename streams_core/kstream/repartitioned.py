"""Repartitioned: the internal topic `KStream.repartition` writes and reads."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from streams_core.kstream.internals.names import check_topic_name
from streams_core.processor.stream_partitioner import StreamPartitioner
from streams_core.serde import Serde

__all__ = ["Repartitioned"]


@dataclass(frozen=True, slots=True)
class Repartitioned:
    """Serdes, name (topic `<application.id>-<name>-repartition`), partition count and partitioner.

    Without a partition count the topic gets as many partitions as the sub-topology writing it
    has tasks.
    """

    key_serde: Serde[Any] | None = None
    value_serde: Serde[Any] | None = None
    name: str | None = None
    number_of_partitions: int | None = None
    partitioner: StreamPartitioner | None = None

    def __post_init__(self) -> None:
        if self.name is not None:
            check_topic_name(self.name, "Repartitioned name")
        n = self.number_of_partitions
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"the number of partitions must be an int >= 1, got {n!r}")

    @staticmethod
    def with_(key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None) -> Repartitioned:
        return Repartitioned(key_serde, value_serde)

    @staticmethod
    def as_(name: str) -> Repartitioned:
        return Repartitioned(name=name)

    @staticmethod
    def of_number_of_partitions(count: int) -> Repartitioned:
        return Repartitioned(number_of_partitions=count)

    def with_key_serde(self, serde: Serde[Any] | None) -> Repartitioned:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde[Any] | None) -> Repartitioned:
        return replace(self, value_serde=serde)

    def with_name(self, name: str) -> Repartitioned:
        return replace(self, name=name)

    def with_number_of_partitions(self, count: int) -> Repartitioned:
        return replace(self, number_of_partitions=count)

    def with_stream_partitioner(self, partitioner: StreamPartitioner | None) -> Repartitioned:
        return replace(self, partitioner=partitioner)

    def merged(self, **overrides: Any) -> Repartitioned:
        given = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **given) if given else self
