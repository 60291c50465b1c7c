"""StampedRecord: a consumed record after deserialization, stamped with its extracted timestamp."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Header", "Stamped", "StampedRecord"]

Header = tuple[str, bytes]


class Stamped(Protocol):
    """What the record queues need of a record: its extracted timestamp.

    The processor's `Record` satisfies it (the runtime queues those), and so does StampedRecord.
    """

    @property
    def timestamp(self) -> int: ...


@dataclass(slots=True)
class StampedRecord:
    """A record as the task processes it: where it came from, its timestamp, key, value, headers.

    Slotted but not frozen: a frozen dataclass costs about 4x more per construction and one is
    built for every consumed record. Treat instances as immutable all the same. The serialized
    sizes are -1 when unknown.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: Sequence[Header] = ()
    serialized_key_size: int = -1
    serialized_value_size: int = -1
