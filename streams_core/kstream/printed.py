"""Printed: where and how `KStream.print` writes records (Kafka Streams' `Printed`).

    stream.print(Printed.to_sys_out().with_label("clicks"))
    stream.print(Printed.to_file("/tmp/out.txt").with_key_value_mapper(lambda k, v: f"{k}={v}"))

Each record becomes the line `[<label>]: <mapper(key, value)>`; the label defaults to the print
node's name, the mapper to `f"{key}, {value}"`. Meant for debugging, as in Kafka Streams.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from streams_core.errors import TopologyError

__all__ = ["Printed"]


def default_mapper(key: Any, value: Any) -> str:
    """Java's `String.format("%s, %s", key, value)`, with Python's `str` of each."""
    return f"{key}, {value}"


@dataclass(frozen=True, slots=True)
class Printed:
    """A destination (standard output, or a file path), a label, a mapper and the node's name."""

    file: Path | None = None
    label: str | None = None
    mapper: Callable[[Any, Any], object] = default_mapper
    processor_name: str | None = None

    @staticmethod
    def to_sys_out() -> Printed:
        """Print to `sys.stdout` (looked up at each record, so a redirection applies)."""
        return Printed()

    @staticmethod
    def to_file(file_path: str | Path) -> Printed:
        """Print to `file_path`, emptied now (as Java opens it here), appended to by every task.

        Raises TopologyError if the file cannot be written (Java's "Unable to write stream to file").
        """
        path = Path(file_path)
        if not str(file_path):
            raise TopologyError("Printed.to_file: the file path must not be empty")
        try:
            path.write_text("", encoding="utf-8")
        except OSError as exc:
            raise TopologyError(f"Unable to write stream to file at [{path}] {exc}") from exc
        return Printed(file=path)

    def with_label(self, label: str) -> Printed:
        """The label in brackets before each line."""
        return replace(self, label=label)

    def with_key_value_mapper(self, mapper: Callable[[Any, Any], object]) -> Printed:
        """`mapper(key, value)` gives the text after the label."""
        if not callable(mapper):
            raise TypeError(f"with_key_value_mapper takes a callable (key, value) -> str, got {mapper!r}")
        return replace(self, mapper=mapper)

    def with_name(self, processor_name: str) -> Printed:
        """The print node's name (Java's `processorName`)."""
        return replace(self, processor_name=processor_name)
