"""StreamsRebalanceListener: the main consumer's rebalance callbacks, handed to the stream thread.

Kafka Streams' `StreamsRebalanceListener`. The group rebalances eagerly (aiokafka revokes every
partition each time): on revocation the thread commits and closes its tasks, then, before the
consumer joins again, refreshes the changelog end offsets the assignor needs if this member
leads; on assignment it creates the new tasks.
"""

from __future__ import annotations

from typing import Protocol

from streams_core.runtime.topic_partition import TopicPartition

__all__ = ["RebalanceHandler", "StreamsRebalanceListener"]


class RebalanceHandler(Protocol):
    """The stream thread, as the listener sees it."""

    async def on_partitions_revoked(self) -> None: ...

    async def refresh_changelog_end_offsets(self) -> None: ...

    async def on_partitions_assigned(self) -> None: ...


class StreamsRebalanceListener:
    """The main consumer's `RebalanceListener` (clients/ports.py)."""

    __slots__ = ("_thread",)

    def __init__(self, thread: RebalanceHandler) -> None:
        self._thread = thread

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        await self._thread.on_partitions_revoked()
        await self._thread.refresh_changelog_end_offsets()

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        await self._thread.on_partitions_assigned()
