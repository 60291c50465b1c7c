"""KafkaStreams with `group.protocol=streams` (KIP-1071) on the real 4.3.1 broker: the runtime as a streams group.

A Python word count (flatMapValues -> groupBy -> count: two sub-topologies, 8 tasks over 4 partitions)
runs as members of a streams group: the broker creates the internal topics and assigns the tasks.
Two instances split them and both run; the counts are exact; discovery lists both endpoints (from the
broker's endpoint map); one closes (leaving the group) and the other takes every task over with the
counts still exact. The broker's first assignment waits its initial delay (3 s), so deadlines are
generous.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from streams_core import Materialized, Serdes, StreamsBuilder, Topology
from streams_core.common.host_info import HostInfo
from streams_core.runtime.kafka_streams import KafkaStreams, State, StreamThreadExceptionResponse
from tests.integration.apps.counting_app import streams_config as autostop_config
from tests.integration.apps.harness import AppProcesses, InputFeeder, not_one_to_n, sequences_by_key, wait_all_committed
from tests.integration.streams_testkit import (
    RecordSender,
    StreamsApp,
    instance_tasks,
    tasks_of,
    wait_for_output_keys,
    wait_until,
)
from tests.integration.test_autostop import run_instances
from tests.integration.test_autostop import word_count as autostop_word_count
from tests.integration.test_worker_processes import counting_topology
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

PARTITIONS = 4
ALL_TASKS = tasks_of(PARTITIONS, 0) | tasks_of(PARTITIONS, 1)
LONG = Serdes.Long()


def word_count(source: str, sink: str) -> Callable[[], Topology]:
    def build() -> Topology:
        builder = StreamsBuilder()
        (builder.stream(source, key_serde=Serdes.String(), value_serde=Serdes.String())
         .flat_map_values(lambda line: line.lower().split()).group_by(lambda key, word: word)
         .count(Materialized.as_("counts")).to_stream().to(sink, value_serde=LONG))  # fmt: skip
        return builder.build()

    return build


def lines(start: int, count: int) -> tuple[list[Rec], Counter[str]]:
    """`count` lines of 3 words from a vocabulary of 20, keyed so that they spread over the partitions."""
    records, words = [], Counter[str]()
    for i in range(start, start + count):
        line = [f"w{(i * 7 + j) % 20}" for j in range(3)]
        words.update(line)
        records.append(Rec(f"k{i}".encode(), " ".join(line).encode()))
    return records, words


async def counts_reach(bootstrap: str, sink: str, expected: Counter[str], isolation: str) -> dict[str, list[int]]:
    """Read the sink until the last count of every word is the expected one; every count per word, in order."""
    seen: dict[str, list[int]] = {}

    async def done() -> bool:
        seen.clear()
        for record in await read_all(bootstrap, sink, isolation_level=isolation):
            value = LONG.deserialize(sink, record.value)
            assert record.key is not None and value is not None
            seen.setdefault(record.key.decode(), []).append(value)
        return {w: v[-1] for w, v in seen.items()} == dict(expected)

    await wait_until(done, 60, interval=0.3, message=lambda: f"counts {({w: v[-1] for w, v in seen.items()})} != {dict(expected)}")
    return seen


def endpoints(streams: KafkaStreams) -> set[HostInfo]:
    return {m.host_info for m in streams.all_metadata()}


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
async def test_two_python_instances_share_a_streams_group_with_exact_counts(
    bootstrap_servers: str, tmp_path: Path, guarantee: str
) -> None:
    """Under exactly_once_v2 each task's producer sends the offsets with its transaction (TxnOffsetCommit
    without member id or epoch, which a streams group takes); under at_least_once the member commits them
    with OffsetCommit v9 and its epoch."""
    source, sink = unique_topic("sg-lines"), unique_topic("sg-counts")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    config = {"group.protocol": "streams", "statestore.cache.max.bytes": 0, "processing.guarantee": guarantee}
    isolation = "read_committed" if guarantee != "at_least_once" else "read_uncommitted"
    async with StreamsApp(bootstrap_servers, tmp_path, word_count(source, sink), config=config) as app, RecordSender(
        bootstrap_servers
    ) as sender:
        first = await app.start(0)
        await app.wait_settled(ALL_TASKS, timeout=60)
        records, expected = lines(0, 40)
        await sender.send(source, records)
        await counts_reach(bootstrap_servers, sink, expected, isolation)

        second = await app.start(1)
        split = await app.wait_settled(ALL_TASKS, timeout=60)
        assert split[0] and split[1], f"both instances run tasks: {split}"
        def announced(streams: KafkaStreams) -> dict[HostInfo, set[int]]:
            return {m.host_info: {tp.partition for tp in m.topic_partitions if tp.topic == source} for m in streams.all_metadata()}

        def running() -> dict[HostInfo, set[int]]:
            return {HostInfo.parse(app.server(i)): {t.partition for t in instance_tasks(s) if t.subtopology == 0} for i, s in ((0, first), (1, second))}

        await wait_until(
            lambda: announced(first) == running() == announced(second),
            30,
            message=lambda: f"the broker's endpoint map {announced(first)} / {announced(second)}, running {running()}",
        )
        records, more = lines(40, 40)
        await sender.send(source, records)
        expected += more
        await counts_reach(bootstrap_servers, sink, expected, isolation)

        await app.stop(0)
        assert instance_tasks(first) == frozenset()
        await app.wait_settled(ALL_TASKS, timeout=60)
        assert instance_tasks(second) == ALL_TASKS
        await wait_until(lambda: endpoints(second) == {HostInfo.parse(app.server(1))}, 30, message=lambda: f"{endpoints(second)}")
        records, more = lines(80, 40)
        await sender.send(source, records)
        expected += more
        seen = await counts_reach(bootstrap_servers, sink, expected, isolation)
    for word, values in seen.items():
        assert values == list(range(1, expected[word] + 1)), f"{word}: {values} (a handover lost or repeated records)"


KEYS = [f"key-{i:03d}" for i in range(40)]


@pytest.mark.slow
async def test_kill_9_of_a_member_moves_its_tasks_and_exactly_once_counts_stay_exact(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """Two counting apps (processes) in a streams group under exactly-once; one is killed with SIGKILL while
    input arrives. It cannot leave: the broker fences it after the group's session timeout (45 s, the
    4.3 broker's minimum), gives its tasks to the other, whose producers fence the dead one's
    transactions; every key's committed outputs are exactly 1..n."""
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("sg-kill"), unique_topic("sg-kill-in"), unique_topic("sg-kill-out")
    await create_topic(bootstrap, source, PARTITIONS)
    await create_topic(bootstrap, sink, PARTITIONS)
    feeder = InputFeeder(bootstrap, source, KEYS, 6_000, chunk=40, pause=0.1)
    args = ("--group-protocol", "streams", "--commit-interval-ms", "500")
    try:
        with AppProcesses(tmp_path, bootstrap, app_id, source, sink) as procs:
            a = procs.start("a", "exactly_once", *args)
            await a.wait_running(timeout=90)
            b = procs.start("b", "exactly_once", *args)
            await b.wait_running(timeout=90)
            feeder.start()
            await wait_until(lambda: feeder.produced >= 1_000, 60, message=lambda: "the feeder is slow")
            a.kill()
            truth = await feeder.wait(timeout=180)
            await wait_all_committed(bootstrap, app_id, source, timeout=150)
            assert await b.terminate() == 0, b.log_tail()
    finally:
        await feeder.aclose()
    committed = await read_all(bootstrap, sink, isolation_level="read_committed", timeout=30)
    wrong = not_one_to_n(sequences_by_key(committed), truth)
    assert not wrong, f"keys whose committed outputs are not exactly 1..n: (outputs, n) = {wrong}"
    assert len(committed) == sum(truth.values())


