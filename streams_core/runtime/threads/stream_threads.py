"""StreamThreads: the stream threads of one KafkaStreams instance, as KIP-663 adds and removes them.

The registry behind `KafkaStreams.add_stream_thread` / `remove_stream_thread` and
`metadata_for_local_threads`, with Kafka Streams' rules:
- a new thread takes the lowest index no thread holds (a DEAD thread is trimmed first, so its
  index is free again; a thread still shutting down keeps its index);
- `statestore.cache.max.bytes` is divided evenly among the live threads (neither asked to stop nor
  dead) and the global thread when the topology has one, re-divided whenever a thread comes or goes;
- the thread removed is the oldest live one (Kafka's list order; Kafka leaves the choice unspecified).
A thread that fails to start is a dead thread; the registry counts such failures in a row, which
bound REPLACE_THREAD's immediate replacements (`gives_up`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError
from streams_core.runtime.threads.instance_thread import InstanceThread, ThreadFactory
from streams_core.runtime.threads.thread_metadata import ThreadMetadata
from streams_core.runtime.threads.thread_state import ThreadState
from streams_core.state.internals.thread_cache import ThreadCache

__all__ = ["StreamThreads"]

log = logging.getLogger(__name__)

_NOT_LIVE = frozenset({ThreadState.PENDING_SHUTDOWN, ThreadState.DEAD})

MAX_FAILED_STARTS = 5
"""Thread starts that may fail in a row (no start succeeding in between) before REPLACE_THREAD gives up."""


class StreamThreads:
    """The instance's stream threads (in-process or worker processes) in the order they were added, made by its `ThreadFactory`."""

    __slots__ = ("_config", "_factory", "_global_share", "_threads", "_total_cache_bytes", "failed_starts", "global_cache")

    def __init__(self, factory: ThreadFactory, config: StreamsConfig, *, global_thread: bool) -> None:
        """`global_thread`: the topology has global stores, whose thread takes a share of the cache."""
        self._factory = factory
        self._config = config
        self._total_cache_bytes: int = config["statestore.cache.max.bytes"]
        self._global_share = 1 if global_thread else 0
        self._threads: list[InstanceThread] = []
        self.global_cache: ThreadCache | None = None
        """The global thread's cache, once it exists: resized with the stream threads'."""
        self.failed_starts = 0
        """Thread starts that failed since the last one that succeeded."""

    def all(self) -> list[InstanceThread]:
        """Every thread not yet trimmed (dead ones included until an index is needed), by index."""
        return sorted(self._threads, key=lambda t: t.index)

    def live(self) -> list[InstanceThread]:
        """The threads that count for the cache: neither asked to stop nor shutting down or dead."""
        return [t for t in self._threads if not t.stopping and t.state not in _NOT_LIVE]

    def next_index(self) -> int:
        """The lowest index no thread holds, after trimming the dead threads (Kafka's `nextThreadIndex`)."""
        self._threads = [t for t in self._threads if t.state is not ThreadState.DEAD]
        taken = {t.index for t in self._threads}
        return next(i for i in range(1, len(taken) + 2) if i not in taken)

    def cache_size_per_thread(self, threads: int) -> int:
        """Each thread's share of `statestore.cache.max.bytes` among `threads` stream threads and the global
        thread (Kafka's `cacheSizePerThread`: all of it without stream threads)."""
        return self._total_cache_bytes if threads == 0 else self._total_cache_bytes // (threads + self._global_share)

    def add(self) -> InstanceThread:
        """Make a thread (not started) with the lowest free index, and shrink the others' caches to make room."""
        index = self.next_index()
        live = len(self.live()) + 1
        size = self.cache_size_per_thread(live)
        log.info(
            "Adding StreamThread-%d, there will now be %d live threads and the new cache size per thread is %d",
            index, live, size,
        )
        self._resize(size)
        thread = self._factory.create(index, size)
        self._threads.append(thread)
        return thread

    async def start(
        self, thread: InstanceThread, on_failure: Callable[[InstanceThread, Exception], InstanceThread | None]
    ) -> InstanceThread | None:
        """Start a thread made by `add`; the thread that started, or None. One that fails or dies while
        starting is DEAD, gives its cache share back and counts towards `failed_starts`; `on_failure`
        (the uncaught-exception handler's response) may give a replacement to start in its place."""
        current: InstanceThread | None = thread
        while current is not None:
            try:
                await current.start()
            except Exception as exc:
                self.failed_starts += 1
                log.warning("%s failed to start (%d in a row): %r", current.name, self.failed_starts, exc)
                self.resize_caches()
                current = on_failure(current, exc)
                continue
            self.failed_starts = 0
            return current
        return None

    def gives_up(self, name: str, error: BaseException) -> StreamsError | None:
        """The error that ends the client once `MAX_FAILED_STARTS` starts failed in a row (`error` the
        last, of thread `name`): a thread that can never start (a broken install, an import error) is
        not replaced over and over. None while a replacement may still start."""
        if self.failed_starts < MAX_FAILED_STARTS:
            return None
        gave_up = StreamsError(f"{name}: {self.failed_starts} stream thread starts in a row failed, the last with {error!r}")
        gave_up.__cause__ = error
        return gave_up

    async def remove(self, timeout: float | None) -> str | None:
        """Stop the oldest running thread and forget it; its name, or None without a running thread.

        The cache is re-divided as soon as it is asked to stop. TimeoutError when it has not stopped
        within `timeout` seconds: it goes on shutting down, holding its index until it is dead.
        """
        thread = next((t for t in self._threads if t.alive and not t.stopping and t.state not in _NOT_LIVE), None)
        if thread is None:
            log.warning("There are no threads eligible for removal")
            return None
        log.info("Removing StreamThread %s", thread.name)
        thread.shutdown()
        self.resize_caches()
        _done, pending = await asyncio.wait({asyncio.ensure_future(thread.stop())}, timeout=timeout)
        if pending:
            log.warning("%s did not shut down in the allotted time (%s s)", thread.name, timeout)
            raise TimeoutError(f"stream thread {thread.name} did not stop within {timeout} s")
        self._threads = [t for t in self._threads if t is not thread]
        return thread.name

    def resize_caches(self) -> None:
        """Re-divide the cache among the live threads (one was asked to stop, or died starting)."""
        size = self.cache_size_per_thread(len(self.live()))
        log.info("Resizing thread cache due to thread removal, new cache size per thread is %d", size)
        self._resize(size)

    def _resize(self, size: int) -> None:
        for thread in self.live():
            thread.resize_cache(size)
        if self.global_cache is not None:  # safe at once: global stores have no changelog and no commit
            self.global_cache.resize(size)

    def metadata(self) -> set[ThreadMetadata]:
        """`ThreadMetadata` of every thread not DEAD (Kafka's `metadataForLocalThreads`)."""
        return {t.metadata() for t in self._threads if t.state is not ThreadState.DEAD}
