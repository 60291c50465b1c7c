"""The query path's deadlines over a worker's query channel, with a fake worker on the other end.

The fake worker (a thread on the far end of a socket pair) answers each request in order, as a
worker process does, and can be stalled (a SIGSTOP, a long GC pause) and resumed: a request
then fails by its deadline without blocking the event loop, a stalled channel refuses further
requests at once, late replies are never handed to a later request, and a worker that answers
is not held up by one that does not.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from streams_core.errors import InvalidStateStoreError
from streams_core.runtime.queries.state_store_providers import QueryableStoreProvider
from streams_core.runtime.queries.store_host import Deadline, StoreQuery, StoreQueryTimeoutError, StoreRead
from streams_core.runtime.workers.remote_store_provider import RemoteStoreProvider, ask
from streams_core.runtime.workers.worker_channel import ChannelClosedError, ChannelTimeoutError
from streams_core.runtime.workers.worker_channel import QueryChannel as Channel
from streams_core.serde import Serdes
from streams_core.state import QueryableStoreTypes

_LENGTH = struct.Struct(">I")
KV = QueryableStoreTypes.key_value_store()


class FakeWorker:
    """The worker's end of a query channel: answers `(True, ("answer", request), False)` in order,
    or as a store would for a `read`; `stall()` stops answering until `resume()`."""

    def __init__(self, sock: socket.socket, values: Mapping[Any, Any] | None = None) -> None:
        self._sock = sock
        self._values = dict(values or {})
        self._running = threading.Event()
        self._running.set()
        self.requests: list[Any] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def stall(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def _recv(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self._sock.recv(size - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def _serve(self) -> None:
        try:
            while True:
                request = pickle.loads(self._recv(_LENGTH.unpack(self._recv(_LENGTH.size))[0]))
                self._running.wait()
                self.requests.append(request)
                body = pickle.dumps(self._reply(request))
                self._sock.sendall(_LENGTH.pack(len(body)) + body)
        except (EOFError, OSError):
            return

    def _reply(self, request: Any) -> tuple[bool, Any, bool]:
        if request[0] == "read" and request[6] == "get":
            return True, self._values.get(request[7][0]), False
        if request[0] == "read+position" and request[6] == "get":
            return True, (self._values.get(request[7][0]), False, {"in-0": request[3]}), False
        return True, ("answer", request), False

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
async def pair() -> AsyncIterator[tuple[socket.socket, socket.socket]]:
    """Our end and the worker's; a channel on ours is closed first (it leaves the loop's selector)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield ours, theirs
    _close_channels()
    ours.close()
    theirs.close()


_CHANNELS: list[Channel] = []
"""Channels made by a test (through `QueryChannel` below), closed before their sockets."""


def _close_channels() -> None:
    """Close the channels made before their sockets: a socket closed first would stay in the loop's selector."""
    for channel in _CHANNELS:
        channel.close()
    _CHANNELS.clear()


def QueryChannel(sock: socket.socket) -> Channel:
    channel = Channel(sock)
    _CHANNELS.append(channel)
    return channel


