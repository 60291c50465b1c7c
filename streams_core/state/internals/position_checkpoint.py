"""PositionCheckpoint: a task's `.position` file, the IQv2 position its stores reflect (Kafka's
`StoreQueryUtils.checkpointPosition`/`readPositionFromCheckpoint` of RocksDBStore's `<store>.position`).

Per source topic and partition, the offset of the last record whose processing the task's stores
hold, in the `.checkpoint` format (`OffsetCheckpoint`). The state manager writes it just before
the `.checkpoint` and removes it with the checkpoint and with the stores (a wipe): so a task
reopened from local state answers queries with the position it had, where its stores were, until
it processes a record (docs/iqv2.md). It promises a lower bound only: a restore replays changelog
records without position headers (Kafka's default, consistency vectors off) and leaves it as read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import ProcessorStateError
from streams_core.state.internals.offset_checkpoint import OffsetCheckpoint

__all__ = ["POSITION_FILE_NAME", "PositionCheckpoint"]

log = logging.getLogger(__name__)

POSITION_FILE_NAME = ".position"


class PositionCheckpoint:
    """Reads and writes one task's position file."""

    __slots__ = ("_file",)

    def __init__(self, path: Path) -> None:
        self._file = OffsetCheckpoint(path)

    @property
    def path(self) -> Path:
        return self._file.path

    def read(self) -> dict[TopicPartition, int]:
        """The saved position; empty without a file. A corrupt file is dropped with a warning (Kafka's
        fails the store): an empty position only makes bounded queries wait for the next record."""
        try:
            return {TopicPartition(topic, partition): offset for (topic, partition), offset in self._file.read().items()}
        except ProcessorStateError as exc:
            log.warning("ignoring the saved IQv2 position: %s", exc)
            self._file.delete()
            return {}

    def write(self, position: Mapping[TopicPartition, int]) -> None:
        """Replace the file with `position` atomically (a rename: a killed process leaves the old file or
        the new one); an empty position removes it. Not fsynced: after a power loss the file may be
        old, empty or corrupt (dropped), each a true lower bound, so the commit pays no extra fsync."""
        if position:
            self._file.write({(tp.topic, tp.partition): offset for tp, offset in position.items()}, durable=False)
        else:
            self._file.delete()

    def delete(self) -> None:
        self._file.delete()

    def __repr__(self) -> str:
        return f"PositionCheckpoint({str(self.path)!r})"
