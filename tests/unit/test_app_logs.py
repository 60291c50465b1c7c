"""The apps' log formats: JSON lines with the stream thread and task as fields, chosen by flag or env."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from app.logs import JsonFormatter, configure_logging
from tests.integration.rest_cluster import REPO_ROOT


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("streams_core.runtime.tasks.task_manager", logging.INFO, __file__, 1, message, args, None)
    record.__dict__.update(extra)
    return record


def test_json_line_carries_thread_and_task() -> None:
    line = JsonFormatter().format(
        _record("%screated task %s (restored %d records)", "stream-thread [wc-StreamThread-1] ", "0_1", 12, task="0_1")
    )
    entry = json.loads(line)
    assert entry["thread"] == "wc-StreamThread-1"
    assert entry["task"] == "0_1"
    assert entry["message"] == "created task 0_1 (restored 12 records)"
    assert entry["level"] == "INFO" and entry["logger"] == "streams_core.runtime.tasks.task_manager"
    assert entry["ts"].endswith("+00:00")


def test_json_line_without_context_has_no_thread() -> None:
    entry = json.loads(JsonFormatter().format(_record("stream-client [wc] state %s -> %s", "CREATED", "REBALANCING")))
    assert "thread" not in entry and "task" not in entry
    assert entry["message"] == "stream-client [wc] state CREATED -> REBALANCING"


def test_exception_is_one_field() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = JsonFormatter().format(record)
    assert "\n" not in line, "one line per record"
    assert "ValueError: boom" in json.loads(line)["exception"]


@pytest.mark.usefixtures("restored_logging")
@pytest.mark.parametrize(("log_format", "formatter"), [("json", JsonFormatter), ("text", logging.Formatter)])
def test_configure_logging_installs_the_format(log_format: str, formatter: type[logging.Formatter]) -> None:
    root = logging.getLogger()
    configure_logging("debug", log_format)
    assert type(root.handlers[0].formatter) is formatter
    assert root.level == logging.DEBUG
    assert logging.getLogger("py.warnings").handlers == [] and root.handlers, "warnings go through the root's handler"


def test_streams_log_format_env_is_the_flags_default() -> None:
    """`python -m app` takes STREAMS_LOG_FORMAT; an invalid value is refused like the flag's."""
    command = [sys.executable, "-m", "app", "wordcount"]
    env = {"STREAMS_LOG_FORMAT": "xml", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "invalid choice: 'xml'" in result.stderr
