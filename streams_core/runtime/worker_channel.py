"""Frames between an instance and its stream-thread worker processes: a 4-byte length, then a pickle.

Both ends are this package's own code on one machine (the channels are socket pairs made by the
instance, never a listening socket), so a frame is a plain pickle of small tuples. The control
channel is read with asyncio on both ends; the query channel is blocking on the instance's side
(`call`), because a read-only store view answers synchronously, and asyncio in the worker.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct
import threading
from typing import Any

__all__ = ["ChannelClosedError", "QueryChannel", "encode", "read_frame", "write_frame"]

_LENGTH = struct.Struct(">I")


class ChannelClosedError(ConnectionError):
    """The other end of a worker channel is gone (its process ended)."""


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


class QueryChannel:
    """The instance's blocking end of one worker's query channel: one request, then its answer.

    Requests come from the instance's event loop and from threads alike, so a lock keeps each
    request and its answer together on the socket.
    """

    __slots__ = ("_lock", "_sock")

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        self._sock = sock
        self._lock = threading.Lock()

    def call(self, request: Any) -> Any:
        """Send `request`, wait for the worker's reply; ChannelClosedError when the worker is gone."""
        frame = encode(request)
        with self._lock:
            try:
                self._sock.sendall(frame)
                header = self._recv(_LENGTH.size)
                body = self._recv(_LENGTH.unpack(header)[0])
            except OSError as exc:
                raise ChannelClosedError(f"worker query channel failed: {exc}") from exc
        return pickle.loads(body)

    def _recv(self, size: int) -> bytes:
        view = bytearray(size)
        got = 0
        while got < size:
            n = self._sock.recv_into(memoryview(view)[got:])
            if n == 0:
                raise ChannelClosedError("worker query channel closed")
            got += n
        return bytes(view)

    def close(self) -> None:
        self._sock.close()
