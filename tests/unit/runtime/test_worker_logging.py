"""Worker processes log as their instance is configured (issue 35, item 5): the app's JSON lines
from every process, and a handler, formatter or level of the instance's found in the worker."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from app.logs import JsonFormatter, configure_logging
from streams_core.runtime.workers.worker_logging import LoggingSetup

from .harness import APP
from .test_worker_start_failures import DyingSupplier, cluster, wait_running_with, workers


@pytest.mark.usefixtures("restored_logging")
async def test_every_line_of_a_two_worker_instance_is_json(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    marks = tmp_path / "marks"
    marks.mkdir()
    streams, _handled = workers(tmp_path, DyingSupplier(cluster(), marks), threads=2)
    try:
        await streams.start()
        await wait_running_with(streams, 2)
    finally:
        await streams.close(timeout=30)
    out, err = capfd.readouterr()
    lines = [line for line in (out + err).splitlines() if line.strip()]
    not_json = [line for line in lines if not line.startswith("{")]
    assert not_json == [], not_json[:5]
    entries = [json.loads(line) for line in lines]
    in_workers = {e["thread"] for e in entries if e["logger"] == "streams_core.runtime.threads.stream_thread"}
    assert in_workers == {f"{APP}-StreamThread-1", f"{APP}-StreamThread-2"}, "the threads log in their workers only"
    assert any(e["logger"] == "streams_core.runtime.kafka_streams" for e in entries), "and the instance logs too"


def test_the_captured_setup_rebuilds_handlers_levels_and_formatters(tmp_path: Path) -> None:
    """What a worker installs: the root's level and stderr handler with its formatter, a file handler
    appending to the same file, the levels of named loggers; a handler bound to this process is left out."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    named = logging.getLogger("test_worker_logging.named")
    stream = logging.StreamHandler()
    stream.setFormatter(JsonFormatter())
    stream.setLevel(logging.INFO)
    to_file = logging.FileHandler(tmp_path / "app.log")
    unshippable = logging.StreamHandler(open(tmp_path / "elsewhere.log", "w"))  # closed below
    try:
        root.handlers[:] = [stream, to_file, unshippable]
        root.setLevel(logging.DEBUG)
        named.setLevel(logging.ERROR)
        setup = LoggingSetup.load(LoggingSetup.capture().ship())
        root.handlers[:] = []
        root.setLevel(logging.WARNING)
        named.setLevel(logging.NOTSET)
        setup.apply()
        kinds = [(type(h).__name__, type(h.formatter).__name__, h.level) for h in root.handlers]
        assert kinds == [("StreamHandler", "JsonFormatter", logging.INFO), ("WatchedFileHandler", "NoneType", 0)]
        assert root.level == logging.DEBUG and named.level == logging.ERROR
        logging.getLogger("test_worker_logging").debug("to the file")
        root.handlers[1].flush()
        assert "to the file" in (tmp_path / "app.log").read_text()
    finally:
        for handler in root.handlers:
            handler.close()
        unshippable.stream.close()
        to_file.close()
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
        named.setLevel(logging.NOTSET)
        logging.captureWarnings(False)
