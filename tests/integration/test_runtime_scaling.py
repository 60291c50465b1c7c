"""KafkaStreams against the real broker: several instances of one application (issue 4).

Every instance runs in this event loop with its own application.server and state dir
(`StreamsApp`). Inputs are keyed so that the output can be counted key by key.
"""

from __future__ import annotations

import asyncio
import contextlib
from functools import partial
from pathlib import Path

import pytest

from streams_core import TaskId
from streams_core.runtime.kafka_streams import State
from tests.integration.group_protocol import UNDER_STREAMS, classic_only
from tests.integration.streams_testkit import (
    StreamsApp,
    counts_by_key,
    instance_tasks,
    metric_total,
    partitions_of,
    passthrough_topology,
    stateful_topology,
    tasks_of,
    wait_for_output_keys,
    wait_until,
)
from tests.kafka_utils import create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

PARTITIONS = 4
ALL_TASKS = tasks_of(PARTITIONS)


def keyed(prefix: str, start: int, stop: int) -> list[tuple[bytes, bytes]]:
    return [(f"{prefix}-{i:05d}".encode(), f"value-{i}".encode()) for i in range(start, stop)]


async def topics(bootstrap: str) -> tuple[str, str]:
    source, sink = unique_topic("scaling-in"), unique_topic("scaling-out")
    await create_topic(bootstrap, source, PARTITIONS)
    await create_topic(bootstrap, sink, PARTITIONS)
    return source, sink


async def assert_metadata_agrees(app: StreamsApp, source: str) -> None:
    """Every live member's all_metadata() is the same and names every member with its partitions.

    Under the classic protocol at once: the rebalance hands every member the same map. Under the
    streams protocol within a few heartbeats: the broker's endpoint map follows the assignments the
    members acknowledged, and a member hears of a change at its next heartbeat (as Java's does)."""
    live = app.live
    expected = sorted(
        (app.server(i), partitions_of(instance_tasks(s), [source])) for i, s in live.items()
    )
    disagreeing: list[str] = []

    def agree() -> bool:
        disagreeing.clear()
        for index, streams in live.items():
            seen = sorted((f"{m.host}:{m.port}", m.topic_partitions) for m in streams.all_metadata())
            if seen != expected:
                disagreeing.append(f"instance {index} disagrees: {seen} != {expected}")
        return not disagreeing

    await wait_until(agree, 10 if UNDER_STREAMS else 0, message=lambda: "; ".join(disagreeing))


@pytest.mark.parametrize(("instances", "threads"), [(1, 1), (2, 1), (3, 1), (2, 2)])
async def test_instances_process_every_record_exactly_once(
    bootstrap_servers: str, tmp_path: Path, instances: int, threads: int
) -> None:
    """1, 2, 3 instances (and 2 x 2 threads): every record once, tasks spread evenly, no failure."""
    source, sink = await topics(bootstrap_servers)
    before = keyed("k", 0, 1000)  # in Kafka before any instance starts: read during the joins
    after = keyed("k", 1000, 2000)  # produced once the group is stable
    await produce(bootstrap_servers, source, before)

    topology = partial(passthrough_topology, source, sink)
    async with StreamsApp(bootstrap_servers, tmp_path, topology, config={"num.stream.threads": threads}) as app:
        for index in range(instances):
            await app.start(index)
        tasks = await app.wait_settled(ALL_TASKS)

        def balanced() -> bool:  # at once under the classic protocol; within heartbeats under streams
            sizes = sorted(len(t) for t in app.tasks().values())
            return len(sizes) == instances and sizes[0] >= 1 and sizes[-1] - sizes[0] <= 1

        await wait_until(balanced, 30 if UNDER_STREAMS else 0, message=lambda: f"not balanced: {app.tasks()}")
        tasks = await app.wait_settled(ALL_TASKS)
        # Balanced: 4 tasks over n equal instances -> floor(4/n) or one more each, none idle;
        # within an instance, over its threads the same way.
        sizes = sorted(len(t) for t in tasks.values())
        assert len(sizes) == instances and sizes[0] >= 1 and sizes[-1] - sizes[0] <= 1, tasks
        for index, streams in app.live.items():
            per_thread = [thread["tasks"] for thread in streams.metrics()["threads"]]
            assert len(per_thread) == threads
            assert sorted(t for ts in per_thread for t in ts) == sorted(str(t) for t in tasks[index])
            assert max(map(len, per_thread)) - min(map(len, per_thread)) <= 1 and all(per_thread)

        # The backlog read while members joined is done, each record once (commits on revocation).
        await wait_for_output_keys(bootstrap_servers, sink, [k for k, _ in before])
        await wait_until(lambda: sum(metric_total(s, "processed_records") for s in app.live.values()) >= 1000, 30)
        processed_before = {i: metric_total(s, "processed_records") for i, s in app.live.items()}
        assert sum(processed_before.values()) == 1000, processed_before

        sent = await produce(bootstrap_servers, source, after)
        await wait_for_output_keys(bootstrap_servers, sink, [k for k, _ in before + after])
        # In a stable group each instance processes exactly the new records of its partitions.
        for index, streams in app.live.items():
            mine = {t.partition for t in tasks[index]}
            expected = sum(1 for m in sent if m.partition in mine)
            assert metric_total(streams, "processed_records") - processed_before[index] == expected
            assert expected > 0
        await app.close_all()

    for streams in app.started:
        assert streams.state is State.NOT_RUNNING
        assert streams.errors == []
        assert metric_total(streams, "dropped_records") == 0

    output = await read_all(bootstrap_servers, sink)
    counts = counts_by_key(output)
    assert set(counts) == {k for k, _ in before + after}
    assert set(counts.values()) == {1}, {k: n for k, n in counts.items() if n != 1}
    assert {r.key: r.value for r in output} == dict(before + after)


