"""RoundPoll: a round takes records of every partition that has some, not max.poll.records of the first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.threads.round_poll import RoundPoll

A, B, C = (TopicPartition("in", p) for p in range(3))


class Buffered:
    """A consumer whose fetched records wait per partition, as aiokafka's do; records the calls."""

    def __init__(self, records: dict[TopicPartition, list[int]]) -> None:
        self.records = records
        self.calls: list[tuple[tuple[TopicPartition, ...], int, int | None]] = []

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(self.records)

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> Mapping[TopicPartition, Sequence[Any]]:
        self.calls.append((partitions, timeout_ms, max_records))
        out: dict[TopicPartition, Sequence[Any]] = {}
        left = max_records or 10**9
        for tp in partitions or sorted(self.records):  # like aiokafka: the first partition's first
            taken, self.records[tp] = self.records[tp][:left], self.records[tp][left:]
            if taken:
                out[tp] = taken
                left -= len(taken)
            if not left:
                break
        return out


async def test_a_round_takes_up_to_max_records_of_every_partition() -> None:
    consumer = Buffered({A: list(range(5)), B: list(range(5)), C: []})
    batch = await RoundPoll(consumer, max_records=3, slice_s=1.0).poll(100)
    assert batch == {A: [0, 1, 2], B: [0, 1, 2]}
    assert sorted(partitions for partitions, _, _ in consumer.calls) == [(A,), (B,), (C,)]
    assert all(timeout == 0 and limit == 3 for _, timeout, limit in consumer.calls)


async def test_each_round_starts_one_partition_further() -> None:
    consumer = Buffered({A: list(range(10)), B: list(range(10)), C: list(range(10))})
    poll = RoundPoll(consumer, max_records=1, slice_s=0.0)  # the slice is spent after the first partition with records
    firsts = [next(iter(await poll.poll(0))) for _ in range(4)]
    assert firsts == [B, C, A, B]


async def test_waits_for_any_partition_only_when_none_has_records() -> None:
    consumer = Buffered({A: [], B: []})
    assert await RoundPoll(consumer, max_records=5, slice_s=1.0).poll(100) == {}
    assert consumer.calls[-1] == ((), 100, 5)
    consumer.calls.clear()
    assert await RoundPoll(consumer, max_records=5, slice_s=1.0).poll(0) == {}
    assert all(timeout == 0 for _, timeout, _ in consumer.calls)


async def test_no_assignment_waits_out_the_timeout_on_the_consumer() -> None:
    consumer = Buffered({})
    assert await RoundPoll(consumer, max_records=5, slice_s=1.0).poll(50) == {}
    assert consumer.calls == [((), 50, 5)]
