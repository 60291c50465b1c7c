"""ConsumerRecord: a consumed record after deserialization, before it becomes a processor Record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from streams_core.common.headers import Headers

__all__ = ["ConsumerRecord"]


@dataclass(slots=True)
class ConsumerRecord:
    """Where a record came from, its own timestamp, and its deserialized key and value.

    A `TimestampExtractor` reads it to choose the record's timestamp. One is built per consumed
    record, so it is slotted but not frozen (a frozen dataclass costs several times more to
    build); treat it as read-only.
    """

    __test__: ClassVar[bool] = False

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: Headers = ()
