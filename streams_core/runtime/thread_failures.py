"""What a KafkaStreams client does when a stream thread or its global thread dies.

Kafka Streams' `StreamsUncaughtExceptionHandler`: the user's handler answers REPLACE_THREAD,
SHUTDOWN_CLIENT (the default, also when the handler itself fails) or SHUTDOWN_APPLICATION (every
member is asked to shut down through the group's assignment). A dead global thread closes the
client whatever the handler says ("Global thread has died"); a shutdown asked by another member
is obeyed without asking the handler.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable

from streams_core.runtime.assignment import ShutdownRequestedError

__all__ = ["StreamThreadExceptionResponse", "ThreadFailures", "UncaughtExceptionHandler"]

log = logging.getLogger("streams_core.runtime.kafka_streams")  # the client's own lines, under its logger as before


class StreamThreadExceptionResponse(enum.Enum):
    """What to do when a stream thread dies of an exception."""

    REPLACE_THREAD = "REPLACE_THREAD"
    SHUTDOWN_CLIENT = "SHUTDOWN_CLIENT"
    SHUTDOWN_APPLICATION = "SHUTDOWN_APPLICATION"


UncaughtExceptionHandler = Callable[[BaseException], StreamThreadExceptionResponse]


class ThreadFailures:
    """The exceptions that killed a client's threads, oldest first, and the handler's response to each."""

    def __init__(self, application_id: str) -> None:
        self.handler: UncaughtExceptionHandler | None = None
        self.errors: list[BaseException] = []
        self._application_id = application_id

    def record(self, error: BaseException) -> None:
        """Keep an error that ends the client without asking the handler (a failed start, too many failed starts)."""
        self.errors.append(error)

    def response(self, thread_name: str, error: BaseException, *, global_thread: bool) -> StreamThreadExceptionResponse:
        """The response to a dead thread's `error` (already `clients.explain`ed: a missing ACL named)."""
        self.errors.append(error)
        response = StreamThreadExceptionResponse.SHUTDOWN_CLIENT
        if isinstance(error, ShutdownRequestedError):
            log.error("stream-client [%s] shutting down: %s", self._application_id, error)
        elif self.handler is not None:
            try:
                response = self.handler(error)
            except Exception:
                log.exception("uncaught exception handler failed; shutting down the client")
        log.error("stream-client [%s] %s died: %r; response %s", self._application_id, thread_name, error, response.name)
        if global_thread and response is StreamThreadExceptionResponse.REPLACE_THREAD:
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT  # a global thread cannot be replaced
        return response
