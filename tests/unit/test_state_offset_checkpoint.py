"""OffsetCheckpoint: Kafka Streams' text format, atomic replacement, corrupt files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streams_core.errors import ProcessorStateError
from streams_core.state.internals.offset_checkpoint import OffsetCheckpoint


def test_round_trip_in_kafka_streams_format(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpoint(tmp_path / ".checkpoint")
    offsets = {("app-counts-changelog", 0): 1234, ("app-sums-changelog", 3): 0}
    checkpoint.write(offsets)
    assert (tmp_path / ".checkpoint").read_text() == "0\n2\napp-counts-changelog 0 1234\napp-sums-changelog 3 0\n"
    assert checkpoint.read() == offsets
    assert not (tmp_path / ".checkpoint.tmp").exists()


def test_missing_file_reads_empty_and_delete_is_idempotent(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpoint(tmp_path / ".checkpoint")
    assert checkpoint.read() == {}
    checkpoint.write({("t", 0): 1})
    checkpoint.delete()
    checkpoint.delete()
    assert checkpoint.read() == {}


def test_empty_offsets_leave_the_file_alone(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpoint(tmp_path / ".checkpoint")
    checkpoint.write({("t", 0): 1})
    checkpoint.write({})
    assert checkpoint.read() == {("t", 0): 1}


def test_reads_java_written_files_with_any_whitespace(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    path.write_text("0\n1\nt  2\t99\n")
    assert OffsetCheckpoint(path).read() == {("t", 2): 99}


def test_write_replaces_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint = OffsetCheckpoint(tmp_path / ".checkpoint")
    checkpoint.write({("t", 0): 1})

    def crash(src: object, dst: object) -> None:
        raise OSError("crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="crash"):
        checkpoint.write({("t", 0): 2, ("t", 1): 5})
    assert checkpoint.read() == {("t", 0): 1}
    monkeypatch.undo()
    checkpoint.write({("t", 0): 2})
    assert checkpoint.read() == {("t", 0): 2}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "ended before"),
        ("1\n0\n", "unknown checkpoint version 1"),
        ("0\nx\n", "not an integer"),
        ("0\n2\nt 0 1\n", "expected 2 entries, found 1"),
        ("0\n1\nt 0\n", "line 3 is not 'topic partition offset'"),
        ("0\n1\nt zero 1\n", "line 3: 'zero' is not an integer"),
    ],
)
def test_corrupt_files_are_processor_state_errors(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / ".checkpoint"
    path.write_text(text)
    with pytest.raises(ProcessorStateError, match=reason):
        OffsetCheckpoint(path).read()


def test_invalid_offsets_are_refused(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpoint(tmp_path / ".checkpoint")
    with pytest.raises(ValueError, match="offsets are ints >= 0"):
        checkpoint.write({("t", 0): -1})
    with pytest.raises(ValueError, match="whitespace"):
        checkpoint.write({("a topic", 0): 1})
    assert not checkpoint.path.exists()


def test_bytes_that_are_not_text_are_a_processor_state_error(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    path.write_bytes(b"\x00\xff\xfe garbage")
    with pytest.raises(ProcessorStateError, match="not text"):
        OffsetCheckpoint(path).read()


def test_entries_with_negative_offsets_are_left_out_as_in_java(tmp_path: Path) -> None:
    path = tmp_path / ".checkpoint"
    path.write_text("0\n2\nt 0 -4\nt 1 7\n")
    assert OffsetCheckpoint(path).read() == {("t", 1): 7}
