"""ProcessorMetadata: a task's small map of named longs that processors keep across restarts.

Kafka Streams' `ProcessorMetadata`: the processor context holds one per task
(`add_processor_metadata_key_value`, `processor_metadata_for_key`); the task commits it with
every input partition's offset, after the partition time (`TopicPartitionMetadata`), and a new
owner of the task reads it back before its processors start. Emit-on-window-close aggregations
keep their last emitted close time in it, under their store's name. The serialized form is
Kafka's: an int count, then per entry an int key length, the UTF-8 key and a long value, all
big-endian; an empty map serializes to no bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

__all__ = ["ProcessorMetadata"]

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


class ProcessorMetadata:
    """Named longs of one task's processors (Kafka's `ProcessorMetadata`)."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[str, int] | None = None) -> None:
        self._entries: dict[str, int] = dict(entries or {})

    def __repr__(self) -> str:
        return f"ProcessorMetadata({self._entries})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProcessorMetadata) and self._entries == other._entries

    __hash__ = None  # type: ignore[assignment]

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, key: str, value: int) -> None:
        self._entries[key] = value

    def get(self, key: str) -> int | None:
        return self._entries.get(key)

    def update(self, other: ProcessorMetadata) -> None:
        """Merge `other` in: a missing key is added, a present one keeps the larger value (Kafka's
        rule when a task reads the metadata committed with each of its partitions)."""
        entries = self._entries
        for key, value in other._entries.items():
            if key not in entries or entries[key] < value:
                entries[key] = value

    def serialize(self) -> bytes:
        """Kafka's bytes: nothing when empty, else the count and each (length, key, value), keys sorted."""
        if not self._entries:
            return b""
        parts = [_INT.pack(len(self._entries))]
        for key in sorted(self._entries):
            encoded = key.encode("utf-8")
            parts += (_INT.pack(len(encoded)), encoded, _LONG.pack(self._entries[key]))
        return b"".join(parts)

    @classmethod
    def deserialize(cls, data: bytes) -> ProcessorMetadata:
        """The metadata `serialize` (Kafka's or ours) wrote; bytes past the last entry are ignored,
        as Kafka's reader does. Raises `struct.error` or `ValueError` on truncated or negative sizes."""
        if not data:
            return cls()
        (count,), offset = _INT.unpack_from(data), _INT.size
        if count < 0:
            raise ValueError(f"negative entry count {count}")
        entries: dict[str, int] = {}
        for _ in range(count):
            (length,) = _INT.unpack_from(data, offset)
            offset += _INT.size
            if length < 0 or offset + length > len(data):
                raise ValueError(f"key length {length} at byte {offset} does not fit in {len(data)} bytes")
            key = data[offset : offset + length].decode("utf-8", errors="replace")
            offset += length
            (entries[key],) = _LONG.unpack_from(data, offset)
            offset += _LONG.size
        return cls(entries)
