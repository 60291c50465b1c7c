"""Java Kafka Streams and we register the same topologies in a streams group (KIP-1071).

The Java instance (tests/integration/java/streams_group_peer/, compiled against kafka-streams of the
broker's version from Maven Central, cached under .cache/) runs with `group.protocol=streams`; the broker
records the topology it sends, which StreamsGroupDescribe returns. That must equal what
`streams_group_topology` builds for the same Python topology, and a Python member with that topology
must share the group's tasks with the Java one: the 4.3.1 broker refuses a member whose topology differs
in anything from the group's (INVALID_REQUEST, "Topology updates are not supported yet").
"""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from streams_core import JoinWindows, Materialized, Serdes, SessionWindows, Stores, StreamsBuilder, TimeWindows
from streams_core.clients.streams_group_channel import StreamsGroupChannel
from streams_core.clients.streams_group_membership import MemberInfo, MemberState, StreamsGroupMembership
from streams_core.clients.streams_group_protocol import StreamsGroupDescription, StreamsGroupTopology, Subtopology, TopicInfo
from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.runtime.assignment.streams_group_topology import streams_group_topology
from streams_core.runtime.topology_metadata import TopologyMetadata
from tests.integration.test_streams_group_protocol import PARTITIONS, all_tasks, word_count_topology
from tests.kafka_utils import create_topic, unique_topic

pytestmark = [pytest.mark.broker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).resolve().parent / "java" / "streams_group_peer" / "StreamsGroupPeer.java"
CACHE = ROOT / ".cache" / "streams-group-java"
BUILD_DEADLINE_S = 900.0  # Maven Central fetch of kafka-streams' jars on a fresh machine
JAVA_DEADLINE_S = 120.0  # the Java member's join and first assignment (the broker delays it 3 s)
JAVA_ENDPOINT = HostInfo("127.0.0.1", 18081)
S = Serdes.String()


def java_classpath() -> str:
    """kafka-streams' jars (bench/peers/install.py fetches them with Maven) and StreamsGroupPeer compiled once."""
    fetch = "import sys; sys.path.insert(0, 'bench/peers'); import install; print(install.kstreams_classpath())"
    try:
        done = subprocess.run([sys.executable, "-c", fetch], cwd=ROOT, capture_output=True, text=True,
                              timeout=BUILD_DEADLINE_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"fetching kafka-streams from Maven Central took over {BUILD_DEADLINE_S} s (is it reachable?)")
    if done.returncode != 0:
        pytest.fail(f"fetching kafka-streams from Maven Central failed (is it reachable?):\n{done.stderr[-3000:]}")
    libs = done.stdout.strip().splitlines()[-1]
    digest = hashlib.sha256(SOURCE.read_bytes() + libs.encode()).hexdigest()[:16]
    classes = CACHE / digest
    if not (classes / "StreamsGroupPeer.class").exists():
        compiled = subprocess.run(["javac", "-d", str(classes), "-cp", libs, str(SOURCE)], capture_output=True, text=True,
                                  timeout=300)  # fmt: skip
        assert compiled.returncode == 0, compiled.stderr
    return f"{classes}:{libs}"


