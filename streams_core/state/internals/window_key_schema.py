"""Window store keys in changelog topics: `key | window start (8 bytes) | seqnum (4 bytes)`.

Big-endian, byte-compatible with Kafka Streams' `WindowKeySchema.toStoreKeyBinary`, so window
store changelogs written here and by Java read the same. Restore decodes with these.
"""

from __future__ import annotations

import struct

__all__ = ["SUFFIX_SIZE", "from_store_key_binary", "to_store_key_binary"]

_SUFFIX = struct.Struct(">qi")
SUFFIX_SIZE = _SUFFIX.size


def to_store_key_binary(key: bytes, window_start: int, seqnum: int) -> bytes:
    """The changelog key of one window entry (seqnum is 0 unless duplicates are retained)."""
    return key + _SUFFIX.pack(window_start, seqnum)


def from_store_key_binary(binary: bytes) -> tuple[bytes, int, int]:
    """(key, window start, seqnum) from a changelog key."""
    if len(binary) < SUFFIX_SIZE:
        raise ValueError(f"window store key of {len(binary)} bytes is shorter than its {SUFFIX_SIZE}-byte suffix")
    split = len(binary) - SUFFIX_SIZE
    start, seqnum = _SUFFIX.unpack_from(binary, split)
    return binary[:split], start, seqnum
