"""KafkaStreams' client state: Kafka Streams' state machine, its listener and who waits for it.

`ClientStateMachine` applies Kafka Streams' transition rules (NOT_RUNNING and ERROR are final;
from PENDING_SHUTDOWN or PENDING_ERROR only to a final state), calls the state listener with
(new, old) on the event loop, wakes `wait_for` callers, and derives RUNNING or REBALANCING from
the stream threads' states (`follow_threads`).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Iterable

from streams_core.runtime.threads.thread_state import ThreadState

__all__ = ["ClientStateMachine", "State", "StateListener"]

log = logging.getLogger("streams_core.runtime.kafka_streams")  # the client's own lines, under its logger as before


class State(enum.Enum):
    """Kafka Streams' client states."""

    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    PENDING_ERROR = "PENDING_ERROR"
    ERROR = "ERROR"

    def is_running_or_rebalancing(self) -> bool:
        return self in (State.RUNNING, State.REBALANCING)


StateListener = Callable[[State, State], None]

_REBALANCING_THREAD_STATES = frozenset(
    {ThreadState.CREATED, ThreadState.STARTING, ThreadState.PARTITIONS_REVOKED, ThreadState.PARTITIONS_ASSIGNED}
)


class ClientStateMachine:
    """The state of one KafkaStreams client; `on_final` runs once it reaches NOT_RUNNING or ERROR."""

    def __init__(self, application_id: str, on_final: Callable[[], None]) -> None:
        self.state = State.CREATED
        self.listener: StateListener | None = None
        self._application_id = application_id
        self._on_final = on_final
        self._changed = asyncio.Condition() if _has_loop() else None

    def bind_loop(self) -> None:
        """Make the condition `wait_for` waits on, when the client was built outside an event loop."""
        if self._changed is None:
            self._changed = asyncio.Condition()

    def set(self, new: State) -> None:
        """Move to `new` if Kafka Streams' rules allow it (else stay), then tell the listener and waiters."""
        old = self.state
        if old is new or old in (State.NOT_RUNNING, State.ERROR):
            return
        if old in (State.PENDING_SHUTDOWN, State.PENDING_ERROR) and new not in (State.NOT_RUNNING, State.ERROR):
            return
        self.state = new
        log.info("stream-client [%s] state %s -> %s", self._application_id, old.name, new.name)
        if new in (State.NOT_RUNNING, State.ERROR):
            self._on_final()
        if self.listener is not None:
            try:
                self.listener(new, old)
            except Exception:
                log.exception("state listener failed")
        self._notify()

    def _notify(self) -> None:
        condition = self._changed
        if condition is None:
            return

        async def wake() -> None:
            async with condition:
                condition.notify_all()

        asyncio.get_running_loop().create_task(wake())

    async def wait_for(self, states: Iterable[State], timeout: float) -> State:
        """Wait until the state is one of `states`; TimeoutError after `timeout` seconds."""
        assert self._changed is not None
        wanted = frozenset(states)
        async with asyncio.timeout(timeout):
            async with self._changed:
                await self._changed.wait_for(lambda: self.state in wanted)
        return self.state

    def follow_threads(self, states: Iterable[ThreadState]) -> None:
        """Kafka Streams' rule: RUNNING once each thread runs or is dead (a removed one stopping holds
        none back), REBALANCING while one is starting or between partitions revoked and assigned."""
        if not self.state.is_running_or_rebalancing():
            return
        live = [s for s in states if s is not ThreadState.DEAD]
        running = ThreadState.RUNNING in live
        if any(s in _REBALANCING_THREAD_STATES for s in live):
            self.set(State.REBALANCING)
        elif all(s is ThreadState.RUNNING or (s is ThreadState.PENDING_SHUTDOWN and running) for s in live):
            self.set(State.RUNNING)


def _has_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
