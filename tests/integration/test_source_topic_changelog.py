"""A store whose changelog is a source topic, against the real broker.

Translated from Kafka Streams' KTableSourceTopicRestartIntegrationTest
(streams/src/test/java/org/apache/kafka/streams/integration/): a table read with
`topology.optimization=all` keeps its store without a `-changelog` topic, restores it from its
source topic (from the checkpoint; only up to the group's committed offset, as
StoreChangelogReader does: what came after is processed, not restored) and goes on with what is
written to the topic while the application is down. A read-only store (KIP-813) restores the same
way, as Kafka always does for it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from streams_core import (
    KafkaStreams,
    Materialized,
    Processor,
    ProcessorContext,
    Produced,
    Record,
    Serdes,
    State,
    Stores,
    StreamsBuilder,
    Topology,
)
from tests.integration.apps.counting_app import streams_config
from tests.integration.apps.harness import (
    AppProcesses,
    committed_offsets,
    read_latest,
    restored_by_task,
    running_instance,
    store_contents,
    wait_all_committed,
)
from tests.integration.apps.table_sum_app import TABLE_STORE, build_topology
from tests.integration.group_protocol import standby_replicas_of_the_group
from tests.integration.streams_testkit import wait_until
from tests.kafka_utils import create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

S = Serdes.String()
OPTIMIZED = {"topology.optimization": "all"}


async def topics(bootstrap: str) -> set[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def produce_key_values(bootstrap: str, topic: str, *keys: str) -> None:
    """The Java test's `produceKeyValues`: `key -> key + "1"`."""
    await produce(bootstrap, topic, [(key.encode(), f"{key}1".encode()) for key in keys])


