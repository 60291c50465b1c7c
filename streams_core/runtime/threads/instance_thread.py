"""InstanceThread: a stream thread as its instance drives it, in this process or in a worker process.

`StreamThread` (an asyncio task on the instance's loop, `stream.threads.mode=inline`) and
`WorkerThread` (a worker process, `stream.threads.mode=process`) both satisfy it, so the
instance's thread registry (`StreamThreads`), its state machine and its store provider are the
same in both modes. `ThreadCallbacks` is what a thread tells its instance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from streams_core.runtime.assignment import AssignmentInfo
from streams_core.runtime.queries.state_store_providers import ThreadStoreProvider
from streams_core.runtime.threads.thread_metadata import ThreadMetadata
from streams_core.runtime.threads.thread_state import ThreadState

__all__ = ["InstanceThread", "ThreadCallbacks", "ThreadFactory"]


class InstanceThread(Protocol):
    """What the instance starts, stops and reads of each of its stream threads."""

    index: int
    name: str
    state: ThreadState

    @property
    def store_provider(self) -> ThreadStoreProvider: ...

    @property
    def stopping(self) -> bool: ...

    @property
    def alive(self) -> bool: ...

    @property
    def batch_finished(self) -> bool: ...

    @property
    def assignment(self) -> AssignmentInfo | None: ...

    async def prepare(self) -> None:
        """Do the slow part of starting before `start` (a worker's process); threads started together
        are prepared first, so they join the group together."""
        ...

    async def start(self) -> None: ...

    def shutdown(self) -> None: ...

    async def stop(self) -> None: ...

    async def kill(self) -> None: ...

    async def resubscribe(self) -> None: ...

    def resize_cache(self, max_bytes: int) -> None: ...

    def metadata(self) -> ThreadMetadata: ...

    def metrics(self) -> dict[str, Any]: ...


class ThreadFactory(Protocol):
    """Makes the instance's threads: `create(index, cache_max_bytes)`, not started."""

    def create(self, index: int, cache_max_bytes: int) -> InstanceThread: ...


@dataclass(frozen=True, slots=True)
class ThreadCallbacks:
    """What a thread tells its instance: state changes, a new assignment, its death, a finished batch."""

    on_state_change: Callable[[InstanceThread, ThreadState, ThreadState], None]
    on_assignment: Callable[[InstanceThread], None]
    on_error: Callable[[InstanceThread, BaseException], None]
    on_batch_finished: Callable[[InstanceThread], None]
