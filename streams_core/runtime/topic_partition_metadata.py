"""What a task commits for each input partition: the offset, and the partition's time as metadata.

Kafka Streams' `TopicPartitionMetadata`: base64 of a magic byte (2, the latest version), then
the partition time as a big-endian 64-bit integer, then the processor metadata (nothing here:
ours has none, and Kafka writes nothing for an empty one). A new owner of the partition reads it
back so that partition and stream time continue after a restart or a rebalance. Decoding reads
versions 1 and 2; empty metadata is `UNKNOWN`, and so is an unknown version or unreadable text,
which is logged, never fatal (an offset committed by another tool must not stop the task).
"""

from __future__ import annotations

import base64
import binascii
import logging
import struct
from typing import NamedTuple

from streams_core.runtime.record_queue import UNKNOWN

__all__ = ["LATEST_MAGIC_BYTE", "OffsetAndMetadata", "decode_partition_time", "encode_partition_time"]

log = logging.getLogger(__name__)

LATEST_MAGIC_BYTE = 2
"""Version of the encoding written (Kafka's `TopicPartitionMetadata.LATEST_MAGIC_BYTE`)."""

_TIME = struct.Struct(">q")


class OffsetAndMetadata(NamedTuple):
    """An offset to commit (the next one to read) with its metadata (Kafka's `OffsetAndMetadata`;
    aiokafka's commit calls take it as the `(offset, metadata)` pair it is)."""

    offset: int
    metadata: str = ""


def encode_partition_time(partition_time: int) -> str:
    """The committed offset's metadata for a partition whose time is `partition_time`."""
    return base64.b64encode(bytes((LATEST_MAGIC_BYTE,)) + _TIME.pack(partition_time)).decode("ascii")


def decode_partition_time(metadata: str | None) -> int:
    """The partition time in a committed offset's metadata; `UNKNOWN` when it holds none we can read."""
    if not metadata:
        return UNKNOWN
    try:
        data = base64.b64decode(metadata + "=" * (-len(metadata) % 4), validate=True)
        version = data[0]
        if version not in (1, LATEST_MAGIC_BYTE):
            log.warning(
                "Unsupported offset metadata version found. Supported version <= %d. Found version %d.",
                LATEST_MAGIC_BYTE, version,
            )  # fmt: skip
            return UNKNOWN
        partition_time: int = _TIME.unpack_from(data, 1)[0]
    except (binascii.Error, ValueError, IndexError, struct.error):
        log.warning("Unsupported offset metadata found: %r", metadata)
        return UNKNOWN
    return partition_time