async def wait_store(streams: KafkaStreams, store: str, expected: dict[str, str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    found: dict[str, Any] = {}
    while time.monotonic() < deadline:
        found = store_contents(streams, store)
        if found == expected:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"store {store} holds {found}, expected {expected}")


def expected(*keys: str) -> dict[str, str]:
    return {key: f"{key}1" for key in keys}


class Case:
    def __init__(self, bootstrap: str, tmp_path: Path, prefix: str) -> None:
        self.bootstrap = bootstrap
        self.tmp_path = tmp_path
        self.app_id = unique_topic(prefix)
        self.source = unique_topic(f"{prefix}-source")

    def config(self, instance: str, guarantee: str = "at_least_once") -> dict[str, Any]:
        extra = {"default.key.serde": S, "default.value.serde": S, **OPTIMIZED}
        return streams_config(self.bootstrap, self.app_id, self.tmp_path / instance, guarantee, extra=extra)

    async def own_topics(self) -> set[str]:
        return {t for t in await topics(self.bootstrap) if t.startswith(self.app_id)}


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_a_table_restores_from_its_source_topic_with_no_changelog_topic(
    bootstrap_servers: str, tmp_path: Path, guarantee: str
) -> None:
    """shouldRestoreAndProgressWhenTopicNotWrittenToDuringRestoration (and its EOS-v2 twin), plus what
    Kafka's reader does on the way: a restart on the same state restores nothing, one on new state
    restores up to the committed offset only, and records written while the application was down
    are processed."""
    case = Case(bootstrap_servers, tmp_path, "ktable-restart")
    output = unique_topic("ktable-restart-out")
    await create_topic(bootstrap_servers, case.source, 2)
    await create_topic(bootstrap_servers, output, 2)

    def topology() -> Topology:
        builder = StreamsBuilder()
        table = builder.table(case.source, Materialized.as_("store"), key_serde=S, value_serde=S)
        table.to_stream().to(output, Produced.with_(S, S))
        return builder.build(OPTIMIZED)

    await produce_key_values(bootstrap_servers, case.source, "a", "b", "c")
    async with running_instance(topology(), case.config("a", guarantee)) as streams:
        await wait_store(streams, "store", expected("a", "b", "c"))
        await wait_all_committed(bootstrap_servers, case.app_id, case.source)
    assert await case.own_topics() == set(), "no changelog (nor any other internal topic) was created"

    await produce_key_values(bootstrap_servers, case.source, "d")
    async with running_instance(topology(), case.config("a", guarantee)) as streams:
        assert sum(restored_by_task(streams).values()) == 0, "the checkpoint is the committed offset"
        await wait_store(streams, "store", expected("a", "b", "c", "d"))
        await wait_all_committed(bootstrap_servers, case.app_id, case.source)

    await produce_key_values(bootstrap_servers, case.source, "e")
    async with running_instance(topology(), case.config("b", guarantee)) as streams:  # new state: the task moved here
        assert sum(restored_by_task(streams).values()) == 4, "restored a-d (committed), not e (processed)"
        await wait_store(streams, "store", expected("a", "b", "c", "d", "e"))
        await produce_key_values(bootstrap_servers, case.source, "f", "g", "h")
        await wait_store(streams, "store", expected(*"abcdefgh"))
    assert await case.own_topics() == set()
    written = {r.key.decode(): r.value.decode() for r in await read_all(bootstrap_servers, output) if r.key and r.value}
    assert written == expected(*"abcdefgh")


class _Writer(Processor[str, str, None, None]):
    """ReadOnlyStoreTest's processor: keeps the topic's latest value per key in the store."""

    def init(self, context: ProcessorContext[None, None]) -> None:
        self.store: Any = context.get_state_store("read-only")

    def process(self, record: Record[str, str]) -> None:
        self.store.put(record.key, record.value)


async def test_a_read_only_store_restores_from_its_source_topic(bootstrap_servers: str, tmp_path: Path) -> None:
    """Kafka restores a read-only store (Topology.addReadOnlyStateStore) from its source topic on a new
    instance: the same rules (up to the committed offset), and no changelog topic."""
    case = Case(bootstrap_servers, tmp_path, "read-only-restart")
    await create_topic(bootstrap_servers, case.source, 2)

    def topology() -> Topology:
        builder = Stores.key_value_store_builder(Stores.persistent_key_value_store("read-only"), S, S)
        return Topology().add_read_only_state_store(builder, "source", case.source, "writer", _Writer,
                                                    key_serde=S, value_serde=S)  # fmt: skip

    await produce_key_values(bootstrap_servers, case.source, "a", "b", "c")
    async with running_instance(topology(), case.config("a")) as streams:
        await wait_store(streams, "read-only", expected("a", "b", "c"))
        await wait_all_committed(bootstrap_servers, case.app_id, case.source)
    await produce_key_values(bootstrap_servers, case.source, "d")
    async with running_instance(topology(), case.config("b")) as streams:
        assert sum(restored_by_task(streams).values()) == 3
        await wait_store(streams, "read-only", expected("a", "b", "c", "d"))
    assert await case.own_topics() == set()


async def wait_sums(bootstrap: str, output: str, truth: dict[str, int], timeout: float = 90.0) -> None:
    """Wait until the committed output's latest sum per bucket is the truth (the aggregation reads a
    repartition topic, so it may still be catching up when the input is all committed)."""
    deadline = time.monotonic() + timeout
    found: dict[str, int] = {}
    while time.monotonic() < deadline:
        found = await read_latest(bootstrap, output, "read_committed")
        if found == truth:
            return
        await asyncio.sleep(0.5)
    wrong = {b: (found.get(b), n) for b, n in truth.items() if found.get(b) != n}
    raise AssertionError(f"sums per bucket (found, truth) that differ after {timeout} s: {wrong}")


class TableFeeder:
    """Updates `keys` with random values in chunks, in the background; `sums` is the truth per bucket."""

    def __init__(self, bootstrap: str, topic: str, updates: int, seed: int) -> None:
        self.bootstrap, self.topic, self.updates = bootstrap, topic, updates
        self.latest: dict[str, int] = {}
        self._random = random.Random(seed)
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        sent = 0
        while sent < self.updates:
            chunk = []
            for _ in range(min(200, self.updates - sent)):
                key = f"key-{self._random.randrange(60):02d}"
                value = self._random.randrange(1000)
                self.latest[key] = value
                chunk.append((key.encode(), str(value).encode()))
            await produce(self.bootstrap, self.topic, chunk)
            sent += len(chunk)
            await asyncio.sleep(0.1)

    def start(self) -> TableFeeder:
        self.task = asyncio.create_task(self._run(), name="table-feeder")
        return self

    async def wait(self, timeout: float = 120.0) -> dict[str, int]:
        assert self.task is not None
        await asyncio.wait_for(asyncio.shield(self.task), timeout)
        sums: dict[str, int] = defaultdict(int)
        for key, value in self.latest.items():
            sums[key[-1]] += value
        return dict(sums)


@pytest.mark.slow
async def test_kill_9_then_a_new_instance_restores_the_table_from_its_topic_and_sums_stay_exact(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """Exactly-once, kill -9 while updates arrive, the task moves to a new instance (new state): the
    table is restored from its topic up to the committed offset, so every update reaches the
    per-bucket sums once with its right old value; a second kill and a restart on the first
    instance's state (restored from its stored offsets) keep them exact too."""
    case = Case(bootstrap_servers, tmp_path, "table-sum")
    output = unique_topic("table-sum-out")
    await create_topic(bootstrap_servers, case.source, 2)
    await create_topic(bootstrap_servers, output, 2)
    feeder = TableFeeder(bootstrap_servers, case.source, 6000, seed=7)
    try:
        with AppProcesses(tmp_path, bootstrap_servers, case.app_id, case.source, output,
                          module="tests.integration.apps.table_sum_app") as procs:  # fmt: skip
            first = procs.start("a", "exactly_once_v2")
            await first.wait_running()
            feeder.start()
            await asyncio.sleep(random.uniform(1.5, 2.5))
            assert feeder.task is not None and not feeder.task.done(), "input finished before the kill"
            first.kill()
            second = procs.start("b", "exactly_once_v2")
            await second.wait_running()
            await asyncio.sleep(random.uniform(1.0, 2.0))
            second.kill()
            third = procs.start("a", "exactly_once_v2")
            await third.wait_running()
            truth = await feeder.wait()
            await wait_sums(bootstrap_servers, output, truth)
            assert await third.terminate() == 0, third.log_tail()
    finally:
        if feeder.task is not None and not feeder.task.done():
            feeder.task.cancel()
    own = await case.own_topics()
    assert f"{case.app_id}-{TABLE_STORE}-changelog" not in own
    assert any(t.endswith("-changelog") for t in own), "the sums' store keeps its changelog"


@pytest.mark.slow
async def test_a_standby_of_the_table_tails_its_source_topic_and_takes_over_exactly(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """Exactly-once, two instances with `num.standby.replicas=1`: the survivor keeps a standby of the
    table's task by reading the source topic; the other instance is killed (-9) mid-stream and its
    tasks move to the survivor; the per-bucket sums stay exact. (A standby reads its source topic to
    the end, past the committed offset, so the promoted task is usually restored from scratch up to
    the committed offset: docs/dsl.md, Differences.)"""
    case = Case(bootstrap_servers, tmp_path, "table-standby")
    output = unique_topic("table-standby-out")
    await create_topic(bootstrap_servers, case.source, 2)
    await create_topic(bootstrap_servers, output, 2)
    feeder = TableFeeder(bootstrap_servers, case.source, 6000, seed=11)
    config = streams_config(bootstrap_servers, case.app_id, tmp_path / "b", "exactly_once_v2", standby=1, extra=OPTIMIZED)
    await standby_replicas_of_the_group(bootstrap_servers, case.app_id, 1)
    try:
        with AppProcesses(tmp_path, bootstrap_servers, case.app_id, case.source, output,
                          module="tests.integration.apps.table_sum_app") as procs:  # fmt: skip
            victim = procs.start("a", "exactly_once_v2", "--standby", "1")
            await victim.wait_running()
            async with running_instance(build_topology(case.source, output), config) as survivor:
                tm = survivor.threads[0].task_manager
                assert tm is not None

                def table_standby() -> bool:
                    return survivor.state is State.RUNNING and any(t.subtopology == 0 for t in tm.standby_tasks)

                await wait_until(table_standby, 45, message=lambda: f"tasks {set(tm.tasks)}, standbys {set(tm.standby_tasks)}")
                standby_id = next(t for t in tm.standby_tasks if t.subtopology == 0)
                feeder.start()
                await wait_until(lambda: tm.standby_tasks[standby_id].updated_records > 0, 30,
                                 message=lambda: "the table's standby read nothing of the source topic")  # fmt: skip

                async def victim_committed() -> bool:
                    return len(await committed_offsets(bootstrap_servers, case.app_id, case.source)) == 2

                await wait_until(victim_committed, 30, message="the instances committed nothing of the source topic")
                replicated = tm.standby_tasks[standby_id].updated_records
                victim.kill()
                await wait_until(lambda: survivor.state is State.RUNNING and standby_id in tm.tasks, 45,
                                 message=lambda: f"survivor {survivor.state.name} with tasks {set(tm.tasks)}")  # fmt: skip
                restored, wiped = tm.tasks[standby_id].restored_records, tm.corrupted_tasks
                truth = await feeder.wait()
                await wait_sums(bootstrap_servers, output, truth)
    finally:
        if feeder.task is not None and not feeder.task.done():
            feeder.task.cancel()
    print(f"\ntable standby: replicated {replicated} source records, restored {restored} on takeover, wiped {wiped}")
    assert f"{case.app_id}-{TABLE_STORE}-changelog" not in await case.own_topics()
