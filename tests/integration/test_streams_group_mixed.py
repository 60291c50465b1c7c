"""A Java Kafka Streams instance and a Python KafkaStreams instance of one application, in one streams group.

The Java peer (tests/integration/java/streams_group_peer/, as in test_streams_group_java_parity.py) runs
the word count with `group.protocol=streams`; our runtime runs the same word count with
`group.protocol=streams` and the same application id. The broker splits the 8 tasks between them; the
records of one sub-topology's tasks on one side go through the repartition topic to the other side's
counting tasks, so the counts are right only if both write and read the same bytes. Then the Java
instance closes: the Python instance takes every task, restoring the counts from the changelog Java's
RocksDB stores wrote, and the counts stay exact. Discovery on the Python side lists both endpoints.
Java's output comes at its commits (30 s by default, with caching), so deadlines are long.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from streams_core import Serdes
from streams_core.clients.streams_group_channel import StreamsGroupChannel
from streams_core.clients.streams_group_protocol import StreamsGroupDescription
from streams_core.common.host_info import HostInfo
from streams_core.runtime.kafka_streams import KafkaStreams, State
from tests.integration.streams_testkit import RecordSender, instance_tasks, wait_until
from tests.integration.test_streams_group_java_parity import JAVA_ENDPOINT, StartJava, Topics, classpath, java
from tests.integration.test_streams_group_protocol import PARTITIONS, admin, all_tasks
from tests.integration.test_streams_group_runtime import lines, word_count
from tests.kafka_utils import create_topic, read_all, unique_topic

pytestmark = [pytest.mark.broker, pytest.mark.slow]

__all__ = ["admin", "classpath", "java"]  # the fixtures, re-exported for this module's test

DEADLINE_S = 120.0
PYTHON_ENDPOINT = HostInfo("127.0.0.1", 18095)
LONG = Serdes.Long()


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


def python_instance(bootstrap_servers: str, app: str, source: str, sink: str, tmp_path: Path) -> KafkaStreams:
    """Our word count in the streams group `app`, with the endpoint the tests look for."""
    return KafkaStreams(word_count(source, sink)(), {
        "application.id": app, "bootstrap.servers": bootstrap_servers, "group.protocol": "streams",
        "application.server": str(PYTHON_ENDPOINT), "state.dir": str(tmp_path / "python"),
        "default.key.serde": Serdes.String(), "default.value.serde": Serdes.String(), "commit.interval.ms": 100,
    })  # fmt: skip


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

            async def java_has_everything() -> bool:
                assert peer.process.poll() is None, peer.output()[-4000:]
                described = await describe(channel)
                return described is not None and {
                    t for m in described.members if m.user_endpoint == JAVA_ENDPOINT for t in m.assignment.active
                } == all_tasks()

            await wait_until(java_has_everything, DEADLINE_S, interval=0.5, message=lambda: peer.output()[-3000:])
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

    async def java_has_everything() -> bool:
        assert peer.process.poll() is None, peer.output()[-4000:]
        described = await describe(channel)
        return described is not None and described.error_code == 0 and {
            t for m in described.members for t in m.assignment.active
        } == all_tasks()

    await wait_until(java_has_everything, DEADLINE_S, interval=0.5, message=lambda: peer.output()[-3000:])
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
