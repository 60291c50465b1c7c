"""High-availability task assignment (KIP-441) against the real broker (issue 14, item 3).

(a) A rolling start of three instances spreads every stateful sub-topology over all of them.
(b) A new instance joining a run with a large changelog gets warm-up replicas first and takes
    active tasks only once they caught up (after a short probing interval), while processing
    never stalls for longer than one probing interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from functools import partial
from pathlib import Path

import pytest

from streams_core import KafkaStreams, Serdes, Stores, TaskId, Topology
from tests.integration.group_protocol import ASSIGNMENT_IS_THE_BROKERS, classic_only
from tests.integration.streams_testkit import (
    CountingProcessor,
    RecordSender,
    StreamsApp,
    instance_tasks,
    metric_total,
    tasks_of,
    wait_until,
)
from tests.kafka_utils import Rec, create_topic, produce, unique_topic

pytestmark = pytest.mark.broker


def add_counter(topology: Topology, name: str, source: str, sink: str) -> Topology:
    """source -> counting processor with a logged key-value store `name` -> sink: one stateful sub-topology."""
    store = Stores.key_value_store_builder(Stores.persistent_key_value_store(name), Serdes.Bytes(), Serdes.Long())
    return (
        topology.add_source(f"{name}-SOURCE", source)
        .add_processor(f"{name}-COUNT", partial(CountingProcessor, name), f"{name}-SOURCE")
        .add_state_store(store, f"{name}-COUNT")
        .add_sink(f"{name}-SINK", sink, f"{name}-COUNT")
    )


def standby_tasks(streams: KafkaStreams) -> frozenset[TaskId]:
    return frozenset(t for thread in streams.threads if thread.task_manager for t in thread.task_manager.standby_tasks)


def keyed(prefix: str, count: int) -> list[tuple[bytes, bytes]]:
    return [(f"{prefix}-{i:06d}".encode(), b"v") for i in range(count)]


async def test_rolling_start_spreads_every_stateful_subtopology(bootstrap_servers: str, tmp_path: Path) -> None:
    left, right, sink = unique_topic("ha-left"), unique_topic("ha-right"), unique_topic("ha-out")
    for topic in (left, right, sink):
        await create_topic(bootstrap_servers, topic, 3)
    await produce(bootstrap_servers, left, keyed("l", 300))
    await produce(bootstrap_servers, right, keyed("r", 300))
    all_tasks = tasks_of(3, 0) | tasks_of(3, 1)

    def topology() -> Topology:
        return add_counter(add_counter(Topology(), "left", left, sink), "right", right, sink)

    async with StreamsApp(bootstrap_servers, tmp_path, topology) as app:
        first = await app.start(0)
        await app.wait_settled(all_tasks)
        await wait_until(lambda: metric_total(first, "processed_records") >= 600, 30, message="first instance processing")
        for size in (2, 3):
            await app.start(size - 1)
            tasks = await app.wait_settled(all_tasks)
            for subtopology in (0, 1):
                spread = {i: sorted(t.partition for t in ts if t.subtopology == subtopology) for i, ts in tasks.items()}
                assert all(spread.values()), f"{size} instances: sub-topology {subtopology} not on every one: {spread}"
        await app.close_all()
    assert all(s.errors == [] for s in app.started)


@pytest.mark.slow
@classic_only(ASSIGNMENT_IS_THE_BROKERS)
async def test_scale_out_warms_up_before_taking_over(bootstrap_servers: str, tmp_path: Path) -> None:
    source, sink = unique_topic("ha-scale-in"), unique_topic("ha-scale-out")
    for topic in (source, sink):
        await create_topic(bootstrap_servers, topic, 4)
    backlog = 12_000  # unique keys, no cache: 3,000 changelog records per task, far above the acceptable lag
    await produce(bootstrap_servers, source, keyed("k", backlog))
    probing_ms = 5_000
    config = {
        "acceptable.recovery.lag": 500,
        "probing.rebalance.interval.ms": probing_ms,
        "statestore.cache.max.bytes": 0,
    }
    all_tasks = tasks_of(4)

    async with StreamsApp(bootstrap_servers, tmp_path, lambda: add_counter(Topology(), "counts", source, sink), config=config) as app:
        first = await app.start(0)
        await app.wait_settled(all_tasks)
        await wait_until(lambda: metric_total(first, "processed_records") >= backlog, 60, message="backlog processed")

        stop = asyncio.Event()
        progress: list[tuple[float, int]] = []

        async def feed_and_watch() -> None:
            """Produce a small batch every 50 ms and note when the group's processed total grows."""
            batch = 0
            last = -1
            async with RecordSender(bootstrap_servers) as sender:
                while not stop.is_set():
                    await sender.send(source, [Rec(k, v) for k, v in keyed(f"live{batch:05d}", 8)])
                    batch += 1
                    total = sum(metric_total(s, "processed_records") for s in app.started)
                    if total != last:
                        progress.append((time.monotonic(), total))
                        last = total
                    await asyncio.sleep(0.05)

        watcher = asyncio.create_task(feed_and_watch())
        try:
            await asyncio.sleep(0.5)
            joined = time.monotonic()
            second = await app.start(1)
            warmups_seen: frozenset[TaskId] = frozenset()

            def takes_over() -> bool:
                nonlocal warmups_seen
                actives = instance_tasks(second)
                if not actives:
                    warmups_seen |= standby_tasks(second)
                return bool(actives)

            await wait_until(takes_over, 45, message="the new instance never took a task over")
            took_over = time.monotonic()
            assert len(warmups_seen) == 2, f"the new instance warmed up {sorted(map(str, warmups_seen))} first"
            settled = await app.wait_settled(all_tasks)
            assert sorted(map(len, settled.values())) == [2, 2]
            assert settled[1] == warmups_seen, "the tasks it took over are the ones it warmed up"
            restored = metric_total(second, "restored_records")
            assert restored <= 2 * 500, f"the new instance restored {restored} records as active: it was not caught up"
            await asyncio.sleep(0.5)
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                await watcher
        assert watcher.exception() is None
        gaps = [b[0] - a[0] for a, b in itertools.pairwise(progress) if a[0] >= joined - 0.5]
        longest = max(gaps)
        print(
            f"\nscale-out: new instance took over after {took_over - joined:.1f} s "
            f"(probing interval {probing_ms / 1000:.0f} s); longest processing stall {longest:.2f} s"
        )
        assert longest < probing_ms / 1000
        await app.close_all()
    assert all(s.errors == [] for s in app.started)
