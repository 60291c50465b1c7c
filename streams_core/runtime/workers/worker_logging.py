"""The instance's logging configuration, as its worker processes apply it (`stream.threads.mode=process`).

A worker is a new interpreter: left alone it logs with its own defaults, so an instance set up for
JSON lines would get plain text from its workers. `LoggingSetup.capture()` takes, when a worker is
made, the root logger and every named logger configured apart from it (level, propagation,
handlers with their formatters, levels and filters); the worker `apply()`s it before it loads the
application, so each of its lines is formatted as the instance formats its own. Handlers are
rebuilt in the worker where they cannot travel: a stream handler on stderr or stdout writes to the
worker's own (inherited from the instance), a file handler appends to the same file. Any other
handler goes by value when it can (cloudpickle), else is left out (a test's capture handler). A
formatter or filter that cannot travel is left out too, with a warning in the worker's log.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from streams_core.processor.internals import topology_shipping

__all__ = ["LoggingSetup"]

log = logging.getLogger(__name__)

_STREAMS = {"stderr": lambda: sys.stderr, "stdout": lambda: sys.stdout}


def _travels(obj: Any) -> bool:
    """Whether `obj` can be shipped to a worker (by reference or by value)."""
    try:
        topology_shipping.ship(obj)
    except Exception:
        return False
    return True


def _stream_name(stream: TextIO | None) -> str | None:
    """"stderr" or "stdout" for this process's standard streams (a wrapper included), else None."""
    for name, current in (("stderr", (sys.stderr, sys.__stderr__)), ("stdout", (sys.stdout, sys.__stdout__))):
        if stream is not None and any(stream is s for s in current):
            return name
        try:
            if stream is not None and stream.fileno() == (2 if name == "stderr" else 1):
                return name
        except (AttributeError, OSError, ValueError):
            continue
    return None


@dataclass(frozen=True, slots=True)
class HandlerSetup:
    """One handler as a worker rebuilds it: where it writes (`target`), its level, formatter, filters."""

    target: str
    """"stderr", "stdout", "file" (`path`) or "shipped" (`handler`, sent by value)."""
    level: int
    formatter: logging.Formatter | None
    filters: tuple[Any, ...]
    path: str | None = None
    encoding: str | None = None
    handler: logging.Handler | None = None
    dropped: tuple[str, ...] = ()
    """What could not be shipped (a formatter, filters): the worker says so in its log."""

    @staticmethod
    def of(handler: logging.Handler) -> HandlerSetup | None:
        """The handler's setup, or None when a worker cannot write where it writes."""
        formatter = handler.formatter if handler.formatter is None or _travels(handler.formatter) else None
        filters = tuple(f for f in handler.filters if _travels(f))
        dropped = (("formatter",) if formatter is not handler.formatter else ()) + (
            ("filters",) if len(filters) != len(handler.filters) else ()
        )
        path = encoding = shipped = None
        if isinstance(handler, logging.FileHandler):
            target: str | None = "file"
            path, encoding = handler.baseFilename, handler.encoding
        elif type(handler) is logging.StreamHandler:
            target = _stream_name(handler.stream)
        elif _travels(handler):
            target, shipped = "shipped", handler
        else:
            target = None
        if target is None:
            return None
        return HandlerSetup(target, handler.level, formatter, filters, path, encoding, shipped, dropped)

    def build(self) -> logging.Handler:
        """The handler in this (the worker's) process."""
        handler: logging.Handler
        if self.target == "file":
            assert self.path is not None  # several processes append to it: reopened if the instance rotates it
            handler = logging.handlers.WatchedFileHandler(self.path, mode="a", encoding=self.encoding)
        elif self.target == "shipped":
            assert self.handler is not None
            handler = self.handler
        else:
            handler = logging.StreamHandler(_STREAMS[self.target]())
        handler.setLevel(self.level)
        handler.setFormatter(self.formatter)
        handler.filters = list(self.filters)
        return handler


@dataclass(frozen=True, slots=True)
class LoggerSetup:
    """One logger configured apart: its name ("" for the root), level, propagation and handlers."""

    name: str
    level: int
    propagate: bool
    disabled: bool
    handlers: tuple[HandlerSetup, ...]
    filters: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class LoggingSetup:
    """The logging configuration of the instance's process, to apply in a worker."""

    loggers: tuple[LoggerSetup, ...]

    @staticmethod
    def capture() -> LoggingSetup:
        """This process's configuration now: the root logger and the named loggers set up apart from it."""
        named = [
            logger
            for logger in list(logging.Logger.manager.loggerDict.values())  # a snapshot: other threads add loggers
            if isinstance(logger, logging.Logger)
            and (logger.level != logging.NOTSET or logger.handlers or not logger.propagate or logger.disabled)
        ]
        loggers = []
        for logger in (logging.getLogger(), *named):
            handlers = tuple(setup for h in logger.handlers if (setup := HandlerSetup.of(h)) is not None)
            name = "" if logger is logging.getLogger() else logger.name
            filters = tuple(f for f in logger.filters if _travels(f))
            loggers.append(LoggerSetup(name, logger.level, logger.propagate, logger.disabled, handlers, filters))
        return LoggingSetup(tuple(loggers))

    def ship(self) -> bytes:
        """As bytes the worker loads once it has the instance's `sys.path` (formatters may be user classes)."""
        return topology_shipping.ship(self)

    def apply(self) -> None:
        """Configure this (the worker's) process as captured (a root without handlers logs as Python's
        last resort does, as the instance's). Warnings go through logging, formatted like every line."""
        dropped: list[str] = []
        for setup in self.loggers:
            logger = logging.getLogger(setup.name or None)
            for old in list(logger.handlers):
                logger.removeHandler(old)
            logger.setLevel(setup.level)
            logger.propagate, logger.disabled = setup.propagate, setup.disabled
            logger.filters = list(setup.filters)
            for handler in setup.handlers:
                logger.addHandler(handler.build())
                dropped += [f"{what} of a handler of logger {setup.name or 'root'!r}" for what in handler.dropped]
        logging.captureWarnings(True)
        for what in dropped:
            log.warning("the %s could not be shipped to this worker process; left out", what)

    @staticmethod
    def load(payload: bytes) -> LoggingSetup:
        setup: LoggingSetup = topology_shipping.load(payload)
        return setup
