"""KafkaStreams: a running application instance (the client of KIP-28), on asyncio and aiokafka.

`await start()` checks the source topics, creates the internal topics, then starts
`num.stream.threads` stream threads (worker processes for two or more: thread_mode.py) whose
consumers join the group `application.id`. `state` follows Kafka Streams' state machine;
`all_metadata()` and friends answer KIP-67 discovery; `run()` blocks until SIGINT/SIGTERM;
`add_stream_thread()` / `remove_stream_thread()` change the threads while it runs (KIP-663).
Beside it: the state machine (client_state.py), what a dead thread leads to (thread_failures.py)
and the store queries and discovery (kafka_streams_queries.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from streams_core import clients
from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError
from streams_core.processor.topology import Topology
from streams_core.runtime.assignment import HostInfo, StreamsMetadataState
from streams_core.runtime.autostop.run_end import run_end
from streams_core.runtime.client_state import ClientStateMachine, State, StateListener
from streams_core.runtime.kafka_streams_queries import KafkaStreamsQueries
from streams_core.runtime.queries.state_store_providers import LagInfo, QueryableStoreProvider
from streams_core.runtime.shutdown_request import broadcast_shutdown_request
from streams_core.runtime.signal_runner import run_until_signal
from streams_core.runtime.tasks.state_directory_cleaner import clean_removed_tasks
from streams_core.runtime.thread_failures import StreamThreadExceptionResponse, ThreadFailures, UncaughtExceptionHandler
from streams_core.runtime.thread_mode import in_process, thread_factory
from streams_core.runtime.threads.global_stream_thread import GlobalStreamThread
from streams_core.runtime.threads.instance_thread import InstanceThread, ThreadCallbacks
from streams_core.runtime.threads.stream_threads import StreamThreads
from streams_core.runtime.threads.thread_metadata import ThreadMetadata
from streams_core.runtime.threads.thread_state import ThreadState
from streams_core.runtime.topic_preparation import prepare_topics, watch_pattern_topics
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.state.internals.state_directory import StateDirectory

__all__ = ["KafkaStreams", "LagInfo", "State", "StreamThreadExceptionResponse"]

log = logging.getLogger(__name__)

ClientState = State
"""`KafkaStreams.State` under a name the class body does not shadow (for annotations)."""


class KafkaStreams(KafkaStreamsQueries):
    """One instance of a Kafka Streams application."""

    State = State  # Kafka Streams' nested enum name: KafkaStreams.State.RUNNING

    def __init__(
        self,
        topology: Topology,
        config: Mapping[str, Any] | StreamsConfig,
        client_supplier: clients.KafkaClientSupplier | None = None,
    ) -> None:
        """`client_supplier` creates the Kafka clients (aiokafka by default; a fake in unit tests)."""
        props = config.explicit() if isinstance(config, StreamsConfig) else dict(config)
        self.config = StreamsConfig(props, required=("application.id", "bootstrap.servers"))
        clients.validate_client_configs(self.config)
        self.topology = topology
        self._clients: clients.KafkaClientSupplier = client_supplier or clients.AioKafkaClientSupplier()
        self.application_id: str = self.config["application.id"]
        builder = topology.internal_topology_builder
        builder.set_application_id(self.application_id)
        builder.apply_config(self.config)
        self.metadata = TopologyMetadata(builder, self.application_id)
        self._state_directory = StateDirectory.for_topology(self.config, builder)
        self.process_id = str(uuid.uuid4())
        server = self.config["application.server"]
        self.metadata_state = StreamsMetadataState(
            self.metadata.store_source_topics, HostInfo.parse(server) if server else None, self.metadata.global_store_names
        )
        self._lifecycle = ClientStateMachine(self.application_id, self._state_directory.unlock)
        self._failures = ThreadFailures(self.application_id)
        self._partition_counts: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Task[bool] | None = None
        self._thread_starts: set[asyncio.Task[InstanceThread | None]] = set()
        self._cleaner: asyncio.Task[None] | None = None
        self._pattern_watcher: asyncio.Task[None] | None = None
        self._run_end = run_end(self.config, self._clients, self.process_id)
        self._inline = in_process(self.config, self.metadata, own_supplier=client_supplier is not None)
        factory = thread_factory(
            self.metadata,
            self.config,
            inline=self._inline,
            process_id=self.process_id,
            client_supplier=self._clients,
            global_stores=self._global_stores,
            run_end=self._run_end,
            partition_counts=lambda: self._partition_counts,
            key_serde=lambda store: self.describe_store(store).key_serde,
            callbacks=ThreadCallbacks(
                self._on_thread_state, self._on_thread_assignment, self._on_thread_error, self._on_batch_finished
            ),
        )
        self._threads = StreamThreads(factory, self.config, global_thread=bool(self.metadata.global_topics) and self._inline)
        self._global_thread: GlobalStreamThread | None = None
        self.store_queries = self._store_provider = QueryableStoreProvider(  # the async path with deadlines: store_host.py
            lambda: [t.store_provider for t in self._threads.all()], self._check_queryable, self._global_stores
        )

    def __repr__(self) -> str:
        return f"KafkaStreams({self.application_id!r}, {self._lifecycle.state.name})"

    # -- state --------------------------------------------------------------------------------

    @property
    def state(self) -> ClientState:
        return self._lifecycle.state

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions that killed stream threads or the global thread, oldest first."""
        return list(self._failures.errors)

    def set_state_listener(self, listener: StateListener | None) -> None:
        """Called with (new, old) on every state change, on the event loop."""
        self._lifecycle.listener = listener

    def set_uncaught_exception_handler(self, handler: UncaughtExceptionHandler | None) -> None:
        """Decides what a thread's fatal exception does (default: shut down this client)."""
        self._failures.handler = handler

    async def wait_for_state(self, *states: ClientState, timeout: float = 60.0) -> ClientState:
        """Wait until the client is in one of `states` (e.g. RUNNING); TimeoutError otherwise."""
        return await self._lifecycle.wait_for(states, timeout)

    # -- start and stop -----------------------------------------------------------------------

    async def start(self) -> None:
        """Check topics, create internal topics and start the stream threads (state REBALANCING); a
        thread that fails or dies while starting goes to the uncaught-exception handler, not raised."""
        if self._lifecycle.state is not State.CREATED:
            raise StreamsError(f"KafkaStreams can be started once, from CREATED; it is {self._lifecycle.state.name}")
        self._lifecycle.bind_loop()
        self._loop = asyncio.get_running_loop()  # for query_sync() from other threads
        self._state_directory.lock()  # another instance running on state.dir: StreamsError, as Kafka
        try:
            await self._prepare_topics()
        except Exception as exc:
            if clients.is_security_error(exc):  # an ACL or a credential is missing: ERROR, as a thread would
                error = clients.explain(exc, self.config)
                self._fail_start(error)  # type: ignore[arg-type]
                raise error  # noqa: B904 - explain() chained it (or it is exc itself)
            self._state_directory.unlock()
            raise
        except BaseException:
            self._state_directory.unlock()
            raise
        if self._lifecycle.state is not State.CREATED:  # close() was called meanwhile: start nothing
            log.info("stream-client [%s] closed while starting; no stream thread started", self.application_id)
            return
        self._lifecycle.set(State.REBALANCING)
        if self.metadata.global_topics and self._inline:  # a worker process runs its own
            cache = self._threads.cache_size_per_thread(self.config["num.stream.threads"])
            self._global_thread = GlobalStreamThread(
                self.metadata, self.config, self._clients, self._partition_counts, self._on_thread_error, cache_max_bytes=cache
            )
            self._threads.global_cache = self._global_thread.cache
            try:
                await self._global_thread.start()
            except Exception as exc:  # as Kafka Streams: start() raises, and the dead global thread closes the client to ERROR
                self._fail_start(exc)
                raise
        try:
            await self._start_threads()
        except Exception as exc:  # a batch run's metadata or a thread's clients failed: nothing may stay half-started
            self._fail_start(exc)
            raise

    def _fail_start(self, error: Exception) -> None:
        """A failed start closes the client to ERROR (threads, global thread, state-directory lock)."""
        self._failures.record(error)
        self._lifecycle.set(State.PENDING_ERROR)
        self._begin_close(error=True)

    async def _start_threads(self) -> None:
        """The batch run's metadata, the state cleaner, the pattern watcher, then the stream threads."""
        await self._run_end.start(self.metadata, self._partition_counts)
        loop = asyncio.get_running_loop()
        self._cleaner = loop.create_task(self._clean_state_periodically())
        if self.metadata.has_patterns:
            interval_s = int(self.config.client_overrides("main.consumer").get("metadata.max.age.ms", 300_000)) / 1000
            self._pattern_watcher = loop.create_task(
                watch_pattern_topics(
                    lambda: self._clients.get_admin(self.config), self.metadata, self._partition_counts, interval_s,
                    self._resubscribe_threads,
                )
            )
        threads = [self._threads.add() for _ in range(self.config["num.stream.threads"])]
        if not self._inline and self._closing is None:  # workers prepared, then started together: one rebalance
            await asyncio.gather(*(thread.prepare() for thread in threads), return_exceptions=True)  # start() raises again
        if self._closing is None:
            await asyncio.gather(*(self._track_thread_start(thread) for thread in threads))

    def _track_thread_start(self, thread: InstanceThread) -> asyncio.Task[InstanceThread | None]:
        """Start a thread in a task that a concurrent close() waits for before stopping the threads."""
        task = asyncio.get_running_loop().create_task(self._threads.start(thread, self._respond))
        self._thread_starts.add(task)
        task.add_done_callback(self._thread_starts.discard)
        return task

    async def _prepare_topics(self) -> None:
        admin = self._clients.get_admin(self.config)
        await admin.start()
        try:
            self._partition_counts = await prepare_topics(
                admin,
                self.metadata,
                self._run_end.own_topics,
                self.config["windowstore.changelog.additional.retention.ms"],
                self.config.topic_configs(),
            )
        finally:
            await admin.close()

    def _on_batch_finished(self, thread: InstanceThread) -> None:
        """A thread finished its batch: when every live thread has, the run mode closes the instance
        once the whole run is done (docs/batch.md)."""
        if self._batch_finished():
            self._run_end.on_threads_finished(self._batch_finished, self._begin_close)

    def _batch_finished(self) -> bool:
        live = [t for t in self._threads.all() if t.alive]
        return self._closing is None and bool(live) and all(t.batch_finished and t.state is ThreadState.RUNNING for t in live)

    async def add_stream_thread(self) -> str | None:
        """Start one more stream thread (KIP-663), `<application.id>-StreamThread-<lowest free index>`; its
        name (or its REPLACE_THREAD replacement's, should it die starting), or None unless RUNNING or
        REBALANCING. Its join makes the group rebalance to give it tasks."""
        if not self._lifecycle.state.is_running_or_rebalancing():
            log.warning("stream-client [%s] cannot add a stream thread in state %s", self.application_id, self._lifecycle.state.name)
            return None
        started = await self._track_thread_start(self._threads.add())
        return started.name if started is not None and self._lifecycle.state.is_running_or_rebalancing() else None

    async def remove_stream_thread(self, timeout: float | None = None) -> str | None:
        """Stop one stream thread cleanly (KIP-663: commit, close its tasks, leave the group so the others
        rebalance at once); its name, or None unless RUNNING or REBALANCING with a running thread (the last
        one included). TimeoutError when it has not stopped within `timeout` s (`StreamThreads.remove`)."""
        if not self._lifecycle.state.is_running_or_rebalancing():
            log.warning("stream-client [%s] cannot remove a stream thread in state %s", self.application_id, self._lifecycle.state.name)
            return None
        return await self._threads.remove(timeout)

    async def close(self, timeout: float | None = None) -> bool:
        """Stop every thread cleanly (commit, flush, close clients, leave the group).

        Returns False when the threads did not stop within `timeout` seconds (they are then
        cancelled without a final commit).
        """
        if self._lifecycle.state is State.CREATED:
            self._lifecycle.set(State.NOT_RUNNING)
            return True
        return await asyncio.shield(self._begin_close(timeout))

    def _begin_close(self, timeout: float | None = None, *, error: bool = False) -> asyncio.Task[bool]:
        """The one close of the client, started on the first call."""
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_task(self._close(timeout, error=error))
        return self._closing

    async def _close(self, timeout: float | None, *, error: bool = False) -> bool:
        self._lifecycle.set(State.PENDING_ERROR if error else State.PENDING_SHUTDOWN)
        for background in (self._cleaner, self._pattern_watcher):
            if background is not None:
                background.cancel()
        if self._thread_starts:  # a thread still starting has no loop to stop yet: let it start first
            await asyncio.wait(set(self._thread_starts), timeout=timeout)
        stops = [asyncio.create_task(t.stop()) for t in self._threads.all()]
        done = True
        if stops:
            _finished, pending = await asyncio.wait(stops, timeout=timeout)
            if pending:
                done = False
                log.warning("stream-client [%s] threads did not stop in %ss; cancelling", self.application_id, timeout)
                for thread in self._threads.all():
                    await thread.kill()
        await self._run_end.end()
        if self._global_thread is not None:
            try:
                await self._global_thread.stop()
            except Exception:
                log.exception("stream-client [%s] stopping the global thread failed", self.application_id)
        self._lifecycle.set(State.ERROR if error or self._lifecycle.state is State.PENDING_ERROR else State.NOT_RUNNING)
        return done

    def clean_up_state(self) -> list[Any]:
        """Remove the state of tasks not owned here and idle for `state.cleanup.delay.ms` (done periodically)."""
        threads = [thread.metadata() for thread in self._threads.all()]
        owned = {task.task_id for thread in threads for task in (*thread.active_tasks, *thread.standby_tasks)}
        app_dir = Path(self.config["state.dir"]) / self.application_id
        return clean_removed_tasks(app_dir, owned, self.config["state.cleanup.delay.ms"])

    async def _resubscribe_threads(self, added: frozenset[str]) -> None:
        for thread in self._threads.all():
            if thread.alive and not thread.stopping:
                await thread.resubscribe()

    async def _clean_state_periodically(self) -> None:
        interval = max(1.0, self.config["state.cleanup.delay.ms"] / 1000)
        while True:
            await asyncio.sleep(interval)
            if self._lifecycle.state is State.RUNNING:
                try:
                    self.clean_up_state()
                except OSError:
                    log.exception("stream-client [%s] state cleanup failed", self.application_id)

    def run(self) -> None:
        """Start, block until SIGINT or SIGTERM, then close cleanly (for `python -m` apps)."""
        asyncio.run(self.run_until_signal())

    async def run_until_signal(
        self, *, on_started: Callable[[], None] | None = None, close_timeout: float | None = None
    ) -> None:
        """Start, wait for SIGINT/SIGTERM or the client's end (ERROR, or NOT_RUNNING after a batch
        run), then close (within `close_timeout` seconds). `on_started` runs once `start()` returned."""
        await run_until_signal(
            self.start,
            lambda: self.wait_for_state(State.ERROR, State.NOT_RUNNING, State.PENDING_ERROR, timeout=10**9),
            lambda: self.close(close_timeout),
            on_started,
        )

    # -- thread callbacks ---------------------------------------------------------------------

    def _on_thread_state(self, thread: InstanceThread, old: ThreadState, new: ThreadState) -> None:
        self._lifecycle.follow_threads(t.state for t in self._threads.all())

    def _on_thread_assignment(self, thread: InstanceThread) -> None:
        info = thread.assignment
        if info is not None:
            self.metadata_state.on_change(
                info.partitions_by_host, info.standby_partitions_by_host, self._partition_counts
            )

    def _on_thread_error(self, thread: InstanceThread | GlobalStreamThread, error: BaseException) -> None:
        """A running thread died: the handler's response (a REPLACE_THREAD replacement is started)."""
        replacement = self._respond(thread, error)
        if replacement is not None:
            self._track_thread_start(replacement)

    def _respond(self, thread: InstanceThread | GlobalStreamThread, error: BaseException) -> InstanceThread | None:
        """A thread died: the uncaught-exception handler chooses the response (thread_failures.py); the
        replacement to start for REPLACE_THREAD. A dead global thread closes the client to ERROR, and so
        do `MAX_FAILED_STARTS` failed starts in a row."""
        error = clients.explain(error, self.config)  # a missing ACL: named with the principal
        global_thread = isinstance(thread, GlobalStreamThread)
        response = self._failures.response(thread.name, error, global_thread=global_thread)
        if global_thread:  # PENDING_ERROR at once: its stores no longer follow their topics
            self._lifecycle.set(State.PENDING_ERROR)
        elif response is StreamThreadExceptionResponse.REPLACE_THREAD and self._closing is None and self._lifecycle.state.is_running_or_rebalancing():
            gave_up = self._threads.gives_up(thread.name, error)
            if gave_up is None:
                return self._threads.add()  # the dead thread's index is the lowest free one
            self._failures.record(gave_up)
            log.error("stream-client [%s] shutting down: %s", self.application_id, gave_up)
        if self._closing is None and response is StreamThreadExceptionResponse.SHUTDOWN_APPLICATION:
            self._closing = asyncio.get_running_loop().create_task(self._shut_down_application())
        self._begin_close(error=True)
        return None

    async def _shut_down_application(self) -> bool:
        """Tell every member to shut down, then shut this client down (SHUTDOWN_APPLICATION)."""
        try:
            await broadcast_shutdown_request(self.config, self._clients, self.metadata, self.process_id)
        except Exception:
            log.exception("stream-client [%s] could not ask the other members to shut down", self.application_id)
        return await self._close(None, error=True)

    @property
    def threads(self) -> list[InstanceThread]:
        return self._threads.all()

    def metadata_for_local_threads(self) -> set[ThreadMetadata]:
        """Name, state, tasks and client ids of each stream thread not dead (KIP-663): a snapshot."""
        return self._threads.metadata()

    def metrics(self) -> dict[str, Any]:
        """Per-thread counters (processed, dropped, pauses, commits), the global thread's, and the client state."""
        found: dict[str, Any] = {"state": self._lifecycle.state.name, "threads": [t.metrics() for t in self._threads.all()]}
        if self._global_thread is not None:
            found["global_thread"] = {"processed_records": self._global_thread.processed_records}
        return found