async def test_scale_out_and_in_mid_stream(bootstrap_servers: str, tmp_path: Path) -> None:
    """Instances join and leave while records keep coming: nothing is lost, tasks move, all agree."""
    source, sink = await topics(bootstrap_servers)
    produced: list[bytes] = []
    stop_producing = asyncio.Event()

    async def keep_producing() -> None:
        batch = 0
        while not stop_producing.is_set():
            records = keyed(f"b{batch:04d}", 0, 20)
            await produce(bootstrap_servers, source, records)
            produced.extend(k for k, _ in records)
            batch += 1
            await asyncio.sleep(0.05)

    async def progress(count: int = 100) -> None:
        """Wait until `count` more records than now were produced and processed (the stream flows)."""
        target = len(produced) + count
        await wait_until(lambda: len(produced) >= target, 30, message="producer stalled")
        await wait_for_output_keys(bootstrap_servers, sink, produced[:target])

    async with StreamsApp(bootstrap_servers, tmp_path, lambda: passthrough_topology(source, sink)) as app:
        feeder = asyncio.create_task(keep_producing())
        try:
            await app.start(0)
            history = [await app.wait_settled(ALL_TASKS)]
            assert history[-1] == {0: ALL_TASKS}
            await assert_metadata_agrees(app, source)
            await progress()

            await app.start(1)  # scale out: 4 tasks -> 2 + 2
            history.append(await app.wait_settled(ALL_TASKS))
            assert sorted(map(len, history[-1].values())) == [2, 2]
            await assert_metadata_agrees(app, source)
            await progress()

            await app.start(2)  # scale out: 2 + 1 + 1
            history.append(await app.wait_settled(ALL_TASKS))
            assert sorted(map(len, history[-1].values())) == [1, 1, 2]
            await assert_metadata_agrees(app, source)
            await progress()

            leaving = history[-1][0]
            await app.stop(0)  # scale in: the first member (the group's leader so far) leaves
            history.append(await app.wait_settled(ALL_TASKS))
            assert sorted(map(len, history[-1].values())) == [2, 2]
            assert leaving <= history[-1][1] | history[-1][2]
            await assert_metadata_agrees(app, source)
            assert app.server(0) not in {f"{m.host}:{m.port}" for m in app.instances[1].all_metadata()}
            await progress()
        finally:
            stop_producing.set()
            with contextlib.suppress(Exception):
                await feeder
        assert feeder.exception() is None

        # Tasks moved at each step; each stable assignment was sticky where balance allowed.
        assert history[1][0] < ALL_TASKS and history[1][1] == ALL_TASKS - history[1][0]
        assert history[2][0] <= history[1][0] and history[2][1] <= history[1][1]
        assert history[3][1] >= history[2][1] and history[3][2] >= history[2][2]

        await wait_for_output_keys(bootstrap_servers, sink, produced)
        await app.close_all()

    for streams in app.started:
        assert streams.errors == [] and streams.state is State.NOT_RUNNING
    counts = counts_by_key(await read_all(bootstrap_servers, sink))
    assert set(counts) == set(produced)  # every input at least once, nothing invented
    assert len(produced) == len(set(produced))


@classic_only(
    "the broker's assignor keeps tasks on the members running them and knows nothing of a new member's "
    "task directories, the classic assignor's signal of local state (docs/streams-groups.md, 'Differences "
    "from Kafka Streams')"
)
async def test_restarted_member_gets_its_tasks_back(bootstrap_servers: str, tmp_path: Path) -> None:
    """Stickiness: a member restarted with its application.server and state dir gets its tasks back.

    The restarted process has a new process id and no previous tasks: the only signal is the
    task directories in its state dir. Instance 1 starts first and keeps the lowest tasks when
    0 joins; its state cleaner (state.cleanup.delay.ms=0) removes the directories of the tasks
    it gave away. After 1 leaves, 0 runs (and has directories for) all four; without the local
    state signal 0 would keep the lowest tasks, so getting them back proves the signal works.
    """
    source, sink = await topics(bootstrap_servers)
    records = keyed("s", 0, 400)
    await produce(bootstrap_servers, source, records)

    config = {"state.cleanup.delay.ms": 0}
    async with StreamsApp(bootstrap_servers, tmp_path, partial(stateful_topology, source, sink), config=config) as app:
        first = await app.start(1)
        assert await app.wait_settled(ALL_TASKS) == {1: ALL_TASKS}
        await app.start(0)
        before = await app.wait_settled(ALL_TASKS)
        assert before[1] == {TaskId(0, 0), TaskId(0, 1)}, before
        await wait_for_output_keys(bootstrap_servers, sink, [k for k, _ in records])
        first.clean_up_state()  # also done every second while RUNNING
        app_dir = app.state_dir(1) / app.application_id
        assert {p.name for p in app_dir.iterdir() if p.is_dir()} == {str(t) for t in before[1]}  # beside the instance's .lock
        assert all((app_dir / str(t) / "counts.sqlite").is_file() for t in before[1])

        await app.stop(1)
        assert await app.wait_settled(ALL_TASKS) == {0: ALL_TASKS}

        # A restarted process: new process id, same application.server and state.dir.
        restarted = await app.start(1)
        assert restarted.process_id != first.process_id
        after = await app.wait_settled(ALL_TASKS)
        assert after == before
        assert instance_tasks(restarted) == before[1]
        metadata = {f"{m.host}:{m.port}": m for m in restarted.all_metadata()}
        assert metadata[app.server(1)].topic_partitions == partitions_of(before[1], [source])
        assert metadata[app.server(0)].topic_partitions == partitions_of(before[0], [source])
        assert metadata[app.server(1)].state_store_names == frozenset({"counts"})
