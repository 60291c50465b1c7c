"""ThreadState: Kafka Streams' `StreamThread.State`.

Its own module because both the thread and its rebalance listener set it.
"""

from __future__ import annotations

import enum

__all__ = ["ThreadState"]


class ThreadState(enum.Enum):
    """Kafka Streams' StreamThread states."""

    CREATED = "CREATED"
    STARTING = "STARTING"
    PARTITIONS_REVOKED = "PARTITIONS_REVOKED"
    PARTITIONS_ASSIGNED = "PARTITIONS_ASSIGNED"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    DEAD = "DEAD"
