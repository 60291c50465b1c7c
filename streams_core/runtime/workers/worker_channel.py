"""Frames between an instance and its stream-thread worker processes: a 4-byte length, then a pickle.

Both ends are this package's own code on one machine (the channels are socket pairs made by the
instance, never a listening socket), so a frame is a plain pickle of small tuples. The control
channel is read with asyncio on both ends. The query channel (`QueryChannel`) is asynchronous on
the instance's side: requests are pipelined and each is awaited with its own deadline, so a
stalled worker delays only the answers asked of it and never the instance's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import select
import socket
import struct
import time
from collections import deque
from typing import Any

__all__ = ["ChannelClosedError", "ChannelTimeoutError", "QueryChannel", "encode", "read_frame", "write_frame"]

_LENGTH = struct.Struct(">I")
_RECV_BYTES = 256 * 1024
SYNC_OVERDUE_S = 0.25
"""A synchronous call on the loop's thread is refused at once while a request has waited this long:
the worker is slow or stalled, and blocking the loop for it would hold up every other answer."""


class ChannelClosedError(ConnectionError):
    """The other end of a worker channel is gone (its process ended)."""


class ChannelTimeoutError(TimeoutError):
    """The worker did not answer before the request's deadline (stalled, paused or overloaded)."""

    def __init__(self, message: str, unanswered_for: float) -> None:
        super().__init__(message)
        self.unanswered_for = unanswered_for


