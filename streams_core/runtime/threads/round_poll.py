"""RoundPoll: a loop round's poll, up to `max.poll.records` from each partition in turn.

aiokafka's `getmany(max_records=n)` drains its buffered fetches partition after partition, so a
round took its n records from one partition, and the records it produced went to few partitions.
aiokafka's producer queues one batch per partition and keeps one request in flight per broker,
so such a round's batches went out one request each, a round trip apart. Polling each partition
in turn gives a round the records of every partition that has some, and a produce request a
batch of each (bench/LOG.md, "Every partition polled each round").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from time import perf_counter
from typing import Any, Protocol

from streams_core.common.topic_partition import TopicPartition

__all__ = ["RoundPoll"]


class PolledConsumer(Protocol):
    """The consumer, as a round's poll sees it."""

    def assignment(self) -> frozenset[TopicPartition]: ...

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> Mapping[TopicPartition, Sequence[Any]]: ...


class RoundPoll:
    """Polls every assigned partition once a round, from a different first partition each round."""

    __slots__ = ("_consumer", "_first", "_max_records", "_slice_s")

    def __init__(self, consumer: PolledConsumer, *, max_records: int, slice_s: float) -> None:
        self._consumer = consumer
        self._max_records = max_records
        self._slice_s = slice_s
        self._first = 0

    async def poll(self, timeout_ms: int) -> dict[TopicPartition, Sequence[Any]]:
        """Up to `max_records` records of each partition that has some, in turn, until `slice_s`
        has passed (the next round starts one partition further, so none waits behind the others
        for long); when no partition has any, wait up to `timeout_ms` for records of any."""
        consumer = self._consumer
        partitions = sorted(consumer.assignment())
        batch: dict[TopicPartition, Sequence[Any]] = {}
        count = len(partitions)
        if count:
            first = self._first = (self._first + 1) % count
            deadline = perf_counter() + self._slice_s
            getmany, max_records = consumer.getmany, self._max_records
            for step in range(count):
                polled = await getmany(partitions[(first + step) % count], max_records=max_records)
                if polled:
                    batch.update(polled)
                    if perf_counter() >= deadline:
                        break
        if batch or not timeout_ms:
            return batch
        return dict(await consumer.getmany(timeout_ms=timeout_ms, max_records=self._max_records))
