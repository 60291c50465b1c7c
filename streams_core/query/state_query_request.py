"""StateQueryRequest (IQv2): which store, which query, which partitions, and the conditions on the copies that answer.

    request = StateQueryRequest.in_store("counts").with_query(KeyQuery.with_key("hello"))
    request = request.with_partitions({0}).require_active().with_position_bound(PositionBound.at(pos))

An immutable value: every builder method returns a new request.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from streams_core.query.position import PositionBound
from streams_core.query.queries import Query

__all__ = ["StateQueryRequest"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class InStore:
    """The first step of a request: the store's name (`StateQueryRequest.in_store(name)`)."""

    name: str

    def with_query(self, query: Query[R]) -> StateQueryRequest[R]:
        return StateQueryRequest(self.name, query)


@dataclass(frozen=True, slots=True)
class StateQueryRequest(Generic[R]):
    """A query of one store, over all partitions (default) or some, answered per partition."""

    _store_name: str
    _query: Query[R]
    _partitions: frozenset[int] | None = None
    _position_bound: PositionBound = field(default_factory=PositionBound.unbounded)
    _require_active: bool = False
    _execution_info: bool = False

    @staticmethod
    def in_store(name: str) -> InStore:
        return InStore(name)

    def with_position_bound(self, bound: PositionBound) -> StateQueryRequest[R]:
        return replace(self, _position_bound=bound)

    def with_all_partitions(self) -> StateQueryRequest[R]:
        """Every partition of the store this instance holds a copy of (the default)."""
        return replace(self, _partitions=None)

    def with_partitions(self, partitions: Iterable[int]) -> StateQueryRequest[R]:
        """Only these partitions; one this instance has no copy of answers NOT_PRESENT."""
        return replace(self, _partitions=frozenset(partitions))

    def enable_execution_info(self) -> StateQueryRequest[R]:
        """Results carry how they were computed (`QueryResult.get_execution_info()`)."""
        return replace(self, _execution_info=True)

    def require_active(self) -> StateQueryRequest[R]:
        """Only active copies in running threads answer; any other copy answers NOT_ACTIVE."""
        return replace(self, _require_active=True)

    enable_require_active = require_active

    @property
    def store_name(self) -> str:
        return self._store_name

    @property
    def query(self) -> Query[R]:
        return self._query

    @property
    def position_bound(self) -> PositionBound:
        return self._position_bound

    @property
    def partitions(self) -> frozenset[int]:
        """The requested partitions; ValueError when all are (Kafka's IllegalStateException)."""
        if self._partitions is None:
            raise ValueError("the request is for all partitions (check is_all_partitions() first)")
        return self._partitions

    def is_all_partitions(self) -> bool:
        return self._partitions is None

    def execution_info_enabled(self) -> bool:
        return self._execution_info

    def is_require_active(self) -> bool:
        return self._require_active

    def __repr__(self) -> str:
        partitions: Any = "all" if self._partitions is None else sorted(self._partitions)
        return (
            f"StateQueryRequest({self._store_name!r}, {self._query!r}, partitions={partitions}, "
            f"bound={self._position_bound!r}, require_active={self._require_active})"
        )
