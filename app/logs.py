"""Log set-up of the runnable apps: plain text for people, one JSON object a line for log stacks.

`--log-format json` (or STREAMS_LOG_FORMAT=json) writes `{"ts", "level", "logger", "message"}`
plus the runtime's context when a line has it: `thread` (the stream thread's log prefix, as
`stream-thread [wordcount-StreamThread-1] `), and any `task`/`partition` passed in `extra=`.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime

__all__ = ["LOG_FORMATS", "JsonFormatter", "configure_logging"]

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_PREFIX = re.compile(r"^stream-thread \[(?P<thread>[^\]]+)\] ")
_CONTEXT = ("task", "partition", "topic", "store")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with the stream thread and task context as fields."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
        }
        prefix = _PREFIX.match(message)
        if prefix:
            entry["thread"] = prefix["thread"]
            message = message[prefix.end():]
        entry["message"] = message
        for name in _CONTEXT:
            if hasattr(record, name):
                entry[name] = getattr(record, name)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str, log_format: str) -> None:
    """Root logging for the apps (stderr), warnings included; the Kafka client and httpx only from
    WARNING. Worker processes apply the same set-up (streams_core/runtime/workers/worker_logging.py)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    logging.captureWarnings(True)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
