"""OffsetAndMetadata: an offset to commit with its metadata, as the clients and the tasks pass it."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["OffsetAndMetadata"]


class OffsetAndMetadata(NamedTuple):
    """An offset to commit (the next one to read) with its metadata (Kafka's `OffsetAndMetadata`;
    aiokafka's commit calls take it as the `(offset, metadata)` pair it is)."""

    offset: int
    metadata: str = ""