async def test_requests_are_pipelined_and_answered_in_order(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    FakeWorker(theirs)
    channel = QueryChannel(ours)
    answers = await asyncio.gather(*(channel.request(("q", i), 5.0) for i in range(50)))
    assert answers == [(True, ("answer", ("q", i)), False) for i in range(50)]
    assert channel.in_flight == 0 and channel.unanswered_for() == 0.0


async def test_a_stalled_worker_fails_requests_by_their_deadline_and_late_replies_are_dropped(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    worker = FakeWorker(theirs)
    channel = QueryChannel(ours)
    worker.stall()
    ticks = 0

    async def ticking() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(ticking())
    began = time.monotonic()
    with pytest.raises(ChannelTimeoutError):
        await channel.request(("first",), 0.3)
    took = time.monotonic() - began
    assert 0.3 <= took < 1.0, took
    assert ticks >= 10, "the loop went on while the request waited"
    assert channel.unanswered_for() >= 0.3
    began = time.monotonic()
    with pytest.raises(ChannelTimeoutError):
        await channel.request(("second",), 0.2)  # not answered for longer than this deadline: refused at once
    assert time.monotonic() - began < 0.1
    assert channel.in_flight == 1, "the refused request was not sent"
    worker.resume()
    answer = await channel.request(("third",), 5.0)
    assert answer == (True, ("answer", ("third",)), False), "the late reply to 'first' went to nobody"
    assert worker.requests == [("first",), ("third",)]
    assert channel.unanswered_for() == 0.0
    ticker.cancel()


async def test_a_worker_that_dies_fails_every_waiting_request(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    worker = FakeWorker(theirs)
    channel = QueryChannel(ours)
    worker.stall()
    waiting = [asyncio.create_task(channel.request(("q", i), 5.0)) for i in range(3)]
    await asyncio.sleep(0.05)
    theirs.shutdown(socket.SHUT_RDWR)
    worker.close()
    for task in waiting:
        with pytest.raises(ChannelClosedError):
            await task
    with pytest.raises(ChannelClosedError):
        await channel.request(("after",), 1.0)


async def test_a_synchronous_call_on_the_loop_waits_at_most_its_timeout(pair: tuple[socket.socket, socket.socket]) -> None:
    """`KafkaStreams.store()` views are synchronous: on the loop's thread they read the channel
    themselves, handing earlier replies to the coroutines that wait for them."""
    ours, theirs = pair
    worker = FakeWorker(theirs)
    channel = QueryChannel(ours)
    worker.stall()
    earlier = asyncio.create_task(channel.request(("async",), 5.0))
    await asyncio.sleep(0.01)
    threading.Timer(0.1, worker.resume).start()
    assert channel.call(("sync",), 2.0) == (True, ("answer", ("sync",)), False)
    assert await earlier == (True, ("answer", ("async",)), False)
    worker.stall()
    began = time.monotonic()
    with pytest.raises(ChannelTimeoutError):
        channel.call(("stalled",), 0.2)
    assert 0.2 <= time.monotonic() - began < 0.6
    worker.resume()
    assert await channel.request(("next",), 5.0) == (True, ("answer", ("next",)), False)


async def test_a_synchronous_call_from_another_thread_goes_through_the_loop(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    FakeWorker(theirs)
    channel = QueryChannel(ours)
    answer = await asyncio.to_thread(channel.call, ("threaded",), 2.0)
    assert answer == (True, ("answer", ("threaded",)), False)


class _Worker:
    """What `RemoteStoreProvider` needs of a worker thread: a name, its copies, its channel."""

    def __init__(self, name: str, channel: Channel, partitions: set[int]) -> None:
        self.name = name
        self._channel = channel
        self._copies = {"counts": frozenset((p, True) for p in partitions)}

    def copies(self) -> Mapping[str, frozenset[tuple[int, bool]]]:
        return self._copies

    def query_channel(self) -> Channel | None:
        return self._channel


async def test_a_stalled_worker_delays_only_its_own_partitions() -> None:
    """Two workers, one stalled: reads of the other's partition answer at once, the stalled one's
    fail with StoreQueryTimeoutError (a 503) by the deadline, and after it resumes both answer right."""
    sockets = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2)]
    try:
        fakes = [FakeWorker(theirs, {f"key-{i}": i}) for i, (_, theirs) in enumerate(sockets)]
        workers = [_Worker(f"app-StreamThread-{i + 1}", QueryChannel(ours), {i}) for i, (ours, _) in enumerate(sockets)]
        hosts = [RemoteStoreProvider(worker, lambda _store: Serdes.String()) for worker in workers]
        queries = QueryableStoreProvider(lambda: hosts, lambda _name, _stale: None)

        def read(partition: int) -> StoreRead:
            return StoreRead("counts", KV, "get", (f"key-{partition}",), StoreQuery(partition))

        fakes[0].stall()
        stalled = asyncio.create_task(queries.query(read(0), Deadline.after(0.5)))
        began = time.monotonic()
        for _ in range(20):
            assert await queries.query(read(1), Deadline.after(0.5)) == 1
        assert time.monotonic() - began < 0.4, "the answering worker was held up"
        with pytest.raises(StoreQueryTimeoutError) as failed:
            await stalled
        assert isinstance(failed.value, InvalidStateStoreError) and failed.value.host == "app-StreamThread-1"
        assert hosts[0].unanswered_for() >= 0.5 and hosts[1].unanswered_for() == 0.0
        with pytest.raises(StoreQueryTimeoutError):  # known stalled: refused at once
            await asyncio.wait_for(queries.query(read(0), Deadline.after(0.3)), 0.1)
        with pytest.raises(InvalidStateStoreError):  # the synchronous views too, at once
            ask(workers[0], ("read", "counts", "key_value_store", 0, False, None, "get", ("key-0",)), timeout=0.3)
        fakes[0].resume()
        await asyncio.sleep(0.1)
        assert [await queries.query(read(p), Deadline.after(1.0)) for p in (0, 1)] == [0, 1]
        with_position = read(1)._replace(with_position=True)
        assert await queries.query(with_position, Deadline.after(1.0)) == (1, {"in-0": 1}), "one request for both"
        assert await queries.query(StoreRead("counts", KV, "get", ("key-1",)), Deadline.after(1.0)) == 1, "asked of both"
    finally:
        _close_channels()
        for ours, theirs in sockets:
            ours.close()
            theirs.close()


async def test_the_probe_pings_an_idle_worker_so_a_stall_shows() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        worker = FakeWorker(theirs)
        channel = QueryChannel(ours)
        worker.stall()
        channel.probe()
        channel.probe()  # one ping at a time
        await asyncio.sleep(0.3)
        assert channel.unanswered_for() >= 0.3 and channel.in_flight == 1
        began = time.monotonic()
        with pytest.raises(ChannelTimeoutError):  # the overdue ping: a synchronous read does not block the loop
            channel.call(("sync",), 1.0)
        assert time.monotonic() - began < 0.1
        worker.resume()
        await asyncio.sleep(0.1)
        assert channel.unanswered_for() == 0.0 and worker.requests == [("ping",)]
    finally:
        _close_channels()
        ours.close()
        theirs.close()
