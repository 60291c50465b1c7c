"""QueryResult and FailureReason (IQv2): one partition's answer to a query, a result or a reason it has none.

Failures come back as values, never raised: a caller checks `is_success()` and reads
`get_result()`, or `get_failure_reason()` and `get_failure_message()`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from streams_core.query.position import Position, PositionBound

__all__ = ["FailureReason", "QueryResult"]

R = TypeVar("R")


class FailureReason(enum.Enum):
    """Why a partition has no result (Kafka's names)."""

    UNKNOWN_QUERY_TYPE = "UNKNOWN_QUERY_TYPE"
    """The store does not know this kind of query (a WindowKeyQuery of a key-value store...)."""
    NOT_UP_TO_BOUND = "NOT_UP_TO_BOUND"
    """The copy has not processed up to the query's PositionBound yet: retry later."""
    NOT_ACTIVE = "NOT_ACTIVE"
    """The query requires an active copy in a running thread and this one is not (a standby,
    or restoring, migrating, or the instance is not RUNNING): ask the active host, or retry."""
    DOES_NOT_EXIST = "DOES_NOT_EXIST"
    """The requested partition does not exist: the store has fewer partitions."""
    STORE_EXCEPTION = "STORE_EXCEPTION"
    """The store raised while answering, or its host (a worker process) did not answer by the deadline."""
    NOT_PRESENT = "NOT_PRESENT"
    """No copy of the requested partition is on this instance now (another host has it)."""


@dataclass(frozen=True, slots=True)
class QueryResult(Generic[R]):
    """A partition's result, or the reason it has none; the copy's position and, when asked, execution info."""

    _result: Any = None
    _failure_reason: FailureReason | None = None
    _failure_message: str | None = None
    _position: Position | None = None
    _execution_info: tuple[str, ...] = field(default=())
    _cause: BaseException | None = field(default=None, compare=False, repr=False)
    """What raised, for a failure the instance saw as an exception (not Kafka's: the REST layer tells a
    store's own error, a 500, from a host that did not answer in time, a 503)."""

    @classmethod
    def for_result(cls, result: R) -> QueryResult[R]:
        return cls(result)

    @classmethod
    def for_failure(cls, reason: FailureReason, message: str) -> QueryResult[R]:
        return cls(None, reason, message)

    @classmethod
    def for_unknown_query_type(cls, query: Any, store: Any) -> QueryResult[R]:
        return cls.for_failure(
            FailureReason.UNKNOWN_QUERY_TYPE,
            f"This store ({type(store).__name__}) doesn't know how to execute the given query ({query!r}).",
        )

    @classmethod
    def not_up_to_bound(cls, position: Position | None, bound: PositionBound, partition: int) -> QueryResult[R]:
        """The failure of a copy behind `bound`, carrying the copy's `position` (None: a copy without one, a standby)."""
        return cls(
            None,
            FailureReason.NOT_UP_TO_BOUND,
            f"For store partition {partition}, the current position {position or Position()!r} is not yet up to the bound {bound!r}",
            position,
        )

    def with_position(self, position: Position | None) -> QueryResult[R]:
        return replace(self, _position=position)

    def with_execution_info(self, *info: str) -> QueryResult[R]:
        """This result with `info` appended to its execution info (a new value)."""
        return replace(self, _execution_info=(*self._execution_info, *info))

    def is_success(self) -> bool:
        return self._failure_reason is None

    def is_failure(self) -> bool:
        return self._failure_reason is not None

    def get_result(self) -> R:
        """The result; ValueError for a failed result (Kafka's IllegalArgumentException)."""
        if self._failure_reason is not None:
            raise ValueError(
                f"Cannot get result for failed query. Failure is {self._failure_reason.name}: {self._failure_message}"
            )
        result: R = self._result
        return result

    def get_failure_reason(self) -> FailureReason:
        if self._failure_reason is None:
            raise ValueError("Cannot get failure reason because this query did not fail.")
        return self._failure_reason

    def get_failure_message(self) -> str:
        if self._failure_reason is None:
            raise ValueError("Cannot get failure message because this query did not fail.")
        return self._failure_message or ""

    def get_position(self) -> Position | None:
        """The answering copy's position (None when failed before a copy answered, or a copy without one;
        a NOT_UP_TO_BOUND failure carries the position the copy had reached)."""
        return self._position

    def get_execution_info(self) -> list[str]:
        return list(self._execution_info)

    def throw_if_failure(self) -> None:
        if self._failure_reason is not None:
            raise RuntimeError(f"{self._failure_reason.name}: {self._failure_message}")

    def __repr__(self) -> str:
        if self._failure_reason is not None:
            return f"QueryResult({self._failure_reason.name}: {self._failure_message})"
        return f"QueryResult({self._result!r}, position={self._position!r})"
