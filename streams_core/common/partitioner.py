"""The default partitioner: murmur2 exactly as Java's `Utils.murmur2`, so keys land where any
Kafka producer (Java, aiokafka, librdkafka's murmur2_random) puts them."""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct

__all__ = ["default_partition", "murmur2", "murmur2_py", "to_positive"]

_MASK = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995
_unpackers: dict[int, Callable[[bytes | bytearray | memoryview], tuple[int, ...]]] = {}
"""A compiled little-endian unpacker per number of 4-byte blocks (keys repeat their lengths)."""


def murmur2_py(data: bytes | bytearray | memoryview) -> int:
    """The 32-bit murmur2 hash of `data` as Java computes it: a signed int in [-2**31, 2**31).

    The reference implementation; `murmur2` is the compiled one when it was built.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK
    blocks = length >> 2
    if blocks:
        unpack = _unpackers.get(blocks)
        if unpack is None:
            unpack = _unpackers[blocks] = Struct(f"<{blocks}I").unpack_from
        for k in unpack(data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def _compiled() -> Callable[[bytes | bytearray | memoryview], int] | None:
    """The C murmur2 that `make setup` builds (an optional extension), or None without a compiler."""
    try:
        from streams_core.common._murmur2 import murmur2 as compiled
    except ImportError:
        return None
    return compiled


murmur2 = _compiled() or murmur2_py
"""murmur2 as Java computes it: compiled where it was built, else `murmur2_py`."""


def to_positive(number: int) -> int:
    """Java's `Utils.toPositive`: clear the sign bit of a 32-bit int (not abs)."""
    return number & 0x7FFFFFFF


def default_partition(key_bytes: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a serialized, non-null key."""
    if key_bytes is None:
        raise ValueError("the default partitioner needs a serialized key; got None")
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key_bytes)) % num_partitions
