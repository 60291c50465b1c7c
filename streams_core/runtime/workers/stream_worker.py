"""The worker process of one stream thread (`stream.threads.mode=process`, docs/runtime.md).

An instance with N stream threads starts N of these (`main([<control fd>, <query fd>])` in a new
interpreter, see `worker_thread.py`). Each has its own event loop, consumer, producer, tasks and record
cache, and, when the topology has global stores, its own global stream thread, so N workers use N
cores. They share the instance's process id, `application.server` and state directory, so the
group's assignor sees one client with N consumers, as for Kafka Streams' threads.

The worker receives the `WorkerApplication` (the topology shipped by value) and its `WorkerSpec` on
its control channel, says it is ready, starts when the instance says go (so the workers an
instance starts together join the group together, in one rebalance), builds
its stream thread with the same `StreamThreadFactory` an in-process thread uses, and then:
- reports each state change, each assignment and, every second, a `WorkerStatus` (metadata, the
  store copies it holds, metrics) on the control channel;
- answers store queries on its query channel (`WorkerStoreQueries`), between processing slices,
  and `("metrics",)` / `("metadata",)` there with its thread's now (for `metrics()` and
  `metadata_for_local_threads()`);
- stops cleanly (commit, close tasks, leave the group) when asked or when the instance's end of
  the control channel closes, so a worker never outlives its instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streams_core import clients
from streams_core.config import StreamsConfig
from streams_core.processor.internals import topology_shipping
from streams_core.runtime.assignment import AssignmentInfo
from streams_core.runtime.autostop.run_end import RunUntilClosed
from streams_core.runtime.threads.global_stream_thread import GlobalStreamThread
from streams_core.runtime.threads.instance_thread import InstanceThread, ThreadCallbacks
from streams_core.runtime.threads.stream_thread import StreamThread
from streams_core.runtime.threads.stream_thread_factory import StreamThreadFactory
from streams_core.runtime.threads.thread_metadata import ThreadMetadata
from streams_core.runtime.threads.thread_state import ThreadState
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.runtime.workers.worker_channel import ChannelClosedError, read_frame, write_frame
from streams_core.runtime.workers.worker_logging import LoggingSetup
from streams_core.runtime.workers.worker_store_queries import WorkerStoreQueries, local_copies

__all__ = ["WorkerApplication", "WorkerSpec", "WorkerStatus", "main"]

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1

ORPHAN_GRACE_S = 30.0
"""How long a worker whose instance is gone may take to stop cleanly (its broker may be gone too)."""

STATUS_INTERVAL_S = 0.25
"""How often a worker reports its metrics and metadata without a state change (cheap: one small frame)."""


@dataclass(frozen=True)
class WorkerApplication:
    """What every worker of an instance shares (shipped once, with cloudpickle: user code by value)."""

    metadata: TopologyMetadata
    props: Mapping[str, Any]
    client_supplier: clients.KafkaClientSupplier
    process_id: str


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """One worker's own part: its thread's index, its cache share, the topics' partition counts."""

    index: int
    cache_max_bytes: int
    partition_counts: Mapping[str, int]
    logging_setup: bytes
    """The instance's `LoggingSetup`, shipped: loaded once the worker has the instance's `sys.path`."""


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """A worker's stream thread as the instance sees it between reports."""

    state: ThreadState
    metadata: ThreadMetadata
    copies: Mapping[str, frozenset[tuple[int, bool]]]
    """Per store, the `(partition, active)` copies held (see `local_copies`)."""
    metrics: dict[str, Any]
    assignment: AssignmentInfo | None


