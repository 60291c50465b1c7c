"""A Java Kafka Streams instance and a Python KafkaStreams instance of one application, in one streams group.

The Java peer (tests/integration/java/streams_group_peer/, as in test_streams_group_java_parity.py) runs
the word count with `group.protocol=streams`; our runtime runs the same word count with
`group.protocol=streams` and the same application id. The broker splits the 8 tasks between them; the
records of one sub-topology's tasks on one side go through the repartition topic to the other side's
counting tasks, so the counts are right only if both write and read the same bytes. Then the Java
instance closes: the Python instance takes every task, restoring the counts from the changelog Java's
RocksDB stores wrote, and the counts stay exact. Discovery on the Python side lists both endpoints.
Java's output comes at its commits (30 s by default, with caching), so deadlines are long.

The kill -9 tests kill either side with SIGKILL while input arrives: it cannot leave, the broker fences
it after the session timeout (10 s on the test broker) and the survivor restores the dead one's stores
from the changelog the other runtime wrote. Both sides run exactly-once there (see their docstrings).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from api.app import create_app
from streams_core import Serdes
from streams_core.clients.streams_group_channel import StreamsGroupChannel
from streams_core.clients.streams_group_protocol import StreamsGroupDescription
from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.runtime.kafka_streams import KafkaStreams, State
from tests.integration.apps.harness import (
    AppProcesses,
    InputFeeder,
    changelog_topic,
    not_one_to_n,
    restored_by_task,
    sequences_by_key,
    wait_all_committed,
)
from tests.integration.streams_testkit import RecordSender, instance_tasks, tasks_of, wait_until
from tests.integration.test_streams_group_java_parity import JAVA_ENDPOINT, JavaInstance, StartJava, Topics, classpath, java
from tests.integration.test_streams_group_protocol import PARTITIONS, all_tasks
from tests.integration.test_streams_group_runtime import KEYS, lines, word_count
from tests.kafka_utils import Consumed, create_topic, read_all, unique_topic

pytestmark = [pytest.mark.broker, pytest.mark.slow]

__all__ = ["classpath", "java"]  # the fixtures, re-exported for this module's test

DEADLINE_S = 120.0
RESTORED = re.compile(r"^RESTORED (\S+)-(\d+) counts (\d+)$", re.MULTILINE)  # StreamsGroupPeer's restore listener
KILL_RECORDS = 4_000  # 100 batches of 40 keyed records, 0.1 s apart, for the counting app
KILL_LINES = 2_000  # 100 batches of 20 lines, 0.1 s apart: input still arrives when an instance is killed
PYTHON_ENDPOINT = HostInfo("127.0.0.1", 18095)
LONG = Serdes.Long()
PEER_CONFIG = "STREAMS_GROUP_PEER_CONFIG"  # StreamsGroupPeer's extra StreamsConfig settings
EXACTLY_ONCE_JAVA = "processing.guarantee=exactly_once_v2,statestore.cache.max.bytes=0"
EXACTLY_ONCE: dict[str, object] = {"processing.guarantee": "exactly_once_v2", "statestore.cache.max.bytes": 0}
"""No caches on either side: every count goes out, so a word's committed outputs are exactly 1..n."""


async def describe(channel: StreamsGroupChannel) -> StreamsGroupDescription | None:
    try:
        return await channel.describe()
    except KafkaError as exc:  # the coordinator is still starting
        assert exc.retriable, exc
        return None


