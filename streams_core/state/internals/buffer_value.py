"""BufferValue: the changelog value of a buffered record, in Kafka Streams' layout (its v3 format).

A time-ordered buffer (suppression, a stream-table join's grace period) logs each buffered record
with the context it came with, so that a restored record is forwarded as it would have been:

    record context: timestamp (8), offset (8), topic (4-byte length + UTF-8), partition (4),
                    header count (4), per header: key (4-byte length + UTF-8), value (4-byte
                    length, -1 for null, + bytes)
    prior value:    4-byte length (-1: null) + bytes
    old value:      4-byte length (-1: null, -2: the same as the prior value) + bytes
    new value:      4-byte length (-1: null) + bytes
    buffer time:    8 bytes

all big-endian: Java's `ProcessorRecordContext.serialize`, `BufferValue.serialize` and the
buffer time `InMemoryTimeOrderedKeyValueChangeBuffer` appends (its changelog records carry
the header `v` = 3). `RecordContext.size` is Java's `residentMemorySizeEstimate`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from streams_core.common.headers import Headers
from streams_core.errors import DeserializationError

__all__ = ["CHANGELOG_HEADERS", "BufferValue", "RecordContext", "record_context"]

CHANGELOG_HEADERS: Headers = (("v", b"\x03"),)
"""The header of the suppression buffer's changelog values (Java's `V_3_CHANGELOG_HEADER_VALUE`)."""

_NULL = -1
_SAME_AS_PRIOR = -2
_LONG_LONG = struct.Struct(">qq")
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


class RecordContext(NamedTuple):
    """Where a buffered record came from (Java's `ProcessorRecordContext`)."""

    timestamp: int
    offset: int
    topic: str
    partition: int
    headers: Headers

    @property
    def size(self) -> int:
        """Java's estimate: timestamp, offset, the topic's characters, partition, header keys and values."""
        size = 8 + 8 + len(self.topic) + 4
        for key, value in self.headers:
            size += len(key) + (0 if value is None else len(value))
        return size


record_context: Callable[[tuple[int, int, str, int, Headers]], RecordContext] = partial(tuple.__new__, RecordContext)
"""A RecordContext of a (timestamp, offset, topic, partition, headers) tuple, without NamedTuple's
Python-level `__new__` (the buffers make one per record)."""


def _sized(parts: list[bytes], data: bytes | None) -> None:
    if data is None:
        parts.append(_INT.pack(_NULL))
    else:
        parts.append(_INT.pack(len(data)))
        parts.append(data)


class BufferValue(NamedTuple):
    """A buffered record's context, prior/old/new value bytes and buffer time."""

    context: RecordContext
    prior: bytes | None
    old: bytes | None
    new: bytes | None
    buffer_time: int

    def serialize(self) -> bytes:
        context = self.context
        topic = context.topic.encode()
        parts = [_LONG_LONG.pack(context.timestamp, context.offset), _INT.pack(len(topic)), topic,
                 _INT.pack(context.partition), _INT.pack(len(context.headers))]  # fmt: skip
        for key, value in context.headers:
            _sized(parts, key.encode())
            _sized(parts, value)
        _sized(parts, self.prior)
        if self.old is not None and self.old == self.prior:
            parts.append(_INT.pack(_SAME_AS_PRIOR))
        else:
            _sized(parts, self.old)
        _sized(parts, self.new)
        parts.append(_LONG.pack(self.buffer_time))
        return b"".join(parts)

    @classmethod
    def deserialize(cls, data: bytes) -> BufferValue:
        try:
            return _Reader(data).buffer_value()
        except (struct.error, IndexError, UnicodeDecodeError) as exc:
            raise DeserializationError(f"a buffer changelog value of {len(data)} bytes is malformed: {exc}") from exc


class _Reader:
    __slots__ = ("_data", "_position")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0

    def _int(self) -> int:
        (value,) = _INT.unpack_from(self._data, self._position)
        self._position += 4
        return int(value)

    def _long(self) -> int:
        (value,) = _LONG.unpack_from(self._data, self._position)
        self._position += 8
        return int(value)

    def _bytes(self, size: int) -> bytes | None:
        if size == _NULL:
            return None
        if size < 0 or self._position + size > len(self._data):
            raise IndexError(f"length {size} at {self._position}")
        start = self._position
        self._position += size
        return self._data[start : self._position]

    def buffer_value(self) -> BufferValue:
        timestamp, offset = self._long(), self._long()
        topic = (self._bytes(self._int()) or b"").decode()
        partition = self._int()
        count = self._int()
        headers = []
        for _ in range(max(count, 0)):  # -1: no headers (Java's old layout)
            key = (self._bytes(self._int()) or b"").decode()
            headers.append((key, self._bytes(self._int())))
        prior = self._bytes(self._int())
        old_size = self._int()
        old = prior if old_size == _SAME_AS_PRIOR else self._bytes(old_size)
        new = self._bytes(self._int())
        buffer_time = self._long()
        context = RecordContext(timestamp, offset, topic, partition, tuple(headers))  # type: ignore[arg-type]
        return BufferValue(context, prior, old, new, buffer_time)
