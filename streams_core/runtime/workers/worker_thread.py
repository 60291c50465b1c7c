"""WorkerThread: a stream thread that runs in a worker process, as its instance sees it.

`stream.threads.mode=process` (docs/runtime.md): the instance's `StreamThreads` registry holds
these instead of in-process `StreamThread`s, made by `WorkerThreadFactory`. The instance keeps
its own state machine, uncaught-exception handler, REST server and discovery; the worker runs
the thread (`stream_worker.py`). A worker's state, metadata, metrics and store copies are what it
last reported on its control channel; its stores are read through its query channel
(`RemoteStoreProvider`).

A worker that ends without saying how (a kill -9, an interpreter crash) is a thread that died
with `WorkerDiedError`: the uncaught-exception handler decides (REPLACE_THREAD starts a new worker
with the same index). Its task directory locks are `flock`s, gone with its process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import sys
from collections.abc import Callable, Mapping
from typing import Any

from streams_core import clients
from streams_core.config import StreamsConfig
from streams_core.errors import ConfigError, InvalidStateStoreError, StreamsError, WorkerDiedError
from streams_core.processor.internals import topology_shipping
from streams_core.runtime.assignment import AssignmentInfo
from streams_core.runtime.threads.instance_thread import ThreadCallbacks
from streams_core.runtime.threads.thread_metadata import ThreadMetadata, thread_metadata
from streams_core.runtime.threads.thread_state import ThreadState
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.runtime.workers.remote_store_provider import RemoteStoreProvider, ask
from streams_core.runtime.workers.stream_worker import WorkerApplication, WorkerSpec, WorkerStatus
from streams_core.runtime.workers.worker_channel import ChannelClosedError, QueryChannel, read_frame, write_frame
from streams_core.runtime.workers.worker_logging import LoggingSetup

__all__ = ["WorkerThread", "WorkerThreadFactory"]

log = logging.getLogger(__name__)


_WORKER_MAIN = "import sys; from streams_core.runtime.workers.stream_worker import main; main(sys.argv[1:])"
"""Not `-m`: a module run as `__main__` would pickle its classes under that name."""


class WorkerThread:
    """A stream thread in a worker process: start it, stop it, read its last report and its stores."""

    batch_finished = False
    """Batch runs (KIP-95) keep their threads in the instance's process."""

    def __init__(
        self,
        index: int,
        name: str,
        application: bytes,
        spec: WorkerSpec,
        callbacks: ThreadCallbacks,
        key_serde: Callable[[str], Any],
        fallback_metadata: ThreadMetadata,
    ) -> None:
        self.index = index
        self.name = name
        self.log_prefix = f"stream-thread [{name}] "
        self.state = ThreadState.CREATED
        self._application = application
        self._spec = spec
        self._callbacks = callbacks
        self._status: WorkerStatus | None = None
        self._fallback_metadata = fallback_metadata
        self._stopping = False
        self._killed = False
        self._failure: BaseException | None = None
        """Why the worker could not start: `prepare` and `start` raise it again."""
        self._process: asyncio.subprocess.Process | None = None
        self._control: asyncio.StreamWriter | None = None
        self._channel: QueryChannel | None = None
        self._serving = False
        """The worker serves its query channel (it started): only then is it asked, as a blocking call
        to a worker still starting would stall this loop."""
        self._reader: asyncio.StreamReader | None = None
        self._listener: asyncio.Task[None] | None = None
        self.store_provider = RemoteStoreProvider(self, key_serde)

    def __repr__(self) -> str:
        pid = None if self._process is None else self._process.pid
        return f"WorkerThread({self.name}, {self.state.name}, pid={pid})"

    @property
    def pid(self) -> int | None:
        """The worker process's id once started."""
        return None if self._process is None else self._process.pid

    # -- lifecycle ----------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Start the worker process and wait until it loaded the application (the slow part of a
        start: a new interpreter and its imports); a worker that fails here is DEAD, its error raised
        (again by `start`)."""
        if self._failure is not None:
            raise self._failure
        if self._process is not None:
            return
        self._set_state(ThreadState.STARTING)
        control, child_control = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        query, child_query = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            fds = (child_control.fileno(), child_query.fileno())
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _WORKER_MAIN, *map(str, fds), str(os.getpid()), pass_fds=fds
            )
        finally:
            child_control.close()
            child_query.close()
        log.info("%sstarted worker process %d", self.log_prefix, self._process.pid)
        self._reader, self._control = await asyncio.open_connection(sock=control)
        self._channel = QueryChannel(query)
        write_frame(self._control, (sys.path, self._application, self._spec))
        await self._until("ready")

    async def start(self) -> None:
        """Start the worker's thread (preparing the worker first if needed) and wait until it started
        (clients up, subscribed); a worker that fails to start is DEAD and its error raised here."""
        await self.prepare()
        assert self._control is not None and self._reader is not None
        write_frame(self._control, ("go",))
        self._status = (await self._until("started"))[1]
        self._serving = True
        self._listener = asyncio.create_task(self._listen(self._reader), name=f"{self.name}-listener")

    async def _until(self, step: str) -> tuple[Any, ...]:
        """The worker's message `step`, applying reports meanwhile; its failure raised (DEAD): the
        error it reported, or `WorkerDiedError` when it ended without one (killed, crashed)."""
        assert self._process is not None and self._reader is not None
        reply: tuple[Any, ...]
        try:
            while (reply := await read_frame(self._reader))[0] not in (step, "start-failed"):
                self._take(reply)
        except ChannelClosedError:
            reply = ("start-failed", None)
        if reply[0] == "start-failed":
            code = await self._ended()
            self._failure = reply[1] or WorkerDiedError(
                f"{self.name}: worker process {self._process.pid} ended while starting with exit code {code}"
            )
            self._set_state(ThreadState.DEAD)
            raise self._failure
        return reply

    def _take(self, message: tuple[Any, ...]) -> None:
        """Apply one report: a state change, an assignment, or a periodic status."""
        kind = message[0]
        if kind == "state":
            _, _old, new, self._status = message
            self._set_state(new)
        elif kind == "assignment":
            self._status = message[1]
            self._callbacks.on_assignment(self)
        elif kind == "status":
            self._status = message[1]

    async def _listen(self, reader: asyncio.StreamReader) -> None:
        """Follow the worker's reports until it ends; then DEAD, and the error if it died."""
        error: BaseException | None = None
        clean = False
        try:
            while (message := await read_frame(reader))[0] != "stopped":
                self._take(message)
            _, error, self._status = message
            clean = True
        except ChannelClosedError:
            pass
        code = await self._ended()
        if not clean and not self._killed:
            error = WorkerDiedError(f"{self.name}: worker process {self.pid} ended with exit code {code}")
        if self.state is not ThreadState.DEAD:
            if self.state is not ThreadState.PENDING_SHUTDOWN:
                self._set_state(ThreadState.PENDING_SHUTDOWN)
            self._set_state(ThreadState.DEAD)
        if error is not None:
            self._callbacks.on_error(self, error)

    async def _ended(self) -> int:
        """Wait for the worker process to end, close its channels; its exit code."""
        assert self._process is not None
        code = await self._process.wait()
        self._serving = False
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._control is not None:
            self._control.close()
        return code

    def shutdown(self) -> None:
        """Ask the worker to stop after its current batch; `stop` waits for it."""
        self._stopping = True
        if self._control is not None and not self._control.is_closing():
            write_frame(self._control, ("stop",))

    @property
    def stopping(self) -> bool:
        return self._stopping

    async def stop(self) -> None:
        """Ask the worker to stop cleanly (commit, close tasks, leave the group) and wait until it ended."""
        self.shutdown()
        if self._listener is not None:
            await asyncio.shield(self._listener)
        elif self._process is not None:  # prepared, never started: it ends on the stop
            await self._ended()
            self._set_state(ThreadState.DEAD)

    async def kill(self) -> None:
        """End the worker at once (SIGKILL: no commit), for closes that ran out of time."""
        self._stopping = self._killed = True
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
        if self._listener is not None:
            await asyncio.shield(self._listener)

    @property
    def alive(self) -> bool:
        return self._listener is not None and not self._listener.done()

    def _set_state(self, new: ThreadState) -> None:
        old, self.state = self.state, new
        if old is not new:
            log.info("%sstate %s -> %s", self.log_prefix, old.name, new.name)
            self._callbacks.on_state_change(self, old, new)

    # -- what the instance reads ----------------------------------------------------------------

    def resize_cache(self, max_bytes: int) -> None:
        if self._control is not None and not self._control.is_closing():
            write_frame(self._control, ("resize", max_bytes))

    @property
    def assignment(self) -> AssignmentInfo | None:
        return None if self._status is None else self._status.assignment

    def _ask_now(self, what: str) -> Any:
        """The running worker's `what` now (a snapshot when asked, as Kafka Streams' are); None when it
        cannot answer (its last report stands)."""
        if not self._serving:
            return None
        try:
            return ask(self, (what,))
        except (InvalidStateStoreError, ConnectionError):
            log.debug("%sno %s from the worker; its last report stands", self.log_prefix, what)
            return None

    def metadata(self) -> ThreadMetadata:
        """The worker's metadata now, with the thread's state as the instance follows it."""
        found: ThreadMetadata | None = self._ask_now("metadata")
        if found is None:
            found = self._fallback_metadata if self._status is None else self._status.metadata
        return dataclasses.replace(found, thread_state=self.state.name)

    def metrics(self) -> dict[str, Any]:
        """The worker's metrics now (its last report once it cannot answer), with its pid."""
        found = self._ask_now("metrics")
        if found is None:
            found = {} if self._status is None else dict(self._status.metrics)
        return {**found, "thread": self.name, "state": self.state.name, "pid": self.pid}

    def copies(self) -> Mapping[str, frozenset[tuple[int, bool]]]:
        return {} if self._status is None or self.state is ThreadState.DEAD else self._status.copies

    def query_channel(self) -> QueryChannel | None:
        return self._channel if self._serving else None

    async def resubscribe(self) -> None:
        raise StreamsError("pattern subscriptions keep their stream threads in the instance's process")


