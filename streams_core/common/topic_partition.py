"""TopicPartition: the runtime's own (topic, partition) pair, mapped to aiokafka's at the boundary."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    """One partition of a topic; orders by topic then partition, prints as "topic-0" like Java's."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
