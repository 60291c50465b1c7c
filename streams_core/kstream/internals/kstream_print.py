"""KStreamPrint: the processor of `KStream.print` (Java's `KStreamPrint` with `PrintForeachAction`).

Writes `[label]: mapper(key, value)` and a newline per record to `sys.stdout` (flushed per
record, as Java flushes System.out) or appends it to the Printed's file. A file is opened by
each task in `init` and closed in `close`; lines are flushed as written, so the tasks of several
worker processes writing one file interleave whole lines.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from streams_core.processor.processor import ProcessorContext, Record

__all__ = ["KStreamPrint"]


class KStreamPrint:
    """Prints each record; forwards nothing (a terminal operator)."""

    __slots__ = ("_file", "_label", "_mapper", "_path")

    def __init__(self, path: Path | None, label: str, mapper: Callable[[Any, Any], object]) -> None:
        self._path = path
        self._label = label
        self._mapper = mapper
        self._file: IO[str] | None = None

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        if self._path is not None:
            self._file = self._path.open("a", encoding="utf-8", buffering=1)

    def process(self, record: Record[Any, Any]) -> None:
        out = self._file if self._file is not None else sys.stdout
        out.write(f"[{self._label}]: {self._mapper(record.key, record.value)}\n")
        out.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
