"""KafkaStreams under `group.protocol=streams` (KIP-1071) on the fake cluster and its fake streams group coordinator.

The thread, task manager and guarantee are the classic protocol's; only the main consumer differs
(clients/streams_group_consumer.py). These tests pin what the member does to them: tasks split and
handed over with revocation before assignment, counts exact, discovery from the broker's endpoints,
leaving on close (epoch -1), fencing (tasks lost, rejoin with epoch 0) and fatal errors.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from streams_core import KafkaStreams, ShutdownRequestedError, StreamThreadExceptionResponse
from streams_core.clients.streams_group_fake_coordinator import FakeStreamsGroupCoordinator
from streams_core.common.host_info import HostInfo
from streams_core.common.task_id import TaskId
from streams_core.testing import FakeKafkaCluster
from streams_core.testing.fake_streams_group import fake_streams_group

from .harness import (
    APP,
    ROUND_WORDS,
    STRING,
    Instance,
    cluster_with,
    eventually,
    long,
    output_counts,
    passthrough_topology,
    produce_rounds,
    start_counting,
    streams_config,
)
from .test_error_handlers import exploding_topology

STREAMS = {"group.protocol": "streams"}
WORDS = ROUND_WORDS


async def start(cluster: FakeKafkaCluster, tmp_path: Path, index: int, extra: dict[str, Any] | None = None) -> Instance:
    return await start_counting(
        cluster, tmp_path, index, {**STREAMS, "application.server": f"127.0.0.1:{9000 + index}", **(extra or {})}
    )


def group(cluster: FakeKafkaCluster) -> FakeStreamsGroupCoordinator:
    return fake_streams_group(cluster, APP)


async def split(cluster: FakeKafkaCluster, *instances: Instance, tasks: int = 4) -> None:
    """Every instance RUNNING, the group's tasks all running, each on exactly one instance."""

    def done() -> bool:
        owned = [instance.tasks() for instance in instances]
        return (
            all(i.streams.state is KafkaStreams.State.RUNNING for i in instances)
            and sum(len(o) for o in owned) == tasks
            and len(set().union(*owned)) == tasks
            and all(owned)
        )

    await eventually(done, timeout=5, what="the tasks split over every instance, all RUNNING")


def last_counts(cluster: FakeKafkaCluster) -> dict[str, int | None]:
    return {k: v[-1] for k, v in output_counts(cluster).items()}


