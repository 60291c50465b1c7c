"""TestRecord: a record as piped into or read from the TopologyTestDriver's topics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from streams_core.common.headers import Headers

__all__ = ["TestRecord"]

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class TestRecord(Generic[K, V]):
    """Key, value, timestamp (ms; None when piping means "the input topic's current time") and headers."""

    __test__: ClassVar[bool] = False

    key: K
    value: V
    timestamp: int | None = None
    headers: Headers = ()

    @staticmethod
    def of(item: Any) -> TestRecord[Any, Any]:
        """A TestRecord from itself, a (key, value) pair or a (key, value, timestamp) triple."""
        if isinstance(item, TestRecord):
            return item
        if isinstance(item, tuple) and len(item) in (2, 3):
            return TestRecord(*item)
        raise TypeError(f"expected a TestRecord, (key, value) or (key, value, timestamp), got {item!r}")
