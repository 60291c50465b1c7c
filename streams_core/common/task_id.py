"""TaskId: a task is one sub-topology over one partition group, written "0_1" as in Kafka Streams."""

from __future__ import annotations

from typing import NamedTuple


class TaskId(NamedTuple):
    """(sub-topology id, partition); orders by sub-topology then partition."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """Parse the "0_1" form used in directory names and user data."""
        subtopology, sep, partition = text.partition("_")
        if not sep or not subtopology.isdigit() or not partition.isdigit():
            raise ValueError(f"not a task id: {text!r} (expected '<subtopology>_<partition>')")
        return cls(int(subtopology), int(partition))