async def last_counts(bootstrap: str, sink: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in await read_all(bootstrap, sink):
        value = LONG.deserialize(sink, record.value)
        assert record.key is not None and value is not None
        counts[record.key.decode()] = value
    return counts


async def test_java_and_python_instances_split_the_tasks_and_count_exactly(
    bootstrap_servers: str, admin: AIOKafkaAdminClient, java: StartJava, tmp_path: Path
) -> None:
    await run_mixed(bootstrap_servers, admin, java, tmp_path, takeover=False)


async def test_python_takes_over_from_a_closed_java_instance_with_exact_counts(
    bootstrap_servers: str, admin: AIOKafkaAdminClient, java: StartJava, tmp_path: Path
) -> None:
    await run_mixed(bootstrap_servers, admin, java, tmp_path, takeover=True)


def python_instance(
    bootstrap_servers: str, app: str, source: str, sink: str, tmp_path: Path, **config: object
) -> KafkaStreams:
    """Our word count in the streams group `app`, with the endpoint the tests look for."""
    return KafkaStreams(word_count(source, sink)(), {
        "application.id": app, "bootstrap.servers": bootstrap_servers, "group.protocol": "streams",
        "application.server": str(PYTHON_ENDPOINT), "state.dir": str(tmp_path / "python"),
        "default.key.serde": Serdes.String(), "default.value.serde": Serdes.String(), "commit.interval.ms": 100,
    } | config)  # fmt: skip


async def tasks_by_endpoint(channel: StreamsGroupChannel) -> dict[HostInfo | None, frozenset[TaskId]]:
    """The active tasks the broker assigns to each endpoint ({} while the group cannot be described)."""
    described = await describe(channel)
    tasks: dict[HostInfo | None, frozenset[TaskId]] = {}
    for member in () if described is None or described.error_code else described.members:
        tasks[member.user_endpoint] = tasks.get(member.user_endpoint, frozenset()) | member.assignment.active
    return tasks


async def split_between(channel: StreamsGroupChannel, peer: JavaInstance, expected: frozenset[TaskId]) -> bool:
    """Java and the other endpoint both have tasks, none on both, `expected` between them."""
    assert peer.process.poll() is None, peer.output()[-4000:]
    assert "STATE ERROR" not in peer.output(), peer.output()[-4000:]
    tasks = await tasks_by_endpoint(channel)
    theirs = tasks.pop(JAVA_ENDPOINT, frozenset())
    ours = frozenset().union(*tasks.values())
    return bool(ours) and bool(theirs) and not ours & theirs and ours | theirs == expected


async def committed_per_partition(bootstrap: str, sink: str) -> tuple[list[Consumed], Counter[int]]:
    """The sink's committed records and how many each partition holds."""
    records = await read_all(bootstrap, sink, isolation_level="read_committed", timeout=30)
    return records, Counter(r.partition for r in records)


async def java_runs(channel: StreamsGroupChannel, peer: JavaInstance, expected: frozenset[TaskId]) -> bool:
    """The Java instance is alive and the broker assigns it `expected`, and no other member anything."""
    assert peer.process.poll() is None, peer.output()[-4000:]
    tasks = await tasks_by_endpoint(channel)
    return tasks.pop(JAVA_ENDPOINT, None) == expected and not any(tasks.values())


async def test_kill_9_of_the_java_instance_moves_its_tasks_to_python_with_exact_counts(
    bootstrap_servers: str, admin: AIOKafkaAdminClient, java: StartJava, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Java (all 8 tasks) then Python: the tasks split; lines arrive; once each of Java's counting tasks
    has committed counts (a task's sink partition is its repartition partition: both keyed by the word,
    murmur2 on both sides), Java gets SIGKILL. After the session timeout the Python instance runs all 8
    tasks, having restored Java's counting tasks from the changelog Java's RocksDB stores wrote, and
    every word's committed counts are exactly 1..n.

    Exactly-once on both sides, not at-least-once: under at-least-once a killed instance's sub-topology 0
    tasks have written repartition records for lines whose offsets they had not committed; the new owner
    reads those lines again and their words are counted twice (at-least-once in Kafka Streams too), so no
    final count could be asserted equal to the truth. Under exactly-once the dead instance's open
    transaction is aborted (Java's transaction.timeout.ms, 10 s, and the broker's check for timed-out
    transactions, every 10 s) and nothing it did after its last commit counts."""
    bootstrap = bootstrap_servers
    monkeypatch.setenv(PEER_CONFIG, EXACTLY_ONCE_JAVA)
    app = unique_topic("sg-mixed-kill-java")
    created = Topics((unique_topic("sg-mixed-in"),), unique_topic("sg-mixed-out"))
    for topic in (*created.sources, created.sink):
        await create_topic(bootstrap, topic, PARTITIONS)
    (source,), sink = created.sources, created.sink
    channel = StreamsGroupChannel(admin, app)
    peer = java(app, "word-count", created)
    await wait_until(lambda: java_runs(channel, peer, frozenset(all_tasks())), DEADLINE_S, interval=0.5,
                     message=lambda: peer.output()[-3000:])  # fmt: skip
    streams = python_instance(bootstrap, app, source, sink, tmp_path, **EXACTLY_ONCE)
    expected: Counter[str] = Counter()

    async def feed(sender: RecordSender) -> None:
        for start in range(0, KILL_LINES, 20):
            records, words = lines(start, 20)
            await sender.send(source, records)
            expected.update(words)
            await asyncio.sleep(0.1)

    try:
        await streams.start()
        await wait_until(lambda: split_between(channel, peer, frozenset(all_tasks())), DEADLINE_S, interval=0.5,
                         message=lambda: f"{streams.state.name}\n{peer.output()[-3000:]}")  # fmt: skip
        javas = (await tasks_by_endpoint(channel))[JAVA_ENDPOINT]
        counting = {t.partition for t in javas if t.subtopology == 1}
        async with RecordSender(bootstrap) as sender:
            feeder = asyncio.create_task(feed(sender))
            try:
                per_partition: Counter[int] = Counter()

                async def java_counted() -> bool:
                    nonlocal per_partition
                    per_partition = (await committed_per_partition(bootstrap, sink))[1]
                    return all(per_partition[p] >= 20 for p in counting)

                await wait_until(java_counted, DEADLINE_S, interval=0.3,
                                 message=lambda: f"committed per sink partition {dict(per_partition)}, Java's {counting}")  # fmt: skip
                assert not feeder.done(), "the input ended before the kill: feed more lines"
                lines_at_kill = sum(expected.values()) // 3
                peer.process.kill()  # SIGKILL
                peer.process.wait(timeout=30)
                killed = time.monotonic()
                await wait_until(lambda: instance_tasks(streams) == all_tasks() and streams.state is State.RUNNING,
                                 DEADLINE_S, message=lambda: f"python tasks {sorted(map(str, instance_tasks(streams)))}")  # fmt: skip
                takeover_s = time.monotonic() - killed
                await asyncio.wait_for(feeder, DEADLINE_S)
            finally:
                feeder.cancel()
        records: list[Consumed] = []

        async def exact() -> bool:
            nonlocal records
            records = (await committed_per_partition(bootstrap, sink))[0]
            return {w: v[-1] for w, v in sequences_by_key(records).items()} == dict(expected)

        await wait_until(exact, DEADLINE_S, interval=1, message=lambda: f"counts != {dict(expected)}")
        restored = restored_by_task(streams)
        assert streams.state is State.RUNNING, streams.errors
    finally:
        await streams.close(timeout=30)
    assert all(restored[TaskId(1, p)] > 0 for p in counting), f"Java's counting tasks {counting} restored {restored}"
    wrong = not_one_to_n(sequences_by_key(records), expected)
    assert not wrong, f"words whose committed counts are not exactly 1..n: (outputs, n) = {wrong}"
    print(f"\nkill -9 of Java after {lines_at_kill} of {KILL_LINES} lines: the Python instance ran all 8 tasks "
          f"{takeover_s:.1f} s later, restored {sum(restored[TaskId(1, p)] for p in counting)} counts of Java's")  # fmt: skip


async def test_java_takes_over_from_a_closed_python_instance_with_exact_counts(
    bootstrap_servers: str, admin: AIOKafkaAdminClient, java: StartJava, tmp_path: Path
) -> None:
    """Python first, then Java: the tasks split and count exactly; Python closes and Java runs every task,
    restoring the counts from the changelog our SQLite stores wrote (Java's format), the counts still exact."""
    app = unique_topic("sg-mixed-back")
    created = Topics((unique_topic("sg-mixed-in"),), unique_topic("sg-mixed-out"))
    for topic in (*created.sources, created.sink):
        await create_topic(bootstrap_servers, topic, PARTITIONS)
    (source,), sink = created.sources, created.sink
    channel = StreamsGroupChannel(admin, app)
    streams = python_instance(bootstrap_servers, app, source, sink, tmp_path)
    expected: Counter[str] = Counter()

    async def exact() -> bool:
        return await last_counts(bootstrap_servers, sink) == dict(expected)

    try:
        await streams.start()
        await wait_until(lambda: instance_tasks(streams) == all_tasks() and streams.state is State.RUNNING, DEADLINE_S,
                         message=lambda: f"{streams.state.name}, tasks {sorted(map(str, instance_tasks(streams)))}")
        async with RecordSender(bootstrap_servers) as sender:
            records, words = lines(0, 60)
            await sender.send(source, records)
            expected += words
            await wait_until(exact, DEADLINE_S, interval=1, message=lambda: f"counts != {dict(expected)}")
            peer = java(app, "word-count", created)

            async def split() -> bool:
                assert peer.process.poll() is None, peer.output()[-4000:]
                described = await describe(channel)
                if described is None:
                    return False
                theirs = {t for m in described.members if m.user_endpoint == JAVA_ENDPOINT for t in m.assignment.active}
                return bool(theirs) and not theirs & instance_tasks(streams)

            await wait_until(split, DEADLINE_S, interval=0.5, message=lambda: peer.output()[-3000:])
            await streams.close(timeout=30)

            await wait_until(lambda: java_runs(channel, peer, frozenset(all_tasks())), DEADLINE_S, interval=0.5,
                             message=lambda: peer.output()[-3000:])  # fmt: skip
            records, words = lines(60, 60)
            await sender.send(source, records)
            expected += words
            await wait_until(exact, DEADLINE_S, interval=1,
                             message=lambda: f"counts after the takeover != {dict(expected)}\n{peer.output()[-3000:]}")
            assert "STATE ERROR" not in peer.output(), peer.output()[-3000:]
    finally:
        await streams.close(timeout=30)


async def run_mixed(
    bootstrap_servers: str, admin: AIOKafkaAdminClient, java: StartJava, tmp_path: Path, *, takeover: bool
) -> None:
    """Java first, then Python: the tasks split, counts exact, discovery lists both; with `takeover`, Java
    closes and Python must run every task with the counts still exact."""
    app = unique_topic("sg-mixed-run")
    created = Topics((unique_topic("sg-mixed-in"),), unique_topic("sg-mixed-out"))
    for topic in (*created.sources, created.sink):
        await create_topic(bootstrap_servers, topic, PARTITIONS)
    (source,), sink = created.sources, created.sink
    channel = StreamsGroupChannel(admin, app)
    peer = java(app, "word-count", created)
    await wait_until(lambda: java_runs(channel, peer, frozenset(all_tasks())), DEADLINE_S, interval=0.5,
                     message=lambda: peer.output()[-3000:])  # fmt: skip
    streams = python_instance(bootstrap_servers, app, source, sink, tmp_path)
    try:
        await streams.start()

        async def split() -> bool:
            described = await describe(channel)
            if described is None or streams.state is not State.RUNNING or "STATE ERROR" in peer.output():
                return False
            tasks = {m.user_endpoint: m.assignment.active for m in described.members}
            ours = tasks.get(PYTHON_ENDPOINT, frozenset())
            theirs = tasks.get(JAVA_ENDPOINT, frozenset())
            return bool(ours) and bool(theirs) and not ours & theirs and ours | theirs == all_tasks() and ours == instance_tasks(streams)

        await wait_until(split, DEADLINE_S, interval=0.5, message=lambda: f"{streams.state.name}\n{peer.output()[-3000:]}")
        await wait_until(
            lambda: {m.host_info for m in streams.all_metadata()} == {JAVA_ENDPOINT, PYTHON_ENDPOINT},
            30,
            message=lambda: f"discovery lists {[m.host_info for m in streams.all_metadata()]}",
        )
        # The REST layer's discovery is the broker's endpoint map too: the Java instance is listed with its partitions.
        async with httpx.AsyncClient(transport=httpx.ASGITransport(create_app(streams)), base_url=f"http://{PYTHON_ENDPOINT}") as rest:
            answer = await rest.get("/state/instances")
        assert answer.status_code == 200, answer.text
        listed = {HostInfo(i["host"], i["port"]): len(i["topicPartitions"]) for i in answer.json()}
        assert set(listed) == {JAVA_ENDPOINT, PYTHON_ENDPOINT} and all(listed.values()), listed

        expected: Counter[str] = Counter()
        async with RecordSender(bootstrap_servers) as sender:
            records, words = lines(0, 60)
            await sender.send(source, records)
            expected += words

            async def exact() -> bool:
                return await last_counts(bootstrap_servers, sink) == dict(expected)

            await wait_until(exact, DEADLINE_S, interval=1, message=lambda: f"counts != {dict(expected)}\n{peer.output()[-2000:]}")
            if not takeover:
                return
            started = time.monotonic()
            peer.stop()
            assert "CLOSED" in peer.output(), peer.output()[-3000:]
            await wait_until(
                lambda: instance_tasks(streams) == all_tasks() and streams.state is State.RUNNING,
                DEADLINE_S,
                message=lambda: f"python tasks {sorted(map(str, instance_tasks(streams)))}",
            )
            takeover_s = time.monotonic() - started
            records, words = lines(60, 60)
            await sender.send(source, records)
            expected += words
            assert streams.state is State.RUNNING, "the Python instance failed restoring Java's changelog"
            await wait_until(exact, 60, interval=1, message=lambda: f"counts after the takeover != {dict(expected)}")
        print(f"\nmixed streams group: Java closed, the Python instance ran all 8 tasks {takeover_s:.1f} s later")
    finally:
        await streams.close(timeout=30)


async def test_kill_9_of_the_python_instance_moves_its_tasks_to_java_with_exact_counts(
    bootstrap_servers: str, admin: AIOKafkaAdminClient, java: StartJava, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reverse: our counting app as a process (tests/integration/apps/counting_app.py, killable) first,
    with all 4 tasks, then the Java peer's same topology ("count"): the tasks split; keyed input arrives;
    once each of our tasks has committed counts (a key's sink partition is its input partition), our
    process gets SIGKILL. After the session timeout Java runs all 4 tasks, having restored ours from the
    changelog our SQLite stores wrote, and every key's committed counts are exactly 1..n. Exactly-once on
    both sides for the reason the test above gives (our transactions time out after 10 s too)."""
    bootstrap = bootstrap_servers
    monkeypatch.setenv(PEER_CONFIG, EXACTLY_ONCE_JAVA)
    app, source, sink = unique_topic("sg-mixed-kill-py"), unique_topic("sg-mixed-in"), unique_topic("sg-mixed-out")
    for topic in (source, sink):
        await create_topic(bootstrap, topic, PARTITIONS)
    channel = StreamsGroupChannel(admin, app)
    everything = tasks_of(PARTITIONS)
    feeder = InputFeeder(bootstrap, source, KEYS, KILL_RECORDS, chunk=40, pause=0.1)
    try:
        with AppProcesses(tmp_path, bootstrap, app, source, sink) as processes:
            ours = processes.start("python", "exactly_once", "--group-protocol", "streams",
                                   "--application-server", str(PYTHON_ENDPOINT))  # fmt: skip
            await ours.wait_running(timeout=DEADLINE_S)

            async def ours_run_everything() -> bool:
                return await tasks_by_endpoint(channel) == {PYTHON_ENDPOINT: everything}

            await wait_until(ours_run_everything, DEADLINE_S, interval=0.5, message=ours.log_tail)
            peer = java(app, "count", Topics((source,), sink))
            await wait_until(lambda: split_between(channel, peer, everything), DEADLINE_S, interval=0.5,
                             message=lambda: f"{ours.log_tail()}\n{peer.output()[-3000:]}")  # fmt: skip
            pythons = {t.partition for t in (await tasks_by_endpoint(channel))[PYTHON_ENDPOINT]}
            feeder.start()
            per_partition: Counter[int] = Counter()

            async def python_counted() -> bool:
                nonlocal per_partition
                per_partition = (await committed_per_partition(bootstrap, sink))[1]
                return all(per_partition[p] >= 20 for p in pythons)

            await wait_until(python_counted, DEADLINE_S, interval=0.3,
                             message=lambda: f"committed per sink partition {dict(per_partition)}, ours {pythons}")  # fmt: skip
            assert not feeder.done, "the input ended before the kill: feed more records"
            records_at_kill = feeder.produced
            ours.kill()  # SIGKILL
            killed = time.monotonic()
            await wait_until(lambda: java_runs(channel, peer, everything), DEADLINE_S, interval=0.5,
                             message=lambda: peer.output()[-3000:])  # fmt: skip
            takeover_s = time.monotonic() - killed
            truth = await feeder.wait(timeout=DEADLINE_S)
            await wait_all_committed(bootstrap, app, source, timeout=DEADLINE_S)
            assert "STATE ERROR" not in peer.output(), peer.output()[-3000:]
    finally:
        await feeder.aclose()
    committed = await read_all(bootstrap, sink, isolation_level="read_committed", timeout=30)
    wrong = not_one_to_n(sequences_by_key(committed), truth)
    assert not wrong, f"keys whose committed counts are not exactly 1..n: (outputs, n) = {wrong}"
    assert len(committed) == sum(truth.values())
    restored = Counter[int]()
    for topic, partition, records in RESTORED.findall(peer.output()):
        if topic == changelog_topic(app):
            restored[int(partition)] = max(restored[int(partition)], int(records))
    assert all(restored[p] > 0 for p in pythons), f"Java restored {dict(restored)} of our tasks' changelogs {pythons}"
    print(f"\nkill -9 of Python after {records_at_kill} of {KILL_RECORDS} records: the Java instance ran all 4 tasks "
          f"{takeover_s:.1f} s later, restored {sum(restored[p] for p in pythons)} counts of ours")  # fmt: skip
