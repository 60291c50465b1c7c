"""StreamThreadFactory: builds a stream thread and every part it runs with (Kafka Streams' `StreamThread.create`).

A thread is made whole before it starts: its clients (created here, started by `StreamThread.start`),
the processing guarantee, the task manager with its flow control and dead-letter sink, the
standby updater, the run mode's thread side, the assignor and the metrics. The parts refer to
each other in one cycle, as in Kafka Streams (the consumer needs the assignor, the assignor asks
the task manager for the task states, the task manager's guarantee commits through the consumer),
closed here by two callbacks that name parts made later in `create`.

The instance's thread registry (`StreamThreads`) calls `create(index, cache_max_bytes)` for each
of its threads: at start, for KIP-663's `add_stream_thread` and for a REPLACE_THREAD
replacement; what the factory holds is the instance's, shared by its threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from streams_core import clients
from streams_core.common.store import StateStore
from streams_core.config import StreamsConfig
from streams_core.processor.internals.record_deserializer import resolve_deserialization_handler
from streams_core.runtime.assignment.streams_partition_assignor import StreamsPartitionAssignor
from streams_core.runtime.autostop.run_end import RunEnd
from streams_core.runtime.restore.standby_updater import StandbyUpdater
from streams_core.runtime.tasks.dead_letter_sink import DeadLetterSink
from streams_core.runtime.tasks.flow_control import FlowControl
from streams_core.runtime.tasks.processing_guarantee import processing_guarantee
from streams_core.runtime.tasks.task_manager import TaskManager
from streams_core.runtime.threads.instance_thread import ThreadCallbacks
from streams_core.runtime.threads.stream_thread import StreamThread
from streams_core.runtime.threads.thread_clients import ThreadClients
from streams_core.runtime.threads.thread_metrics import ThreadMetrics
from streams_core.runtime.topology_metadata import TopologyMetadata

__all__ = ["StreamThreadFactory"]


class StreamThreadFactory:
    """Makes the stream threads of one KafkaStreams instance."""

    __slots__ = ("_callbacks", "_clients", "_config", "_global_stores", "_process_id", "_run_end", "_topology")

    def __init__(
        self,
        topology: TopologyMetadata,
        config: StreamsConfig,
        *,
        process_id: str,
        client_supplier: clients.KafkaClientSupplier,
        global_stores: Callable[[], Mapping[str, StateStore]],
        run_end: RunEnd,
        callbacks: ThreadCallbacks,
    ) -> None:
        self._topology = topology
        self._config = config
        self._process_id = process_id
        self._clients = client_supplier
        self._global_stores = global_stores
        self._run_end = run_end
        self._callbacks = callbacks

    def create(self, index: int, cache_max_bytes: int) -> StreamThread:
        """A new thread `<application.id>-StreamThread-<index>`, in state CREATED (not started), whose
        record cache holds `cache_max_bytes` (its share of `statestore.cache.max.bytes`)."""
        config, topology, supplier = self._config, self._topology, self._clients
        name = f"{config['application.id']}-StreamThread-{index}"
        log_prefix = f"stream-thread [{name}] "
        thread: StreamThread
        task_manager: TaskManager
        assignor = StreamsPartitionAssignor(
            topology,
            process_id=self._process_id,
            application_server=config["application.server"],
            num_standby_replicas=config["num.standby.replicas"],
            task_states=lambda: task_manager.task_states(),
            acceptable_recovery_lag=config["acceptable.recovery.lag"],
            max_warmup_replicas=config["max.warmup.replicas"],
            probing_rebalance_interval_ms=config["probing.rebalance.interval.ms"],
            request_rebalance=lambda: thread.request_probing_rebalance(),
            log_prefix=log_prefix,
            replication_factor=config["replication.factor"],
            window_additional_retention_ms=config["windowstore.changelog.additional.retention.ms"],
            topic_defaults=config.topic_configs(),
            rebalance_timeout_ms=int(config.client_overrides("main.consumer").get("max.poll.interval.ms", 300_000)),
        )
        kafka_clients = ThreadClients.create(supplier, config, assignor, thread_index=index, log_prefix=log_prefix)
        consumer, collector = kafka_clients.consumer, kafka_clients.collector
        guarantee = processing_guarantee(
            config,
            collector,
            consumer,
            lambda transactional_id: supplier.get_producer(config, transactional_id=transactional_id, thread_index=index),
            log_prefix=log_prefix,
        )
        dead_letters = DeadLetterSink(collector, config["errors.dead.letter.queue.topic.name"])
        task_manager = TaskManager(
            topology,
            config,
            guarantee,
            kafka_clients.changelog_reader,
            flow_control=FlowControl.for_config(consumer, config, log_prefix=log_prefix),
            deserialization_handler=resolve_deserialization_handler(
                config["default.deserialization.exception.handler"], dead_letters.send
            ),
            global_stores=self._global_stores,
            cache_max_bytes=cache_max_bytes,
            log_prefix=log_prefix,
        )
        on_batch_finished = self._callbacks.on_batch_finished
        run_end = self._run_end.for_thread(
            consumer, topology, thread_name=name, on_finished=lambda: on_batch_finished(thread), log_prefix=log_prefix
        )
        thread = StreamThread(
            index,
            name,
            topology,
            config,
            kafka_clients=kafka_clients,
            assignor=assignor,
            task_manager=task_manager,
            guarantee=guarantee,
            standbys=StandbyUpdater(kafka_clients.changelog_reader, task_manager),
            run_end=run_end,
            metrics=ThreadMetrics(task_manager, collector, dead_letters, run_end, consumer.highwater),
            callbacks=self._callbacks,
        )
        return thread