def encode(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The next message; ChannelClosedError at the end of the stream."""
    try:
        header = await reader.readexactly(_LENGTH.size)
        body = await reader.readexactly(_LENGTH.unpack(header)[0])
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        raise ChannelClosedError("worker channel closed") from exc
    return pickle.loads(body)


def write_frame(writer: asyncio.StreamWriter, message: Any) -> None:
    """Queue one message (the transport sends it; callers that must know it left await `drain`)."""
    writer.write(encode(message))


class _Pending:
    """One request sent and not yet answered: who waits for its reply (nobody once abandoned)."""

    __slots__ = ("future", "reply", "sent", "waiting")

    def __init__(self, future: asyncio.Future[Any] | None, sent: float, waiting: bool = True) -> None:
        self.future = future
        self.sent = sent
        self.waiting = waiting
        """A synchronous caller still waits (`future` None); False once it gave up."""
        self.reply: tuple[Any] | None = None


class QueryChannel:
    """The instance's end of one worker's query channel: requests in order, replies in the same order.

    The worker answers one request at a time, in the order sent, so replies are matched to
    requests by position: a request whose caller gave up (its deadline passed) keeps its place
    and its late reply is dropped unread. The socket is read by the event loop (`add_reader`);
    nothing blocks it. `unanswered_for()` is how long the oldest request has waited: a channel
    that has not answered for longer than a request's whole deadline fails that request at once
    instead of queueing it behind the others (a paused worker is not sent ever more work).
    """

    __slots__ = ("_closed", "_inbox", "_loop", "_outbox", "_pending", "_sock", "answered_at")

    def __init__(self, sock: socket.socket) -> None:
        """Made on the instance's event loop (a worker's start), whose reader then follows the socket."""
        sock.setblocking(False)
        self._sock = sock
        self._pending: deque[_Pending] = deque()
        self._inbox = bytearray()
        self._outbox = bytearray()
        self._closed: ChannelClosedError | None = None
        self.answered_at = time.monotonic()
        """When the worker last answered (or the channel opened)."""
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        if self._loop is not None:
            self._loop.add_reader(sock.fileno(), self._on_readable)

    # -- state ----------------------------------------------------------------------------------

    def unanswered_for(self, now: float | None = None) -> float:
        """Seconds the oldest request still unanswered has waited; 0 when none waits."""
        if not self._pending:
            return 0.0
        return (time.monotonic() if now is None else now) - self._pending[0].sent

    @property
    def in_flight(self) -> int:
        """Requests sent and not answered yet (abandoned ones included: the worker still owes them)."""
        return len(self._pending)

    # -- asking -----------------------------------------------------------------------------------

    async def request(self, message: Any, timeout: float) -> Any:
        """The worker's reply to `message` within `timeout` seconds.

        ChannelTimeoutError when it does not come in time (also at once when the channel has not
        answered for longer than `timeout` already); ChannelClosedError when the worker is gone.
        """
        loop = asyncio.get_running_loop()
        if self._loop is None:  # made outside a loop: this one follows the socket from now on
            self._loop = loop
            loop.add_reader(self._sock.fileno(), self._on_readable)
        self._admit(timeout)
        pending = _Pending(loop.create_future(), time.monotonic())
        assert pending.future is not None
        self._send(pending, encode(message))
        try:
            return await asyncio.wait_for(pending.future, timeout)
        except TimeoutError:
            raise ChannelTimeoutError(
                f"no answer within {timeout:.3g} s", self.unanswered_for()
            ) from None

    def call(self, message: Any, timeout: float) -> Any:
        """`request` for synchronous callers (the read-only views of `KafkaStreams.store()`): waits at most `timeout`.

        From another thread it asks through the instance's loop; on the loop's own thread (a
        synchronous read inside a coroutine) it reads the socket itself until its reply came,
        handing earlier replies to their callers, so it blocks the loop for `timeout` at most,
        and not at all while an earlier request is overdue (`SYNC_OVERDUE_S`: a health probe's
        ping makes a stalled worker overdue).
        """
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is None and self._loop is not None and self._loop.is_running():
            future = asyncio.run_coroutine_threadsafe(self.request(message, timeout), self._loop)
            try:
                return future.result(timeout + 1.0)
            except TimeoutError:
                future.cancel()
                raise ChannelTimeoutError(f"no answer within {timeout:.3g} s", self.unanswered_for()) from None
        self._admit(min(timeout, SYNC_OVERDUE_S))
        pending = _Pending(None, time.monotonic())
        self._send(pending, encode(message))
        deadline = pending.sent + timeout
        try:
            self._flush_blocking(deadline)
            while pending.reply is None:
                self._check_open()
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([self._sock], [], [], remaining)[0]:
                    raise ChannelTimeoutError(f"no answer within {timeout:.3g} s", self.unanswered_for())
                self._on_readable()
        finally:
            pending.waiting = False
        return pending.reply[0]

    def probe(self) -> None:
        """Ask the worker for nothing (a `ping`) when no request waits, without waiting for the reply:
        a worker that stopped answering then shows in `unanswered_for()` (health checks call this)."""
        if self._closed is None and not self._pending:
            self._send(_Pending(None, time.monotonic(), waiting=False), encode(("ping",)))

    def _admit(self, timeout: float) -> None:
        self._check_open()
        waited = self.unanswered_for()
        if waited > timeout:
            raise ChannelTimeoutError(f"the worker has not answered for {waited:.3g} s", waited)

    def _check_open(self) -> None:
        if self._closed is not None:
            raise self._closed

    # -- the socket ---------------------------------------------------------------------------------

    def _send(self, pending: _Pending, frame: bytes) -> None:
        self._pending.append(pending)
        if self._outbox:
            self._outbox += frame
            return
        try:
            sent = self._sock.send(frame)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self._fail(ChannelClosedError(f"worker query channel failed: {exc}"))
            raise self._closed from None  # type: ignore[misc]
        if sent < len(frame):
            self._outbox += frame[sent:]
            if self._loop is not None and not self._loop.is_closed():
                self._loop.add_writer(self._sock.fileno(), self._on_writable)

    def _on_writable(self) -> None:
        try:
            sent = self._sock.send(self._outbox)
        except BlockingIOError:
            return
        except OSError as exc:
            self._fail(ChannelClosedError(f"worker query channel failed: {exc}"))
            return
        del self._outbox[:sent]
        if not self._outbox and self._loop is not None:
            self._loop.remove_writer(self._sock.fileno())

    def _flush_blocking(self, deadline: float) -> None:
        """Send what the outbox holds before `deadline` (a synchronous call on the loop's thread)."""
        while self._outbox:
            self._check_open()
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([], [self._sock], [], remaining)[1]:
                raise ChannelTimeoutError("the worker does not read its requests", self.unanswered_for())
            self._on_writable()

    def _on_readable(self) -> None:
        """Take what the socket holds and hand each complete reply to its caller."""
        while True:
            try:
                data = self._sock.recv(_RECV_BYTES)
            except BlockingIOError:
                break
            except OSError as exc:
                self._fail(ChannelClosedError(f"worker query channel failed: {exc}"))
                return
            if not data:
                self._fail(ChannelClosedError("worker query channel closed"))
                return
            self._inbox += data
            if len(data) < _RECV_BYTES:
                break
        self._take_replies()

    def _take_replies(self) -> None:
        inbox = self._inbox
        start = 0
        while len(inbox) - start >= _LENGTH.size:
            size = _LENGTH.unpack_from(inbox, start)[0]
            end = start + _LENGTH.size + size
            if len(inbox) < end:
                break
            body = memoryview(inbox)[start + _LENGTH.size : end]
            start = end
            if not self._pending:  # a reply nobody asked for: the channel is out of step
                body.release()
                self._fail(ChannelClosedError("worker query channel out of step"))
                return
            pending = self._pending.popleft()
            self.answered_at = time.monotonic()
            future = pending.future
            if future is not None and not future.done():
                future.set_result(pickle.loads(body))
            elif future is None and pending.waiting:
                pending.reply = (pickle.loads(body),)
            body.release()
        del inbox[:start]

    def _fail(self, error: ChannelClosedError) -> None:
        """The channel is gone: every waiting caller gets `error`, and so will every later one."""
        if self._closed is not None:
            return
        self._closed = error
        self._unwatch()
        while self._pending:
            future = self._pending.popleft().future
            if future is not None and not future.done():
                future.set_exception(error)

    def _unwatch(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self._sock.fileno())
                self._loop.remove_writer(self._sock.fileno())

    def close(self) -> None:
        self._fail(ChannelClosedError("worker query channel closed"))
        self._sock.close()