class StreamWorker:
    """One worker: its stream thread (and global thread), the control and query channels."""

    def __init__(self, app: WorkerApplication, spec: WorkerSpec, control: asyncio.StreamWriter) -> None:
        config = StreamsConfig(app.props, required=("application.id", "bootstrap.servers"))
        self._control = control
        self._global = (
            GlobalStreamThread(
                app.metadata, config, app.client_supplier, spec.partition_counts, self._on_global_error,
                cache_max_bytes=spec.cache_max_bytes, directory=f"global-{spec.index}",
            )
            if app.metadata.global_topics
            else None
        )
        factory = StreamThreadFactory(
            app.metadata,
            config,
            process_id=app.process_id,
            client_supplier=app.client_supplier,
            global_stores=self._global_stores,
            run_end=RunUntilClosed(config["application.id"]),
            callbacks=ThreadCallbacks(self._on_state, self._on_assignment, self._on_error, lambda _thread: None),
        )
        self.thread: StreamThread = factory.create(spec.index, spec.cache_max_bytes)
        self._queries = WorkerStoreQueries(self.thread, self._global_stores)
        self._dead = asyncio.Event()
        self._error: BaseException | None = None

    def _global_stores(self) -> Mapping[str, Any]:
        return {} if self._global is None else self._global.stores

    def metrics(self) -> dict[str, Any]:
        return {**self.thread.metrics(), "worker_cpu_seconds": time.process_time()}

    def status(self) -> WorkerStatus:
        thread = self.thread
        return WorkerStatus(thread.state, thread.metadata(), local_copies(thread), self.metrics(), thread.assignment)

    def _send(self, message: tuple[Any, ...]) -> None:
        if not self._control.is_closing():
            write_frame(self._control, message)

    def _on_state(self, _thread: InstanceThread, old: ThreadState, new: ThreadState) -> None:
        self._send(("state", old, new, self.status()))
        if new is ThreadState.DEAD:
            self._dead.set()

    def _on_assignment(self, _thread: InstanceThread) -> None:
        self._send(("assignment", self.status()))

    def _on_error(self, _thread: InstanceThread, error: BaseException) -> None:
        self._error = self._error or error

    def _on_global_error(self, _thread: GlobalStreamThread, error: BaseException) -> None:
        """The global stores stopped following their topics: the worker dies with the error."""
        self._error = self._error or error
        self.thread.shutdown()

    async def run(self, control: asyncio.StreamReader, query_sock: socket.socket) -> None:
        """Start, serve until the thread is dead, then report how it ended."""
        try:
            if self._global is not None:
                await self._global.start()
            await self.thread.start()
        except Exception as exc:
            log.exception("%sfailed to start", self.thread.log_prefix)
            self._send(("start-failed", exc))
            await self._control.drain()
            return
        self._send(("started", self.status()))
        helpers = [
            asyncio.create_task(self._read_control(control)),
            asyncio.create_task(self._serve_queries(query_sock)),
            asyncio.create_task(self._report_periodically()),
        ]
        await self._dead.wait()
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        if self._global is not None:
            await self._global.stop()
        self._send(("stopped", self._error, self.status()))
        with contextlib.suppress(ConnectionError):
            await self._control.drain()

    async def _read_control(self, control: asyncio.StreamReader) -> None:
        try:
            while True:
                command = await read_frame(control)
                if command[0] == "stop":
                    self.thread.shutdown()
                elif command[0] == "resize":
                    self.thread.resize_cache(command[1])
        except ChannelClosedError:
            log.warning("%sthe instance is gone; stopping (at most %s s)", self.thread.log_prefix, ORPHAN_GRACE_S)
            self.thread.shutdown()
            asyncio.get_running_loop().call_later(ORPHAN_GRACE_S, os._exit, 1)

    async def _serve_queries(self, sock: socket.socket) -> None:
        reader, writer = await asyncio.open_connection(sock=sock)
        try:
            while True:
                request = await read_frame(reader)
                if request[0] == "metrics":
                    reply: tuple[bool, Any, bool] = (True, self.metrics(), False)
                elif request[0] == "metadata":
                    reply = (True, self.thread.metadata(), False)
                else:
                    reply = await self._queries.answer(request)
                write_frame(writer, reply)
        except ChannelClosedError:
            return
        finally:
            writer.close()

    async def _report_periodically(self) -> None:
        while True:
            await asyncio.sleep(STATUS_INTERVAL_S)
            self._send(("status", self.status()))


async def _main(control_fd: int, query_fd: int) -> None:
    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=control_fd))
    sys.path[:], payload, spec = await read_frame(reader)  # the instance's path: user modules import by reference
    try:
        LoggingSetup.load(spec.logging_setup).apply()
        app: WorkerApplication = topology_shipping.load(payload)
        worker = StreamWorker(app, spec, writer)
    except Exception as exc:  # a user module it cannot import, its global stores' directory locked: the instance gets the reason
        log.exception("worker process %d cannot start", os.getpid())
        write_frame(writer, ("start-failed", exc))
        await writer.drain()
        return
    write_frame(writer, ("ready",))
    while (command := await read_frame(reader))[0] != "go":  # the instance starts its workers' threads together
        if command[0] != "resize":  # "stop": closed before it started
            return
        worker.thread.resize_cache(command[1])  # a thread came or went meanwhile
    await worker.run(reader, socket.socket(fileno=query_fd))
    writer.close()


def _die_with_instance(instance_pid: int) -> None:
    """Linux: SIGKILL this worker when its instance's process dies (a kill -9 of the instance ends
    its workers too, as a JVM's threads end with it, and frees their task directories at once).
    A clean close of the instance stops its workers first; elsewhere the closed control channel
    stops a worker (within `ORPHAN_GRACE_S`)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != instance_pid:  # the instance died before the call: too late for the signal
            os._exit(1)


def main(argv: list[str]) -> None:
    """`<control fd> <query fd> <instance pid>`: the socket-pair ends the instance passed to this process."""
    _die_with_instance(int(argv[2]))
    try:
        asyncio.run(_main(int(argv[0]), int(argv[1])))
    except Exception:  # through the instance's logging set-up (JSON lines stay JSON), not a bare traceback
        log.exception("worker process %d failed", os.getpid())
        sys.exit(1)

