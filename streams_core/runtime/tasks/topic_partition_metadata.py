"""What a task commits for each input partition: the offset, and as metadata its time and the task's processor metadata.

Kafka Streams' `TopicPartitionMetadata`: base64 of a magic byte (2, the latest version), the
partition time as a big-endian 64-bit integer, then the task's `ProcessorMetadata` serialized
(no bytes when it is empty). A new owner of the partition reads it back so that partition and
stream time, and what processors keep there (emit-on-window-close's last close time), continue
after a restart or a rebalance. Decoding reads versions 1 (time only) and 2; empty metadata is
`UNKNOWN` with no processor metadata, and so is an unknown version or unreadable text, which is
logged, never fatal (an offset committed by another tool must not stop the task). As in Kafka,
unreadable processor metadata after a readable time keeps the time.
"""

from __future__ import annotations

import base64
import binascii
import logging
import struct
from typing import NamedTuple

from streams_core.processor.internals.processor_metadata import ProcessorMetadata
from streams_core.runtime.tasks.record_queue import UNKNOWN

__all__ = [
    "LATEST_MAGIC_BYTE",
    "TopicPartitionMetadata",
    "decode_partition_time",
    "encode_partition_time",
    "encode_serialized",
]

log = logging.getLogger(__name__)

LATEST_MAGIC_BYTE = 2
"""Version of the encoding written (Kafka's `TopicPartitionMetadata.LATEST_MAGIC_BYTE`)."""

_TIME = struct.Struct(">q")
_HEADER = 1 + _TIME.size


class TopicPartitionMetadata(NamedTuple):
    """A committed offset's metadata, decoded: the partition time and the task's processor metadata."""

    partition_time: int
    processor_metadata: ProcessorMetadata

    def encode(self) -> str:
        """The base64 text committed with the offset (Kafka's version 2)."""
        return encode_serialized(self.partition_time, self.processor_metadata.serialize())

    @classmethod
    def decode(cls, metadata: str | None) -> TopicPartitionMetadata:
        """What `encode` (ours or Kafka's) wrote; UNKNOWN and nothing when unreadable (logged)."""
        if not metadata:
            return cls(UNKNOWN, ProcessorMetadata())
        try:
            data = base64.b64decode(metadata + "=" * (-len(metadata) % 4), validate=True)
            version = data[0]
            if version not in (1, LATEST_MAGIC_BYTE):
                log.warning(
                    "Unsupported offset metadata version found. Supported version <= %d. Found version %d.",
                    LATEST_MAGIC_BYTE, version,
                )  # fmt: skip
                return cls(UNKNOWN, ProcessorMetadata())
            partition_time: int = _TIME.unpack_from(data, 1)[0]
        except (binascii.Error, ValueError, IndexError, struct.error):
            log.warning("Unsupported offset metadata found: %r", metadata)
            return cls(UNKNOWN, ProcessorMetadata())
        if version == 1 or len(data) == _HEADER:
            return cls(partition_time, ProcessorMetadata())
        try:
            return cls(partition_time, ProcessorMetadata.deserialize(data[_HEADER:]))
        except (ValueError, struct.error) as exc:
            log.warning("Unsupported offset metadata found: %r (processor metadata: %s)", metadata, exc)
            return cls(partition_time, ProcessorMetadata())


def encode_serialized(partition_time: int, processor_metadata: bytes) -> str:
    """`TopicPartitionMetadata.encode` with the processor metadata already serialized (a commit
    serializes the task's once for all its partitions)."""
    header = bytes((LATEST_MAGIC_BYTE,)) + _TIME.pack(partition_time)
    return base64.b64encode(header + processor_metadata).decode("ascii")


def encode_partition_time(partition_time: int, processor_metadata: ProcessorMetadata | None = None) -> str:
    """The committed offset's metadata for a partition whose time is `partition_time`."""
    return TopicPartitionMetadata(partition_time, processor_metadata or ProcessorMetadata()).encode()


def decode_partition_time(metadata: str | None) -> int:
    """The partition time in a committed offset's metadata; `UNKNOWN` when it holds none we can read."""
    return TopicPartitionMetadata.decode(metadata).partition_time
