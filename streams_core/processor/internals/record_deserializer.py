"""RecordDeserializer: the deserialization error policy applied to a consumed record that failed.

The policy is `default.deserialization.exception.handler`: `log_and_fail` (raise the located
`DeserializationError`), `log_and_continue` (log, count and skip the record), `dead_letter`
(write the raw record to `errors.dead.letter.queue.topic.name` through a sender the owner
provides, then skip), or a custom handler: a callable `(error, raw_record) -> bool` or an object
with such a `handle` method, where True means "skip and go on" and False "fail".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from streams_core.common.headers import Headers
from streams_core.errors import ConfigError, DeserializationError

if TYPE_CHECKING:
    from streams_core.clients.ports import RawRecord

__all__ = [
    "DeserializationHandler",
    "RecordDeserializer",
    "dead_letter_headers",
    "log_and_continue",
    "resolve_deserialization_handler",
]

log = logging.getLogger(__name__)


def dead_letter_headers(record: RawRecord) -> Headers:
    """The record's headers plus where it came from and why it is dead (KIP-1034's `__streams.errors.*`)."""
    return (
        *record.headers,
        ("__streams.errors.topic", record.topic.encode()),
        ("__streams.errors.partition", str(record.partition).encode()),
        ("__streams.errors.offset", str(record.offset).encode()),
        ("__streams.errors.exception", b"DeserializationError"),
    )


DeserializationHandler: TypeAlias = "Callable[[DeserializationError, RawRecord], bool]"
"""Decides about a record that failed to deserialize: True skips it, False fails the task."""


def log_and_continue(error: DeserializationError, record: RawRecord) -> bool:
    """The `log_and_continue` policy: log a warning and skip the record."""
    log.warning("Skipping record that failed to deserialize: %s", error)
    return True


def resolve_deserialization_handler(
    setting: Any, dead_letter: Callable[[RawRecord], None] | None = None
) -> DeserializationHandler | None:
    """The handler for a `default.deserialization.exception.handler` value; None means fail.

    `dead_letter` sends a raw record to the dead-letter topic; it is required by `dead_letter`.
    """
    if setting in (None, "log_and_fail"):
        return None
    if setting == "log_and_continue":
        return log_and_continue
    if setting == "dead_letter":
        if dead_letter is None:
            raise ConfigError(
                "default.deserialization.exception.handler", "dead_letter needs a dead-letter topic sender"
            )
        send = dead_letter

        def to_dead_letter(error: DeserializationError, record: RawRecord) -> bool:
            log.warning("Sending record that failed to deserialize to the dead-letter topic: %s", error)
            send(record)
            return True

        return to_dead_letter
    handle = getattr(setting, "handle", None)
    if callable(handle):
        return handle  # type: ignore[no-any-return]
    if callable(setting):
        return setting  # type: ignore[no-any-return]
    raise ConfigError(
        "default.deserialization.exception.handler",
        f"expected log_and_fail, log_and_continue, dead_letter or a handler, got {setting!r}",
    )


class RecordDeserializer:
    """The deserialization policy of one task: a record whose serdes failed is located at
    topic/partition/offset and given to the handler; a skipped record is counted in
    `dropped_records` (the task's `record_reader` calls `skip_or_raise`)."""

    __slots__ = ("dropped_records", "handler")

    def __init__(self, handler: DeserializationHandler | None = None) -> None:
        self.handler = handler
        self.dropped_records = 0

    def skip_or_raise(self, error: DeserializationError, raw: RawRecord) -> None:
        """Apply the handler to a record that failed: count it as skipped, or raise the located error."""
        located = error.at(raw.topic, raw.partition, raw.offset)
        handler = self.handler
        if handler is None or not handler(located, raw):
            raise located from located.__cause__
        self.dropped_records += 1
