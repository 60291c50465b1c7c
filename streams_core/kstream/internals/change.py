"""Change: the value a KTable processor forwards, the new value and the one it replaces.

Table processors always carry old values (Kafka Streams computes them only when a downstream
operator asks): filters use them to drop updates invisible before and after, groupings to
subtract what a key contributed before.
"""

from __future__ import annotations

from typing import Any, TypeVar

from streams_core.common.change import Change
from streams_core.errors import DeserializationError
from streams_core.kstream.internals.dsl_serde import BoundSerde, complete

__all__ = ["ChangeSerde"]

V = TypeVar("V")


class ChangeSerde(BoundSerde[Change[Any]]):
    """Writes a Change to a repartition topic: flags, then new and old value bytes.

    Layout: one flag byte (1: has new, 2: has old); when both are present a 4-byte big-endian
    length of the new value follows; then the new value's bytes, then the old value's.
    """

    name = "Change"

    def __init__(self, inner: Any) -> None:
        self._given = inner
        self._inner = inner

    def bind(self, config: Any) -> None:
        self._inner = complete(self._given, config, "value")

    def serialize(self, topic: str | None, data: Change[Any] | None) -> bytes | None:
        if data is None:
            return None
        inner = self._inner
        new: bytes | None = inner.serialize(topic, data.new_value)
        old: bytes | None = inner.serialize(topic, data.old_value)
        if new is not None and old is not None:
            return b"\x03" + len(new).to_bytes(4, "big") + new + old
        if new is not None:
            return b"\x01" + new
        if old is not None:
            return b"\x02" + old
        return b"\x00"

    def deserialize(self, topic: str | None, data: bytes | None) -> Change[Any] | None:
        if data is None:
            return None
        if not data:
            raise DeserializationError("Change serde: empty data")
        inner = self._inner
        flags = data[0]
        if flags == 3:
            size = int.from_bytes(data[1:5], "big")
            return Change(inner.deserialize(topic, data[5 : 5 + size]), inner.deserialize(topic, data[5 + size :]))
        if flags == 1:
            return Change(inner.deserialize(topic, data[1:]), None)
        if flags == 2:
            return Change(None, inner.deserialize(topic, data[1:]))
        if flags == 0:
            return Change(None, None)
        raise DeserializationError(f"Change serde: unknown flags {flags}")

    def __repr__(self) -> str:
        return f"ChangeSerde({self._inner!r})"