async def test_a_member_with_another_topology_fails_naming_the_difference(bootstrap_servers: str, tmp_path: Path) -> None:
    """The 4.3 broker refuses a member whose topology is not the group's (INVALID_REQUEST, "Topology updates
    are not supported yet."); the refused instance ends in ERROR with the difference named, the group's
    member runs on."""
    source, sink = unique_topic("sg-lines"), unique_topic("sg-counts")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    async with StreamsApp(bootstrap_servers, tmp_path, word_count(source, sink), config={"group.protocol": "streams"}) as app:
        first = await app.start(0)
        await app.wait_settled(ALL_TASKS, timeout=60)
        errors: list[BaseException] = []
        other = app.create(1, **{"replication.factor": 1})

        def handler(error: BaseException) -> StreamThreadExceptionResponse:
            errors.append(error)
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT

        other.set_uncaught_exception_handler(handler)
        await other.start()
        await wait_until(lambda: other.state is State.ERROR, 60, message=lambda: f"{other.state.name}")
        (error,) = errors
        assert "INVALID_REQUEST" in str(error) and "replication factor -1 in the group, 1 here" in str(error), error
        assert first.state is State.RUNNING and instance_tasks(first) == ALL_TASKS


async def test_worker_processes_are_members_of_the_streams_group(bootstrap_servers: str, tmp_path: Path) -> None:
    """Two stream threads as worker processes: each builds its clients through the same supplier, so each
    is a streams group member (one process id); the broker spreads the tasks over them."""
    source, sink = unique_topic("sg-workers-in"), unique_topic("sg-workers-out")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    records = [(f"k-{i:04d}".encode(), b"v") for i in range(400)]
    await produce(bootstrap_servers, source, records)
    config = {"group.protocol": "streams", "num.stream.threads": 2, "stream.threads.mode": "process"}
    async with StreamsApp(bootstrap_servers, tmp_path, partial(counting_topology, source, sink), config=config) as app:
        streams = await app.start(0)
        await app.wait_settled(tasks_of(PARTITIONS), timeout=60)

        def per_thread() -> list[int]:
            return sorted(len(m.active_tasks) for m in streams.metadata_for_local_threads())

        # The first worker to join may run all 4 tasks until the second's heartbeat reaches the broker.
        await wait_until(lambda: per_thread() == [2, 2], 30, message=lambda: f"tasks per worker: {per_thread()}")
        await wait_for_output_keys(bootstrap_servers, sink, [k for k, _ in records])
        store = streams.store("counts")
        assert {key: store.get(key) for key, _ in records} == {key: 1 for key, _ in records}
        await wait_until(
            lambda: [(m.host_info, len(m.topic_partitions)) for m in streams.all_metadata()] == [(HostInfo.parse(app.server(0)), PARTITIONS)],
            30,
            message=lambda: f"{streams.all_metadata()}",
        )


