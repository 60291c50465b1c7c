"""Stream threads as worker processes (`stream.threads.mode=process`) against the real broker.

One instance with two stream threads runs two worker processes: the group's assignor spreads the
tasks over them as over two threads of one client, queries through `KafkaStreams.store()` read
both workers' stores, and a worker killed with SIGKILL under exactly-once is replaced
(REPLACE_THREAD) without a record lost or counted twice, the store answering the right count or
"retry" meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from api.streams_collector import StreamsCollector
from streams_core import KafkaStreams, Serdes, Stores, Topology
from streams_core.errors import InvalidStateStoreError
from streams_core.runtime.kafka_streams import State, StreamThreadExceptionResponse
from streams_core.runtime.threads.thread_state import ThreadState
from tests.integration import streams_testkit as kit
from tests.kafka_utils import create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

PARTITIONS = 4
PROCESS_MODE = {"num.stream.threads": 2, "stream.threads.mode": "process"}


def counting_topology(source: str, sink: str) -> Topology:
    """source -> count per key in a logged persistent store -> sink (the count's input record)."""
    store = Stores.key_value_store_builder(Stores.persistent_key_value_store("counts"), Serdes.Bytes(), Serdes.Long())
    return (
        Topology()
        .add_source("SOURCE", source)
        .add_processor("COUNT", partial(kit.CountingProcessor, "counts"), "SOURCE")
        .add_state_store(store, "COUNT")
        .add_sink("SINK", sink, "COUNT")
    )


def keyed(prefix: str, count: int) -> list[tuple[bytes, bytes]]:
    return [(f"{prefix}-{i:04d}".encode(), b"v") for i in range(count)]


def worker_pids(streams: KafkaStreams) -> dict[str, int]:
    return {t["thread"]: t["pid"] for t in streams.metrics()["threads"] if t.get("pid") is not None}


def tasks_per_thread(streams: KafkaStreams) -> dict[str, int]:
    return {m.thread_name: len(m.active_tasks) for m in streams.metadata_for_local_threads()}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def asked_while(done: Any, streams: KafkaStreams, keys: list[bytes], timeout: float = 60) -> Counter[str]:
    """Ask the store for `keys` (each counted once) over and over until `done()`, tallying the answers:
    the count, "retry" (InvalidStateStoreError, a 503 over REST), absent (a count the crash took back
    with its uncommitted transaction, until it is processed again) or wrong (any other value)."""
    answers: Counter[str] = Counter()
    deadline = asyncio.get_running_loop().time() + timeout
    while not done():
        assert asyncio.get_running_loop().time() < deadline, f"not done in {timeout} s: {answers}"
        for key in keys[::10]:
            try:
                value = streams.store("counts").get(key)
            except InvalidStateStoreError:
                answers["retry"] += 1
                continue
            answers["right" if value == 1 else "absent" if value is None else "wrong"] += 1
        await asyncio.sleep(0.05)
    return answers


async def setup_topics(bootstrap_servers: str) -> tuple[str, str]:
    source, sink = unique_topic("workers-in"), unique_topic("workers-out")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    return source, sink


async def test_two_workers_share_the_tasks_and_answer_queries(bootstrap_servers: str, tmp_path: Path) -> None:
    source, sink = await setup_topics(bootstrap_servers)
    records = keyed("k", 400)
    await produce(bootstrap_servers, source, records)
    async with kit.StreamsApp(
        bootstrap_servers, tmp_path, partial(counting_topology, source, sink), config=PROCESS_MODE
    ) as app:
        streams = await app.start(0)
        await app.wait_settled(kit.tasks_of(PARTITIONS))
        first, second = (f"{app.application_id}-StreamThread-{i}" for i in (1, 2))
        # Under the streams protocol the worker that joins first may run all 4 tasks until the other's
        # heartbeat reaches the broker; under the classic protocol the split comes with the first RUNNING.
        await kit.wait_until(lambda: tasks_per_thread(streams) == {first: 2, second: 2}, 30,
                             message=lambda: f"tasks per worker {tasks_per_thread(streams)}")  # fmt: skip
        pids = worker_pids(streams)
        assert set(pids) == {first, second} and len(set(pids.values())) == 2 and os.getpid() not in pids.values()
        await kit.wait_for_output_keys(bootstrap_servers, sink, [k for k, _ in records])

        store = streams.store("counts")
        assert {key: store.get(key) for key, _ in records} == {key: 1 for key, _ in records}
        assert store.get(b"absent") is None
        entries = list(store.all())
        assert [kv.key for kv in entries] == sorted(key for key, _ in records), "both workers' copies, in key order"
        assert store.approximate_num_entries() == len(records)
        by_partition = [list(streams.store("counts", partition=p).all()) for p in range(PARTITIONS)]
        assert sum(map(len, by_partition)) == len(records) and all(by_partition)
        position = streams.store_position("counts", 0)
        assert position is not None, "the active copy of partition 0 is in a worker"
        lags = await streams.all_local_store_partition_lags()
        assert set(lags["counts"]) == set(range(PARTITIONS))
        assert kit.metric_total(streams, "processed_records") == len(records)
        families = {family.name: family for family in StreamsCollector(streams).collect()}
        busy = {s.labels["thread"]: s.value for s in families["streams_thread_worker_cpu_seconds"].samples}
        assert set(busy) == {first, second} and all(seconds > 0 for seconds in busy.values()), busy
        assert {s.value for s in families["streams_thread_worker_pid"].samples} == set(pids.values())

        await app.close_all()
        assert streams.state is State.NOT_RUNNING and streams.errors == []
        assert not any(alive(pid) for pid in pids.values()), "a closed instance leaves no worker behind"


@pytest.mark.slow
async def test_a_killed_worker_is_replaced_and_nothing_is_lost_or_doubled(bootstrap_servers: str, tmp_path: Path) -> None:
    source, sink = await setup_topics(bootstrap_servers)
    before, after = keyed("before", 300), keyed("after", 300)
    await produce(bootstrap_servers, source, before)
    config: dict[str, Any] = {**PROCESS_MODE, "processing.guarantee": "exactly_once_v2"}
    async with kit.StreamsApp(bootstrap_servers, tmp_path, partial(counting_topology, source, sink), config=config) as app:
        streams = app.create(0)
        errors: list[BaseException] = []

        def replace(error: BaseException) -> StreamThreadExceptionResponse:
            errors.append(error)
            return StreamThreadExceptionResponse.REPLACE_THREAD

        streams.set_uncaught_exception_handler(replace)
        await streams.start()
        await app.wait_settled(kit.tasks_of(PARTITIONS))
        await kit.wait_for_output_keys(bootstrap_servers, sink, [k for k, _ in before])
        first = f"{app.application_id}-StreamThread-1"
        victim = worker_pids(streams)[first]

        os.kill(victim, signal.SIGKILL)
        answers = await asked_while(lambda: len(errors) == 1, streams, [k for k, _ in before])
        await produce(bootstrap_servers, source, after)
        answers += await asked_while(
            lambda: worker_pids(streams).get(first) not in (None, victim), streams, [k for k, _ in before]
        )
        assert answers["wrong"] == 0 and sum(answers.values()) > 0, answers  # 503s while REBALANCING, as Kafka
        await kit.wait_until(
            lambda: all(m.thread_state == ThreadState.RUNNING.name for m in streams.metadata_for_local_threads()),
            60,
            message=lambda: f"replacement of {first}: {worker_pids(streams)} {streams.state.name}",
        )
        await app.wait_settled(kit.tasks_of(PARTITIONS), timeout=60)
        every_key = [k for k, _ in before + after]
        await kit.wait_for_output_keys(bootstrap_servers, sink, every_key, timeout=60)
        store = streams.store("counts")
        counted = {key: store.get(key) for key in every_key}
        assert set(counted.values()) == {1}, {k: n for k, n in counted.items() if n != 1}
        assert "worker process" in str(errors[0])
        await app.close_all()

    committed = await read_all(bootstrap_servers, sink, isolation_level="read_committed")
    counts = kit.counts_by_key(committed)
    assert set(counts) == set(every_key)
    assert set(counts.values()) == {1}, {k: n for k, n in counts.items() if n != 1}
