"""The fake cluster's journal and wake-ups: every step it sees is an event; every change wakes readers.

Tests assert orders on `events` (a produce before a commit, a flush before a transaction's
commit); waiting consumers sleep on one event that `notify()` replaces, so a fetch waits without
spinning. The bottom layer of `FakeKafkaCluster`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ClusterEvent", "ClusterEvents"]


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """One step the cluster saw: `kind` (produce, commit, txn_commit, rebalance...), the client, details."""

    kind: str
    client: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.detail[key]


class ClusterEvents:
    """The event journal and the change signal every other layer of the fake cluster writes to."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()
        self.events: list[ClusterEvent] = []
        """Every produce, offset commit, transaction step and rebalance, in order."""

    def log_event(self, kind: str, client: str, **detail: Any) -> None:
        """Append an event (tests may add their own, e.g. a store flush, to assert orders with them)."""
        self.events.append(ClusterEvent(kind, client, detail))

    def kinds(self, *kinds: str) -> list[str]:
        """The kinds of the events, in order (only `kinds` when given)."""
        return [e.kind for e in self.events if not kinds or e.kind in kinds]

    def events_of(self, *kinds: str) -> list[ClusterEvent]:
        return [e for e in self.events if e.kind in kinds]

    def notify(self) -> None:
        """Wake every waiting getmany (data, markers, assignment or pause changed)."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_for_change(self, timeout: float) -> None:
        """Wait until `notify()` or `timeout` seconds (no busy loop)."""
        if timeout <= 0:
            return
        event = self._changed
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            pass
