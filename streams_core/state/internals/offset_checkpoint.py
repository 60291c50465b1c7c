"""OffsetCheckpoint: a task's `.checkpoint` file, the changelog offsets its stores hold data up to.

Kafka Streams' text format:

    0                      format version
    2                      number of entries
    app-counts-changelog 0 1234
    app-sums-changelog 0 99        (topic partition offset, one a line)

Writes go to `<file>.tmp`, are fsynced and renamed over the file (then the directory is fsynced),
so a reader sees the old file or the new one, never a torn one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from streams_core.errors import ProcessorStateError

__all__ = ["CHECKPOINT_FILE_NAME", "OffsetCheckpoint"]

log = logging.getLogger(__name__)

CHECKPOINT_FILE_NAME = ".checkpoint"
_VERSION = 0

TopicPartitionKey = tuple[str, int]


class OffsetCheckpoint:
    """Reads and writes one checkpoint file; keys are (topic, partition) tuples."""

    def __init__(self, path: Path) -> None:
        self._path = Path(path)

    @property
    def path(self) -> Path:
        return self._path

    def write(self, offsets: Mapping[TopicPartitionKey, int], *, durable: bool = True) -> None:
        """Replace the file with `offsets` atomically; an empty mapping writes nothing (as Java).
        `durable=False` skips the fsyncs: still atomic for a killed process, not for a power loss."""
        if not offsets:
            return
        lines = [str(_VERSION), str(len(offsets))]
        for (topic, partition), offset in offsets.items():
            if not topic or any(c.isspace() for c in topic):
                raise ValueError(f"cannot checkpoint topic {topic!r}: topic names have no whitespace")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ValueError(f"cannot checkpoint offset {offset!r} of {topic}-{partition}: offsets are ints >= 0")
            lines.append(f"{topic} {int(partition)} {offset}")
        data = ("\n".join(lines) + "\n").encode("utf-8")
        temp = self._path.with_name(self._path.name + ".tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, self._path)
        if durable:
            _fsync_directory(self._path.parent)

    def read(self) -> dict[TopicPartitionKey, int]:
        """The offsets in the file; {} if there is no file. ProcessorStateError if it is corrupt."""
        try:
            text = self._path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except UnicodeDecodeError as exc:
            raise self._corrupt(f"not text: {exc}") from None
        lines = text.splitlines()
        if len(lines) < 2:
            raise self._corrupt("the file ended before the version and count lines")
        version = self._int(lines[0], 1)
        if version != _VERSION:
            raise self._corrupt(f"unknown checkpoint version {version}")
        expected = self._int(lines[1], 2)
        offsets: dict[TopicPartitionKey, int] = {}
        for number, line in enumerate(lines[2:], start=3):
            pieces = line.split()
            if len(pieces) != 3:
                raise self._corrupt(f"line {number} is not 'topic partition offset': {line!r}")
            topic, partition, offset = pieces[0], self._int(pieces[1], number), self._int(pieces[2], number)
            if offset < 0:
                # As Java: an entry with an invalid offset is left out (its store restores from
                # the beginning of its changelog), not a corrupt file.
                log.warning("ignoring offset %d of %s-%d in checkpoint file %s", offset, topic, partition, self._path)
                expected -= 1
                continue
            offsets[(topic, partition)] = offset
        if len(offsets) != expected:
            raise self._corrupt(f"expected {expected} entries, found {len(offsets)}")
        return offsets

    def delete(self) -> None:
        """Remove the file if it exists (a task without a checkpoint restores from the start)."""
        self._path.unlink(missing_ok=True)

    def _int(self, text: str, line: int) -> int:
        try:
            return int(text)
        except ValueError:
            raise self._corrupt(f"line {line}: {text!r} is not an integer") from None

    def _corrupt(self, reason: str) -> ProcessorStateError:
        return ProcessorStateError(f"corrupt offset checkpoint file {self._path}: {reason}")

    def __repr__(self) -> str:
        return f"OffsetCheckpoint({str(self._path)!r})"


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
