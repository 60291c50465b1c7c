"""The committed offset's metadata is Kafka Streams' `TopicPartitionMetadata`: base64 of magic
byte 2, the partition time (big-endian long) and the task's `ProcessorMetadata` (an int count,
then per entry an int key length, the UTF-8 key and a long); versions 1 and 2 decode, anything
else is UNKNOWN and logged (as Kafka's TopicPartitionMetadataTest and ProcessorMetadataTest)."""

from __future__ import annotations

import base64
import logging
import struct

import pytest

from streams_core.processor.internals.processor_metadata import ProcessorMetadata
from streams_core.runtime.tasks.record_queue import UNKNOWN
from streams_core.runtime.tasks.topic_partition_metadata import (
    TopicPartitionMetadata,
    decode_partition_time,
    encode_partition_time,
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_encoding_is_kafkas_version_two_with_empty_processor_metadata() -> None:
    assert encode_partition_time(100) == "AgAAAAAAAABk" == b64(b"\x02" + struct.pack(">q", 100))
    assert encode_partition_time(UNKNOWN) == b64(b"\x02" + b"\xff" * 8)


@pytest.mark.parametrize("partition_time", [0, 100, 1_700_000_000_000, 2**63 - 1, UNKNOWN])
def test_encode_then_decode_gives_the_partition_time(partition_time: int) -> None:
    assert decode_partition_time(encode_partition_time(partition_time)) == partition_time


def test_version_one_decodes() -> None:
    assert decode_partition_time(b64(b"\x01" + struct.pack(">q", 100))) == 100


def processor_metadata(key: bytes, value: int) -> bytes:
    """Kafka's `ProcessorMetadata.serialize()` of one entry."""
    return struct.pack(">i", 1) + struct.pack(">i", len(key)) + key + struct.pack(">q", value)


KAFKA_TWO_ENTRIES = (
    b"\x02" + b"\x00\x00\x00\x00\x00\x00\x00\x64"  # magic byte 2, partition time 100
    + b"\x00\x00\x00\x02"  # two entries
    + b"\x00\x00\x00\x06" + b"counts" + b"\x00\x00\x00\x00\x00\x00\x5d\xc0"  # "counts" -> 24000
    + b"\x00\x00\x00\x08" + b"sessions" + b"\xff\xff\xff\xff\xff\xff\xff\xff"  # "sessions" -> -1
)
"""`TopicPartitionMetadata.encode()` of Kafka, byte by byte, for partition time 100 and two entries."""


def test_encoding_with_processor_metadata_is_kafkas_version_two_layout() -> None:
    metadata = ProcessorMetadata({"sessions": -1, "counts": 24_000})
    assert TopicPartitionMetadata(100, metadata).encode() == b64(KAFKA_TWO_ENTRIES)
    assert encode_partition_time(100, metadata) == b64(KAFKA_TWO_ENTRIES)


def test_kafkas_version_two_with_processor_metadata_decodes() -> None:
    decoded = TopicPartitionMetadata.decode(b64(KAFKA_TWO_ENTRIES))
    assert decoded == (100, ProcessorMetadata({"counts": 24_000, "sessions": -1}))
    assert decoded.processor_metadata.get("counts") == 24_000 and decoded.processor_metadata.get("nope") is None
    one = TopicPartitionMetadata.decode(b64(b"\x02" + struct.pack(">q", 7) + processor_metadata("é".encode(), 2**63 - 1)))
    assert one == (7, ProcessorMetadata({"é": 2**63 - 1})), "UTF-8 keys, the full range of longs"


@pytest.mark.parametrize(
    "metadata",
    [b64(b"\x02" + struct.pack(">q", 100)), b64(b"\x01" + struct.pack(">q", 100)), b64(b"\x01" + struct.pack(">q", 100) + b"xyz")],
)
def test_no_processor_metadata_decodes_to_an_empty_one(metadata: str) -> None:
    """Version 2 with nothing after the time (what an empty map writes); version 1, which has none."""
    assert TopicPartitionMetadata.decode(metadata) == (100, ProcessorMetadata())


@pytest.mark.parametrize(
    "tail",
    [
        b"\x00\x00\x00",  # a truncated count
        struct.pack(">i", 2) + processor_metadata(b"k", 7)[4:],  # two entries announced, one written
        struct.pack(">i", 1) + struct.pack(">i", 99) + b"k",  # a key longer than what follows
        struct.pack(">i", 1) + struct.pack(">i", 1) + b"k" + b"\x00\x00",  # a truncated value
        struct.pack(">i", -1),  # a negative count
        struct.pack(">i", 1) + struct.pack(">i", -3),  # a negative key length
    ],
)
def test_unreadable_processor_metadata_keeps_the_partition_time_and_is_logged(
    tail: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """As Kafka's decode, whose time is read before the processor metadata fails."""
    with caplog.at_level(logging.WARNING):
        assert TopicPartitionMetadata.decode(b64(b"\x02" + struct.pack(">q", 100) + tail)) == (100, ProcessorMetadata())
    assert "Unsupported offset metadata found" in caplog.text


def test_bytes_after_the_last_entry_are_ignored_as_kafkas_reader_does() -> None:
    data = b"\x02" + struct.pack(">q", 100) + processor_metadata(b"k", 7) + b"more"
    assert TopicPartitionMetadata.decode(b64(data)) == (100, ProcessorMetadata({"k": 7}))


def test_version_two_with_processor_metadata_decodes_its_partition_time() -> None:
    """What Kafka writes for a task whose processors keep metadata (emit-on-window-close's)."""
    assert decode_partition_time(b64(b"\x02" + struct.pack(">q", 100) + processor_metadata(b"some_key", 7))) == 100


@pytest.mark.parametrize("metadata", ["", None])
def test_no_metadata_is_unknown_without_a_warning(metadata: str | None, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert decode_partition_time(metadata) == UNKNOWN
    assert not caplog.records


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (b64(b"\x03"), "Unsupported offset metadata version"),
        (b64(b"\x03" + struct.pack(">q", 100)), "Unsupported offset metadata version"),
        ("{}", "Unsupported offset metadata found"),
        ("written by another tool", "Unsupported offset metadata found"),
        (b64(b"\x02\x00\x01"), "Unsupported offset metadata found"),
        ("é", "Unsupported offset metadata found"),
    ],
)
def test_unreadable_metadata_is_unknown_and_logged(metadata: str, message: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert TopicPartitionMetadata.decode(metadata) == (UNKNOWN, ProcessorMetadata())
    assert [r.getMessage() for r in caplog.records if message in r.getMessage()], caplog.text


def test_missing_base64_padding_is_accepted_as_javas_decoder_does() -> None:
    padded = b64(b"\x02" + struct.pack(">q", 100) + processor_metadata(b"k", 7))
    assert padded.endswith("=")
    assert decode_partition_time(padded.rstrip("=")) == 100
