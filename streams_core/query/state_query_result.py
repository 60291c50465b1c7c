"""StateQueryResult (IQv2): the per-partition results of one request (or a global store's one result)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Generic, TypeVar

from streams_core.query.position import Position
from streams_core.query.query_result import QueryResult

__all__ = ["StateQueryResult"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class StateQueryResult(Generic[R]):
    """The results by partition: each a success or a failure with its reason."""

    _partition_results: Mapping[int, QueryResult[R]] = field(default_factory=dict)
    _global_result: QueryResult[R] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "_partition_results", MappingProxyType(dict(self._partition_results)))

    def get_partition_results(self) -> Mapping[int, QueryResult[R]]:
        """Partition -> result, for every partition that was asked (a read-only mapping)."""
        return self._partition_results

    def get_only_partition_result(self) -> QueryResult[R] | None:
        """The one successful result with a non-None value (a key query's: only the key's partition
        has it); None when there is none; ValueError when several partitions have one."""
        found = [r for r in self._partition_results.values() if r.is_success() and r.get_result() is not None]
        if len(found) > 1:
            raise ValueError(f"The query did not return exactly one partition result: {dict(self._partition_results)}")
        return found[0] if found else None

    def get_global_result(self) -> QueryResult[R] | None:
        """A global store's result; None for a partitioned store."""
        return self._global_result

    def get_position(self) -> Position:
        """The merge of every partition result's position."""
        position = Position()
        for result in self._partition_results.values():
            position = position.merge(result.get_position())
        return position