async def test_one_member_runs_every_task_and_counts(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    first = await start(cluster, tmp_path, 0)
    await split(cluster, first)
    assert first.tasks() == {TaskId(0, p) for p in range(4)}
    assert not cluster.members(APP), "no classic group is joined"
    sent = produce_rounds(cluster, 2)
    await eventually(lambda: last_counts(cluster) == dict(sent), what="the counts")
    member = next(iter(group(cluster).members.values()))
    assert member.process_id == first.streams.process_id and member.endpoint == HostInfo("127.0.0.1", 9000)
    await first.close()


async def test_two_members_split_hand_over_and_leave_with_exact_counts(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    first = await start(cluster, tmp_path, 0)
    await split(cluster, first)
    sent = produce_rounds(cluster, 3)
    await eventually(lambda: last_counts(cluster) == dict(sent), what="the first counts")
    second = await start(cluster, tmp_path, 1)
    await split(cluster, first, second)
    assert len(first.tasks()) == len(second.tasks()) == 2
    sent += produce_rounds(cluster, 3, start_ts=1000)
    await eventually(lambda: last_counts(cluster) == dict(sent), what="counts over both members")
    first_id = next(m for m, v in group(cluster).members.items() if v.process_id == first.streams.process_id)
    await first.close()
    await split(cluster, second)
    assert [r.member_epoch for r in group(cluster).requests if r.member_id == first_id][-1] == -1, "left with epoch -1"
    sent += produce_rounds(cluster, 2, start_ts=2000)
    await eventually(lambda: last_counts(cluster) == dict(sent), what="counts after the first left")
    await second.close()
    for key, values in output_counts(cluster).items():
        assert values == list(range(1, sent[key] + 1)), f"{key}: {values} (a handover reprocessed or lost records)"


async def test_revocation_comes_before_assignment_of_a_task_elsewhere(tmp_path: Path) -> None:
    """Every task runs on one instance at a time: the second gets a task only after the first closed it."""
    cluster = cluster_with(4)
    first = await start(cluster, tmp_path, 0)
    await split(cluster, first)
    overlaps: list[set[TaskId]] = []
    second = await start(cluster, tmp_path, 1)

    def watch() -> bool:
        common = first.tasks() & second.tasks()
        if common:
            overlaps.append(common)
        return len(first.tasks()) == len(second.tasks()) == 2 and second.streams.state is KafkaStreams.State.RUNNING

    await eventually(watch, timeout=5, what="the split")
    assert not overlaps, f"tasks open on both instances at once: {overlaps}"
    await first.close()
    await second.close()


async def test_discovery_lists_both_endpoints_with_their_partitions(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    first = await start(cluster, tmp_path, 0)
    second = await start(cluster, tmp_path, 1)
    await split(cluster, first, second)

    def hosts(instance: Instance) -> dict[HostInfo, set[int]]:
        return {m.host_info: {tp.partition for tp in m.topic_partitions} for m in instance.streams.all_metadata()}

    expected = {
        HostInfo("127.0.0.1", 9000): {t.partition for t in first.tasks()},
        HostInfo("127.0.0.1", 9001): {t.partition for t in second.tasks()},
    }
    await eventually(lambda: hosts(first) == expected and hosts(second) == expected, what="both endpoints known to both")
    for word in WORDS:
        partition = first.streams.query_metadata_for_key("counts", word, STRING).partition
        owner = 9000 if TaskId(0, partition) in first.tasks() else 9001
        assert first.streams.metadata_for_key("counts", word, STRING).host_info == HostInfo("127.0.0.1", owner)
    await first.close()
    await eventually(lambda: set(hosts(second)) == {HostInfo("127.0.0.1", 9001)}, what="the left member's endpoint dropped")
    await second.close()


async def test_a_fenced_member_loses_its_tasks_and_rejoins_with_epoch_0(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    first = await start(cluster, tmp_path, 0)
    await split(cluster, first)
    sent = produce_rounds(cluster, 2)
    await eventually(lambda: last_counts(cluster) == dict(sent), what="the counts")
    coordinator = group(cluster)
    (member_id, member), = coordinator.members.items()
    member.epoch += 10  # the broker moved on: the member's next heartbeat is FENCED_MEMBER_EPOCH
    await eventually(
        lambda: any(r.member_id == member_id and r.member_epoch == 0 and r.topology is not None for r in coordinator.requests[2:]),
        what="a rejoin with epoch 0 and the same member id",
    )
    await split(cluster, first)
    sent += produce_rounds(cluster, 2, start_ts=1000)
    # at-least-once: what the fenced member processed after its last commit is processed again, none lost
    await eventually(
        lambda: all((last_counts(cluster).get(k) or 0) >= n for k, n in sent.items()), what="counts after the rejoin"
    )
    await first.close()


async def test_a_topology_the_group_refuses_fails_the_thread_naming_the_error(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    first = await start(cluster, tmp_path, 0)
    await split(cluster, first)
    cluster.create_topic("in2", 4)
    two_subtopologies = passthrough_topology().add_source("SRC2", "in2").add_sink("SINK2", "out", "SRC2")
    other = Instance(cluster, two_subtopologies, streams_config(tmp_path, STREAMS, instance=1))
    errors: list[BaseException] = []

    def handler(error: BaseException) -> StreamThreadExceptionResponse:
        errors.append(error)
        return StreamThreadExceptionResponse.SHUTDOWN_CLIENT

    other.streams.set_uncaught_exception_handler(handler)
    await other.start(wait=False)
    await eventually(lambda: other.streams.state is KafkaStreams.State.ERROR, timeout=5, what="the refused instance in ERROR")
    assert errors and "STREAMS_INVALID_TOPOLOGY" in str(errors[0])
    assert first.streams.state is KafkaStreams.State.RUNNING
    await other.close()
    await first.close()


async def test_shutdown_application_stops_every_instance_through_the_group(tmp_path: Path) -> None:
    """SHUTDOWN_APPLICATION under the streams protocol: the failing instance's request reaches the group as
    ShutdownApplication in a heartbeat, the coordinator answers every member with the SHUTDOWN_APPLICATION
    status, and the other instance's thread stops with ShutdownRequestedError."""
    cluster = cluster_with(2)
    failing = Instance(cluster, exploding_topology(), streams_config(tmp_path, STREAMS, instance=0))
    failing.streams.set_uncaught_exception_handler(lambda error: StreamThreadExceptionResponse.SHUTDOWN_APPLICATION)
    other = Instance(cluster, exploding_topology(), streams_config(tmp_path, STREAMS, instance=1))
    await failing.start(wait=False)
    await other.start(wait=False)
    await eventually(lambda: len(failing.tasks()) == len(other.tasks()) == 1, timeout=5, what="a task each")
    (task,) = failing.tasks()
    cluster.produce("in", "poison", long(13), partition=task.partition)
    await eventually(
        lambda: failing.streams.state is KafkaStreams.State.ERROR and other.streams.state is KafkaStreams.State.ERROR,
        timeout=10,
        what="both instances shut down",
    )
    assert other.streams.errors and all(isinstance(e, ShutdownRequestedError) for e in other.streams.errors), other.streams.errors
    requests = [r for r in group(cluster).requests if r.shutdown_application]
    assert requests and requests[0].member_epoch == 0, "a member joined asking every member to shut down"
    await failing.close()
    await other.close()
    assert group(cluster).shutdown_requested_by is None, "forgotten once the group is empty"


async def test_exactly_once_join_and_leave_under_load_count_every_record_once(tmp_path: Path) -> None:
    """Under exactly_once_v2 the offsets go with each task's transaction, as under the classic protocol."""
    cluster = cluster_with(4)
    eos = {"processing.guarantee": "exactly_once_v2"}
    first = await start(cluster, tmp_path, 0, eos)
    await split(cluster, first)
    sent: Counter[str] = Counter()
    for r in range(4):
        sent.update(produce_rounds(cluster, 1, start_ts=r * 100))
    second = await start(cluster, tmp_path, 1, eos)
    for r in range(4, 8):
        sent.update(produce_rounds(cluster, 1, start_ts=r * 100))
        await asyncio.sleep(0.01)
    await split(cluster, first, second)
    await second.close()
    await eventually(lambda: last_counts(cluster) == dict(sent), timeout=5, what="final counts")
    await first.close()
    for key, values in output_counts(cluster).items():
        assert values == list(range(1, sent[key] + 1)), f"{key}: {values} (duplicates or gaps in committed output)"
