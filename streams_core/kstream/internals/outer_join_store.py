"""The store of a left or outer stream-stream join's unmatched records, and its serdes.

Left and outer joins emit a record with no partner only once no partner can come any more
(its join window plus grace has passed), so unmatched records wait in a key-value store
shared by both join processors. Its key is (timestamp, is_left, key), serialized as the
timestamp (8 bytes big-endian, so the store iterates oldest first), a side byte and the key's
bytes; its value is the side and the list of that side's values for the key at that time.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from streams_core.errors import DeserializationError
from streams_core.kstream.internals.dsl_serde import BoundSerde, complete

__all__ = ["SideValues", "SideValuesSerde", "TimestampedKeyAndJoinSide", "TimestampedKeyAndJoinSideSerde"]


class TimestampedKeyAndJoinSide(NamedTuple):
    timestamp: int
    is_left: bool
    key: Any


class SideValues(NamedTuple):
    is_left: bool
    values: tuple[Any, ...]


class TimestampedKeyAndJoinSideSerde(BoundSerde[TimestampedKeyAndJoinSide]):
    name = "TimestampedKeyAndJoinSide"

    def __init__(self, key_serde: Any) -> None:
        self._given = key_serde
        self._key_serde = key_serde

    def bind(self, config: Any) -> None:
        self._key_serde = complete(self._given, config, "key")

    def serialize(self, topic: str | None, data: TimestampedKeyAndJoinSide | None) -> bytes | None:
        if data is None:
            return None
        raw = self._key_serde.serialize(topic, data.key) or b""
        return data.timestamp.to_bytes(8, "big", signed=False) + (b"\x01" if data.is_left else b"\x00") + raw

    def deserialize(self, topic: str | None, data: bytes | None) -> TimestampedKeyAndJoinSide | None:
        if data is None:
            return None
        if len(data) < 9:
            raise DeserializationError(f"join key expects at least 9 bytes, got {len(data)}")
        return TimestampedKeyAndJoinSide(
            int.from_bytes(data[:8], "big"), data[8] == 1, self._key_serde.deserialize(topic, data[9:])
        )


class SideValuesSerde(BoundSerde[SideValues]):
    """A side byte, then each value as a 4-byte length and its bytes."""

    name = "SideValues"

    def __init__(self, left_serde: Any, right_serde: Any) -> None:
        self._given = (left_serde, right_serde)
        self._serdes = self._given

    def bind(self, config: Any) -> None:
        self._serdes = (complete(self._given[0], config, "value"), complete(self._given[1], config, "value"))

    def serialize(self, topic: str | None, data: SideValues | None) -> bytes | None:
        if data is None:
            return None
        serde = self._serdes[0] if data.is_left else self._serdes[1]
        parts = [b"\x01" if data.is_left else b"\x00"]
        for value in data.values:
            raw = serde.serialize(topic, value) or b""
            parts.append(len(raw).to_bytes(4, "big"))
            parts.append(raw)
        return b"".join(parts)

    def deserialize(self, topic: str | None, data: bytes | None) -> SideValues | None:
        if data is None:
            return None
        if not data:
            raise DeserializationError("join values: empty data")
        is_left = data[0] == 1
        serde = self._serdes[0] if is_left else self._serdes[1]
        values = []
        position = 1
        while position < len(data):
            size = int.from_bytes(data[position : position + 4], "big")
            position += 4
            values.append(serde.deserialize(topic, data[position : position + size]))
            position += size
        return SideValues(is_left, tuple(values))
