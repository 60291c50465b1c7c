"""SHUTDOWN_APPLICATION: ask every member of the group to shut down.

A consumer joins the group once with `shutdown_requested` in its subscription; the leader's
assignment then carries SHUTDOWN_REQUESTED to every member, whose threads end with
ShutdownRequestedError.
"""

from __future__ import annotations

import asyncio
import logging

from streams_core import clients
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.runtime.assignment.streams_partition_assignor import StreamsPartitionAssignor, TaskStates
from streams_core.runtime.topology_metadata import TopologyMetadata

__all__ = ["broadcast_shutdown_request"]

log = logging.getLogger(__name__)


class _Listener:
    def __init__(self) -> None:
        self.answered = asyncio.Event()

    async def on_partitions_revoked(self, revoked: frozenset[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: frozenset[TopicPartition]) -> None:
        self.answered.set()


async def broadcast_shutdown_request(
    config: StreamsConfig,
    client_supplier: clients.KafkaClientSupplier,
    metadata: TopologyMetadata,
    process_id: str,
    *,
    timeout: float = 60.0,
) -> None:
    """Join once with the shutdown flag set and wait for the answering assignment."""
    application_id = metadata.application_id
    assignor = StreamsPartitionAssignor(
        metadata,
        process_id=process_id,
        application_server=config["application.server"],
        num_standby_replicas=config["num.standby.replicas"],
        task_states=TaskStates,
    )
    assignor.shutdown_requested = True
    listener = _Listener()
    consumer = client_supplier.get_main_consumer(config, assignor=assignor, client_id=f"{application_id}-shutdown-request")
    consumer.subscribe(sorted(metadata.source_topics), listener)
    await consumer.start()
    try:
        async with asyncio.timeout(timeout):
            while not listener.answered.is_set():
                await consumer.getmany(timeout_ms=200)
        log.info("stream-client [%s] asked every member to shut down", application_id)
    finally:
        await consumer.stop()