class JavaInstance:
    """StreamsGroupPeer running `topology` as a child process; closing its standard input makes it close."""

    def __init__(self, classpath: str, bootstrap: str, app: str, topology: str, topics: Topics, work: Path) -> None:
        self.log = work / f"{app}.log"
        self._out: IO[str] = self.log.open("w")
        self.process = subprocess.Popen(
            ["java", "-cp", classpath, "StreamsGroupPeer", bootstrap, app, ",".join(topics.sources), topics.sink,
             str(work / app), f"{JAVA_ENDPOINT.host}:{JAVA_ENDPOINT.port}", topology],
            stdin=subprocess.PIPE, stdout=self._out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip

    def output(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        """Close it (a clean leave), killed if it has not within 45 s."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=45)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self._out.close()


@pytest.fixture(scope="module")
def classpath() -> str:
    return java_classpath()


StartJava = Callable[[str, str, "Topics"], JavaInstance]


@pytest.fixture
def java(classpath: str, bootstrap_servers: str, tmp_path: Path) -> Iterator[StartJava]:
    started: list[JavaInstance] = []

    def start(app: str, topology: str, topics: Topics) -> JavaInstance:
        instance = JavaInstance(classpath, bootstrap_servers, app, topology, topics, tmp_path)
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.stop()


async def described_until(
    channel: StreamsGroupChannel,
    done: Callable[[StreamsGroupDescription], bool],
    java: JavaInstance,
    step: Callable[[], Awaitable[None]] | None = None,
) -> StreamsGroupDescription:
    """Describe the group (after `step()`, e.g. a Python member's heartbeat) until `done`, within JAVA_DEADLINE_S."""
    deadline = time.monotonic() + JAVA_DEADLINE_S
    while True:
        assert java.process.poll() is None, f"the Java instance exited:\n{java.output()[-4000:]}"
        assert "STATE ERROR" not in java.output(), f"the Java instance failed:\n{java.output()[-4000:]}"
        if step is not None:
            await step()
        try:
            described = await channel.describe()
        except KafkaError as exc:  # the coordinator is still starting: retry
            assert exc.retriable, exc
        else:
            if done(described):
                return described
        assert time.monotonic() < deadline, f"not reached within {JAVA_DEADLINE_S} s:\n{java.output()[-4000:]}"
        await asyncio.sleep(0.5)


@dataclass(frozen=True)
class Topics:
    sources: tuple[str, ...]
    sink: str


async def topics(bootstrap: str, sources: int) -> Topics:
    created = Topics(tuple(unique_topic("sg-java-in") for _ in range(sources)), unique_topic("sg-java-out"))
    for topic in (*created.sources, created.sink):
        await create_topic(bootstrap, topic, PARTITIONS)
    return created


def windowed_topology(app: str, sources: tuple[str, ...], sink: str) -> StreamsGroupTopology:
    """StreamsGroupPeer.windowed: window, session and join window stores, a co-partitioned join, a versioned table."""
    left, right, table = sources
    builder = StreamsBuilder()
    lefts = builder.stream(left, key_serde=S, value_serde=S)
    rights = builder.stream(right, key_serde=S, value_serde=S)
    lefts.group_by_key().windowed_by(TimeWindows.of_size_and_grace(60_000, 10_000)).count()
    lefts.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5_000)).count()
    lefts.join(rights, lambda lv, rv: lv + rv, JoinWindows.of_time_difference_with_no_grace(1_000)).to(sink)
    versioned = Materialized.as_(Stores.persistent_versioned_key_value_store("versioned", 3_600_000))
    builder.table(table, versioned, key_serde=S, value_serde=S)
    itb = builder.build().internal_topology_builder
    itb.set_application_id(app)
    return streams_group_topology(TopologyMetadata(itb, app))


#: Topology name (StreamsGroupPeer's argument) -> its source topic count and our build of it.
TOPOLOGIES: dict[str, tuple[int, Callable[[str, tuple[str, ...], str], StreamsGroupTopology]]] = {
    "word-count": (1, lambda app, sources, sink: word_count_topology(app, sources[0], sink)),
    "windowed": (3, lambda app, sources, sink: windowed_topology(app, sources, sink)),
}


def assigned(described: StreamsGroupDescription) -> frozenset[TaskId]:
    return frozenset(t for m in described.members for t in m.assignment.active)


def differences(java: StreamsGroupTopology, ours: StreamsGroupTopology, *, sent: bool) -> list[str]:
    """What differs, field by field per sub-topology (empty: equal).

    `sent`: `ours` is the topology as we send it, where a partition count of 0 leaves it to the broker,
    and a describe answers the counts the broker decided: those are not compared. Nor are the co-partition
    groups: StreamsGroupDescribe v0 has none (the shared group's test shows the broker finds them equal).
    """
    found: list[str] = []
    java_subs = {s.subtopology_id: s for s in java.subtopologies}
    our_subs = {s.subtopology_id: s for s in ours.subtopologies}
    if sorted(java_subs) != sorted(our_subs):
        return [f"sub-topology ids: Java {sorted(java_subs)}, ours {sorted(our_subs)}"]
    for sid, theirs in sorted(java_subs.items()):
        mine = our_subs[sid]
        for name in Subtopology.__dataclass_fields__.keys() - {"copartition_groups"}:
            a, b = _comparable(getattr(theirs, name)), _comparable(getattr(mine, name))
            if sent and isinstance(a, dict) and isinstance(b, dict):
                a = {t: (p if b.get(t, (0,))[0] else 0, *rest) for t, (p, *rest) in a.items()}
            if a != b:
                found.append(f"sub-topology {sid} {name}: Java {a}, ours {b}")
    return found


def _comparable(value: object) -> object:
    """Order-free form of a Subtopology field (TopicInfos as name -> (partitions, replication, configs))."""
    if isinstance(value, tuple) and value and isinstance(value[0], TopicInfo):
        return {t.name: (t.partitions, t.replication_factor, dict(t.configs)) for t in value}
    if isinstance(value, tuple):
        return sorted(value, key=repr)
    return value


def renamed(topology: StreamsGroupTopology, old: str, new: str) -> StreamsGroupTopology:
    """`topology` with the application id prefix of its internal topics changed (to compare two groups)."""

    def name(topic: str) -> str:
        return new + topic[len(old) :] if topic.startswith(f"{old}-") else topic

    def infos(values: tuple[TopicInfo, ...]) -> tuple[TopicInfo, ...]:
        return tuple(replace(t, name=name(t.name)) for t in values)

    return replace(topology, subtopologies=tuple(
        replace(s, source_topics=tuple(map(name, s.source_topics)), state_changelog_topics=infos(s.state_changelog_topics),
                repartition_sink_topics=tuple(map(name, s.repartition_sink_topics)),
                repartition_source_topics=infos(s.repartition_source_topics),
                copartition_groups=tuple(tuple(map(name, g)) for g in s.copartition_groups))
        for s in topology.subtopologies
    ))  # fmt: skip


def python_member(app: str, topology: StreamsGroupTopology, port: int) -> StreamsGroupMembership:
    member = StreamsGroupMembership(app, uuid.uuid4().hex, MemberInfo(str(uuid.uuid4()), topology, HostInfo("127.0.0.1", port)))
    member.join()
    return member


async def heartbeat(channel: StreamsGroupChannel, member: StreamsGroupMembership) -> None:
    """One heartbeat of `member`, installing at once what it is given (what the runtime's loop will do)."""
    try:
        await channel.heartbeat_once(member)
    except KafkaError as exc:  # the coordinator is still starting (offsets topic): retry
        assert exc.retriable, exc
    assert member.state is not MemberState.FATAL, member.fatal_error
    if member.reconciliation is not None:
        step = member.reconciliation
        member.revoked(step)
        member.assigned(step)


@pytest.mark.parametrize("topology", sorted(TOPOLOGIES))
async def test_java_and_python_register_the_same_topology(
    bootstrap_servers: str, admin: AIOKafkaAdminClient, java: StartJava, topology: str
) -> None:
    app = unique_topic("sg-java")
    sources, build = TOPOLOGIES[topology]
    created = await topics(bootstrap_servers, sources)
    instance = java(app, topology, created)
    channel = StreamsGroupChannel(admin, app)
    described = await described_until(channel, lambda d: d.error_code == 0 and assigned(d) == all_tasks(), instance)
    (member,) = described.members
    assert member.user_endpoint == JAVA_ENDPOINT
    java_topology = described.topology
    assert java_topology is not None
    assert [s.subtopology_id for s in java_topology.subtopologies] == ["0", "1"]

    ours = build(app, created.sources, created.sink)
    found = differences(java_topology, ours, sent=True)
    assert not found, "\n".join(found)

    # the same topology under another application id, as the broker records it from our member
    other = unique_topic("sg-python")
    python = python_member(other, build(other, created.sources, created.sink), 18090)
    other_channel = StreamsGroupChannel(admin, other)
    recorded = await described_until(other_channel, lambda d: d.error_code == 0 and assigned(d) == all_tasks(), instance,
                                     lambda: heartbeat(other_channel, python))  # fmt: skip
    assert recorded.topology is not None
    found = differences(java_topology, renamed(recorded.topology, other, app), sent=False)
    assert not found, "\n".join(found)
    python.leave()
    await other_channel.heartbeat_once(python)


@pytest.mark.parametrize(
    ("topology", "java_first"),
    [("word-count", True), ("word-count", False), ("windowed", True), ("windowed", False)],
    ids=["word-count-java-first", "word-count-python-first", "windowed-java-first", "windowed-python-first"],
)
async def test_java_and_python_members_share_one_group(
    bootstrap_servers: str, admin: AIOKafkaAdminClient, java: StartJava, topology: str, java_first: bool
) -> None:
    app = unique_topic("sg-mixed")
    sources, build = TOPOLOGIES[topology]
    created = await topics(bootstrap_servers, sources)
    channel = StreamsGroupChannel(admin, app)
    python = python_member(app, build(app, created.sources, created.sink), 18091)
    if java_first:
        instance = java(app, topology, created)
        await described_until(channel, lambda d: d.error_code == 0 and assigned(d) == all_tasks(), instance)
    else:
        deadline = time.monotonic() + JAVA_DEADLINE_S
        while python.owned.active != all_tasks():
            assert time.monotonic() < deadline, f"the Python member got no tasks: {python.state} {python.statuses}"
            await heartbeat(channel, python)
            await asyncio.sleep(0.2)
        instance = java(app, topology, created)

    def split(described: StreamsGroupDescription) -> bool:
        members = {m.member_id: m.assignment.active for m in described.members}
        ours = members.get(python.member_id, frozenset())
        theirs = [tasks for member_id, tasks in members.items() if member_id != python.member_id]
        return (
            len(theirs) == 1 and bool(ours) and bool(theirs[0]) and not ours & theirs[0]
            and ours | theirs[0] == all_tasks() and python.owned.active == ours and python.state is MemberState.STABLE
        )  # fmt: skip

    described = await described_until(channel, split, instance, lambda: heartbeat(channel, python))
    assert described.state == "Stable", described
    assert abs(len(python.owned.active) - len(assigned(described) - python.owned.active)) <= 1
    assert {m.user_endpoint for m in described.members} == {JAVA_ENDPOINT, HostInfo("127.0.0.1", 18091)}

    python.leave()
    await channel.heartbeat_once(python)
    assert python.state is MemberState.LEFT
    await described_until(channel, lambda d: len(d.members) == 1 and assigned(d) == all_tasks(), instance)