async def test_a_batch_run_over_two_members_stops_with_the_counts_of_the_truth(bootstrap_servers: str, tmp_path: Path) -> None:
    """KIP-95 under the streams protocol: the member running task 0_0 starts the run (a streams group has
    no leader member), both stop at the end of the input with the word counts equal to the truth."""
    app_id, source, sink = unique_topic("sg-auto"), unique_topic("sg-auto-lines"), unique_topic("sg-auto-counts")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, sink, PARTITIONS)
    words = ["alpha", "beta", "gamma", "delta", "eps"]
    text = [f"{words[i % 5]} {words[(i * 3) % 5]} {words[(i * 7) % 5]}" for i in range(400)]
    await produce(bootstrap_servers, source, [(None, line.encode(), i % PARTITIONS) for i, line in enumerate(text)])
    configs = [
        autostop_config(bootstrap_servers, app_id, tmp_path / f"i{n}", extra={"group.protocol": "streams", "statestore.cache.max.bytes": 0})
        for n in range(2)
    ]
    await run_instances(lambda: autostop_word_count(source, sink), configs)
    counts = {r.key: int.from_bytes(r.value or b"", "big", signed=True) for r in await read_all(bootstrap_servers, sink)}
    assert {k.decode(): v for k, v in counts.items() if k is not None} == dict(Counter(w for line in text for w in line.split()))
