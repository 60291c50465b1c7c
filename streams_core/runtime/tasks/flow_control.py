"""FlowControl: pauses the consumer's partitions whose task buffers are full or run ahead in time.

Kafka Streams pauses a partition once its queue holds `buffered.records.per.partition` records
and resumes it when the queue drained; ours also pauses a partition whose partition time runs
more than `max.partition.time.lag.ms` ahead of its task's stream time. Each task decides for its
own partitions (with hysteresis, docs/runtime.md "Flow control"); this module applies the
decisions to the consumer once per loop round and counts them for the metrics. It also hands the
tasks the consumer's lag per partition (`lag_provider`), by which `max.task.idle.ms` waits for
records not fetched yet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig

__all__ = ["FlowControl", "FlowControlled", "Pausable"]

log = logging.getLogger(__name__)


class Pausable(Protocol):
    """The consumer, as flow control sees it."""

    def pause(self, *partitions: TopicPartition) -> None: ...

    def resume(self, *partitions: TopicPartition) -> None: ...

    def current_lag(self, partition: TopicPartition) -> int | None: ...


class FlowControlled(Protocol):
    """A task, as flow control sees it: which of its partitions to pause or resume now."""

    def partitions_to_pause(self, buffered_limit: int, max_lag_ms: int) -> list[TopicPartition]: ...

    def partitions_to_resume(self, buffered_limit: int, max_lag_ms: int) -> list[TopicPartition]: ...


class FlowControl:
    """Applies the tasks' pause and resume decisions to one consumer."""

    __slots__ = ("_buffered_limit", "_consumer", "_log_prefix", "_max_lag_ms", "pause_count", "resume_count")

    def __init__(self, consumer: Pausable, *, buffered_limit: int, max_lag_ms: int, log_prefix: str = "") -> None:
        self._consumer = consumer
        self._buffered_limit = buffered_limit
        self._max_lag_ms = max_lag_ms
        self._log_prefix = log_prefix
        self.pause_count = 0
        """Partitions paused so far, over every task the consumer served."""
        self.resume_count = 0

    @property
    def lag_provider(self) -> Callable[[TopicPartition], int | None]:
        """The consumer's `current_lag`, for the tasks' `max.task.idle.ms` (Kafka passes its tasks
        `mainConsumer::currentLag`)."""
        return self._consumer.current_lag

    @classmethod
    def for_config(cls, consumer: Pausable, config: StreamsConfig, *, log_prefix: str = "") -> FlowControl:
        """With `buffered.records.per.partition` and `max.partition.time.lag.ms`."""
        return cls(
            consumer,
            buffered_limit=config["buffered.records.per.partition"],
            max_lag_ms=config["max.partition.time.lag.ms"],
            log_prefix=log_prefix,
        )

    def apply(self, tasks: Iterable[FlowControlled]) -> None:
        """Pause what the tasks want paused and resume what they want resumed."""
        limit, max_lag = self._buffered_limit, self._max_lag_ms
        to_pause: list[TopicPartition] = []
        to_resume: list[TopicPartition] = []
        for task in tasks:
            to_pause += task.partitions_to_pause(limit, max_lag)
            to_resume += task.partitions_to_resume(limit, max_lag)
        if to_pause:
            self._consumer.pause(*to_pause)
            self.pause_count += len(to_pause)
            log.debug("%spaused %s", self._log_prefix, to_pause)
        if to_resume:
            self._consumer.resume(*to_resume)
            self.resume_count += len(to_resume)
            log.debug("%sresumed %s", self._log_prefix, to_resume)
