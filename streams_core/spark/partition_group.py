"""PartitionGroup's choice across micro-batches: which of a task's records run now, which wait.

Kafka Streams' task takes the head record with the lowest timestamp across its partitions, and
when one of its partitions is empty while the consumer knows it has unread data (fetched lag
above zero), the task waits for it, whatever `max.task.idle.ms` says (`PartitionGroup
.readyToProcess`). So a stream record meets the table as of its timestamp, however the fetches
were cut. Spark cuts its input into micro-batches (`maxOffsetsPerTrigger`) by offsets, not time:
without the wait, an order could reach the join before its customer, read in a later batch.

`take_ready` applies the rule to the records a task stage holds plus a micro-batch's records:
it returns the records that run now, in the task's order, and keeps the rest, to be taken with
the next micro-batch. "Known to have unread data" is a partition whose last record when the run
started (`waits`, found by the runner) has not been read yet.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from streams_core.spark.subtopology_executor import InputRow, event_time

__all__ = ["TopicPartitionKey", "take_ready"]

TopicPartitionKey = tuple[str, int]
"""(topic, partition)."""


def take_ready(
    held: Iterable[InputRow],
    rows: Iterable[InputRow],
    read: dict[TopicPartitionKey, int],
    waits: Mapping[TopicPartitionKey, int],
) -> tuple[list[InputRow], list[InputRow]]:
    """(the records to process now in PartitionGroup's order, the records to hold).

    `held`: records held by the previous micro-batch; `rows`: this micro-batch's records of the
    task; `read` (updated): the highest offset read per partition so far; `waits`: per partition
    of the task, the offset of its last record when the run started. Processing stops as soon as
    a partition whose queue is empty has unread data (`read` below its `waits` entry).
    """
    queues: dict[TopicPartitionKey, list[InputRow]] = {}
    for row in held:
        queues.setdefault((row.topic, row.partition), []).append(row)
    for row in rows:
        tp = (row.topic, row.partition)
        queues.setdefault(tp, []).append(row)
        if row.offset > read.get(tp, -1):
            read[tp] = row.offset
    unread = {tp for tp, last in waits.items() if read.get(tp, -1) < last}
    if unread.difference(queues):
        return [], [row for queue in queues.values() for row in sorted(queue, key=lambda r: r.offset)]
    ordered = [sorted(queue, key=lambda r: r.offset) for queue in queues.values()]
    keys = list(queues)
    heads = [(event_time(queue[0]), i, 0) for i, queue in enumerate(ordered)]
    heapq.heapify(heads)
    ready: list[InputRow] = []
    while heads:
        _, i, at = heapq.heappop(heads)
        queue = ordered[i]
        ready.append(queue[at])
        at += 1
        if at < len(queue):
            heapq.heappush(heads, (event_time(queue[at]), i, at))
        elif keys[i] in unread:
            break  # the task waits for this partition's next records
    rest: list[InputRow] = []
    for _, i, at in sorted(heads, key=lambda head: head[1]):
        rest.extend(ordered[i][at:])
    return ready, rest
