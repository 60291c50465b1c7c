"""The HTTP/1.1 protocol the REST server runs: uvicorn's httptools one, reading targets as h11 did.

httptools (llhttp, in C) costs about a third of h11's CPU per request (bench/query_cost.py), and
every query's CPU is taken from the stream threads on the same cores. Its URL handling differs
from h11's in three ways this class undoes, so that the contract of `RequestTargetGuard` stands:

- a raw `#` in a target (a client sending a key by hand) ends the path for llhttp, which would
  answer for another key; here it is read as `%23`, part of the path as h11 did;
- llhttp refuses a URL over 64 KiB with a plain 400; here a target of any length up to
  `MAX_HEAD_BYTES` reaches the guard, which answers its JSON 414 (the part past
  `MAX_TARGET_BYTES` is not kept, the true length is passed in the scope's extensions);
- llhttp sets no bound on a request's head; here a head over `MAX_HEAD_BYTES` is refused with a
  plain 400 and the connection closed, as h11's `max_incomplete_event_size` did.

On shutdown an idle TLS connection is aborted, not closed: a close waits for the client's
`close_notify`, which an idle client pool (another instance's forwarding) never reads to send,
and so held every stop of an HTTPS server for its whole 5 s timeout.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.utils import is_ssl

from api.middleware import MAX_TARGET_BYTES, TARGET_LENGTH

__all__ = ["MAX_HEAD_BYTES", "StreamsHttpProtocol"]

MAX_HEAD_BYTES = 128 * 1024
"""Longest request line and headers read: up to it an overlong target gets the API's JSON 414,
past it a plain 400."""


class HeadTooLarge(Exception):
    """Raised in a parser callback: uvicorn answers the parser's error with a plain 400 and closes."""


class StreamsHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with h11's reading of `#`, long targets and a bounded head."""

    _head_bytes = 0
    _target_bytes = 0

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._target_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        kept = max(0, MAX_TARGET_BYTES + 1 - self._target_bytes)
        self._target_bytes += len(url)
        if kept:
            super().on_url(url[:kept].replace(b"#", b"%23"))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if self._target_bytes > MAX_TARGET_BYTES:
            extensions: dict[str, Any] = self.scope.setdefault("extensions", {})
            extensions[TARGET_LENGTH] = self._target_bytes

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES:
            raise HeadTooLarge(f"request head over {MAX_HEAD_BYTES} bytes")

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown, but an idle TLS connection is aborted (see the module doc)."""
        if is_ssl(self.transport) and (self.cycle is None or self.cycle.response_complete):
            self.transport.abort()
            return
        super().shutdown()
