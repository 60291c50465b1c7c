"""ThreadClients: one stream thread's Kafka clients and the two objects that read and write through them.

Made by the thread factory (`create`), started by the thread before its loop (`start`) and
stopped after it (`stop`): the main consumer in the group `application.id` (its assignor makes
the subscription and the assignment), the thread's producer with its record collector, and the
restore consumer with its changelog reader (restores and standby updates).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from streams_core import clients
from streams_core.clients.streams_group_consumer import StreamsGroupConsumer
from streams_core.config import StreamsConfig
from streams_core.runtime.restore.store_changelog_reader import StoreChangelogReader
from streams_core.runtime.tasks.record_collector_impl import RecordCollectorImpl

__all__ = ["ThreadClients"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ThreadClients:
    """The clients of one stream thread (created, not started, by `create`)."""

    consumer: clients.Consumer
    producer: clients.Producer
    """The thread's producer (every task's under at-least-once)."""
    restore_consumer: clients.Consumer
    collector: RecordCollectorImpl
    """The thread producer's collector."""
    changelog_reader: StoreChangelogReader

    @classmethod
    def create(
        cls,
        supplier: clients.KafkaClientSupplier,
        config: StreamsConfig,
        assignor: clients.GroupAssignor,
        *,
        thread_index: int,
        log_prefix: str = "",
    ) -> ThreadClients:
        producer = supplier.get_producer(config, thread_index=thread_index)
        restore_consumer = supplier.get_restore_consumer(config, thread_index=thread_index)
        consumer = supplier.get_main_consumer(config, assignor=assignor, thread_index=thread_index)
        # a streams group member's poll timer counts restored records as polls (restoring runs in its callback)
        on_progress = consumer.member.restored if isinstance(consumer, StreamsGroupConsumer) else None
        return cls(
            consumer=consumer,
            producer=producer,
            restore_consumer=restore_consumer,
            collector=RecordCollectorImpl(
                producer, production_handler=config["default.production.exception.handler"], log_prefix=log_prefix
            ),
            changelog_reader=StoreChangelogReader(restore_consumer, log_prefix=log_prefix, on_progress=on_progress),
        )

    async def start(self) -> None:
        """Start the producer and the restore consumer (the main consumer starts once subscribed)."""
        await self.producer.start()
        await self.restore_consumer.start()

    async def stop(self, log_prefix: str = "") -> None:
        """Stop the producer, the restore consumer and the main consumer (it leaves the group);
        a client that fails to stop is logged and the others are still stopped."""
        for client in (self.producer, self.restore_consumer, self.consumer):
            try:
                await client.stop()
            except Exception:
                log.exception("%sstopping a client failed", log_prefix)
