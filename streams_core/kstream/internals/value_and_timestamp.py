"""ValueAndTimestamp: what KTable and windowed-aggregate stores hold, and its serde.

Kafka Streams keeps the timestamp of the last update next to each value of a table (its
`TimestampedKeyValueStore`), so that a result's timestamp can be the largest of its inputs'.
The bytes are Java's: the timestamp as 8 bytes big-endian, then the value's bytes.
"""

from __future__ import annotations

import struct
from typing import Any, Generic, NamedTuple, TypeVar

from streams_core.errors import DeserializationError
from streams_core.kstream.internals.dsl_serde import BoundSerde, complete
from streams_core.serde import Serdes

__all__ = ["UNKNOWN_TIMESTAMP", "ValueAndTimestamp", "ValueAndTimestampSerde"]

V = TypeVar("V")

_TIMESTAMP = struct.Struct(">q")
_TIMESTAMP_AND_LONG = struct.Struct(">qq")
_new = tuple.__new__

_LONG_BOUND = 2**63

UNKNOWN_TIMESTAMP = -1
"""The timestamp of a value written without one (a plain `put` on a table's store)."""


class ValueAndTimestamp(NamedTuple, Generic[V]):
    """A stored value and the timestamp (ms) of the record that last set it."""

    value: V
    timestamp: int


class ValueAndTimestampSerde(BoundSerde[ValueAndTimestamp[Any]]):
    """8-byte big-endian timestamp followed by the inner serde's bytes; None stays None."""

    name = "ValueAndTimestamp"
    timestamped_values = True
    """Stores of these bytes log the plain value with its timestamp as the changelog record's
    (Java's timestamped stores); a restore puts the record's timestamp back in front."""

    def __init__(self, inner: Any) -> None:
        self._given = inner
        self._set_inner(inner)

    def bind(self, config: Any) -> None:
        self._set_inner(complete(self._given, config, "value"))

    def _set_inner(self, inner: Any) -> None:
        self.inner = inner
        self._long = inner is Serdes.Long()
        exact = getattr(inner, "exact_type", None)
        # a None value does not come back: it is a delete
        self.exact_pair = None if exact is None else (ValueAndTimestamp, exact, int)

    def serialize(self, topic: str | None, data: ValueAndTimestamp[Any] | None) -> bytes | None:
        if data is None:
            return None
        if self._long and type(data[0]) is int and -_LONG_BOUND <= data[0] < _LONG_BOUND:
            # a count's store: both numbers in one pack (the inner serde's checks and errors otherwise)
            return _TIMESTAMP_AND_LONG.pack(data[1], data[0])
        raw: bytes | None = self.inner.serialize(topic, data.value)
        if raw is None:
            return None
        return _TIMESTAMP.pack(data.timestamp) + raw

    def deserialize(self, topic: str | None, data: bytes | None) -> ValueAndTimestamp[Any] | None:
        if data is None:
            return None
        if len(data) < 8:
            raise DeserializationError(f"ValueAndTimestamp serde expects at least 8 bytes, got {len(data)}")
        if self._long and len(data) == 16:
            timestamp, value = _TIMESTAMP_AND_LONG.unpack(data)
            return _new(ValueAndTimestamp, (value, timestamp))
        return _new(ValueAndTimestamp, (self.inner.deserialize(topic, data[8:]), _TIMESTAMP.unpack_from(data)[0]))

    def __repr__(self) -> str:
        return f"ValueAndTimestampSerde({self.inner!r})"

