"""Session store keys in changelog topics: `key | session end (8 bytes) | session start (8 bytes)`.

Big-endian, byte-compatible with Kafka Streams' `SessionKeySchema.toBinary` (end before start).
"""

from __future__ import annotations

import struct

__all__ = ["SUFFIX_SIZE", "from_binary", "to_binary"]

_SUFFIX = struct.Struct(">qq")
SUFFIX_SIZE = _SUFFIX.size


def to_binary(key: bytes, session_start: int, session_end: int) -> bytes:
    """The changelog key of one session."""
    return key + _SUFFIX.pack(session_end, session_start)


def from_binary(binary: bytes) -> tuple[bytes, int, int]:
    """(key, session start, session end) from a changelog key."""
    if len(binary) < SUFFIX_SIZE:
        raise ValueError(f"session key of {len(binary)} bytes is shorter than its {SUFFIX_SIZE}-byte suffix")
    split = len(binary) - SUFFIX_SIZE
    end, start = _SUFFIX.unpack_from(binary, split)
    return binary[:split], start, end
