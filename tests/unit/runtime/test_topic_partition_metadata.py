"""The committed offset's metadata is Kafka Streams' `TopicPartitionMetadata`: base64 of magic
byte 2 and the partition time (big-endian long); versions 1 and 2 decode, anything else is
UNKNOWN and logged (as Kafka's TopicPartitionMetadataTest)."""

from __future__ import annotations

import base64
import logging
import struct

import pytest

from streams_core.runtime.record_queue import UNKNOWN
from streams_core.runtime.topic_partition_metadata import decode_partition_time, encode_partition_time


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
        assert decode_partition_time(metadata) == UNKNOWN
    assert [r.getMessage() for r in caplog.records if message in r.getMessage()], caplog.text


def test_missing_base64_padding_is_accepted_as_javas_decoder_does() -> None:
    padded = b64(b"\x02" + struct.pack(">q", 100) + processor_metadata(b"k", 7))
    assert padded.endswith("=")
    assert decode_partition_time(padded.rstrip("=")) == 100