class WorkerThreadFactory:
    """Makes the worker threads of one instance (the process-mode `StreamThreadFactory`).

    The application (topology, config, client supplier) is shipped once, here: what cannot be
    shipped fails the instance's construction with a ConfigError, not a thread's start.
    """

    __slots__ = ("_application", "_callbacks", "_config", "_key_serde", "_partition_counts")

    def __init__(
        self,
        metadata: TopologyMetadata,
        config: StreamsConfig,
        *,
        process_id: str,
        client_supplier: clients.KafkaClientSupplier,
        partition_counts: Callable[[], Mapping[str, int]],
        key_serde: Callable[[str], Any],
        callbacks: ThreadCallbacks,
    ) -> None:
        self._config = config
        self._partition_counts = partition_counts
        self._key_serde = key_serde
        self._callbacks = callbacks
        try:
            self._application = topology_shipping.ship(
                WorkerApplication(metadata, config.explicit(), client_supplier, process_id)
            )
        except Exception as exc:
            raise ConfigError(
                "stream.threads.mode",
                f"the topology, config or client supplier cannot be shipped to a worker process ({exc!r}); "
                "use 'inline' or make it picklable",
            ) from exc

    def create(self, index: int, cache_max_bytes: int) -> WorkerThread:
        """A worker for `<application.id>-StreamThread-<index>` (not started), its cache `cache_max_bytes`."""
        config = self._config
        name = f"{config['application.id']}-StreamThread-{index}"
        spec = WorkerSpec(index, cache_max_bytes, dict(self._partition_counts()), LoggingSetup.capture().ship())
        fallback = thread_metadata(config, index, name, ThreadState.CREATED.name)
        return WorkerThread(index, name, self._application, spec, self._callbacks, self._key_serde, fallback)
