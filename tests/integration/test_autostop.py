"""KIP-95 `autostop.at=eol` against the real broker, following the seed's test plan.

A batch run stops exactly at the end offsets recorded when it started: records produced after
the start are left for the next run, which processes exactly those. Each test counts what reached
the output and reads the metadata topic to check the markers.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from api.metrics import StreamsMetrics
from streams_core import (
    KafkaStreams,
    Processor,
    ProcessorContext,
    Record,
    Serdes,
    State,
    StreamsBuilder,
    StreamsConfig,
    StreamsError,
    Topology,
)
from streams_core.clients.group_admin import GroupAdmin
from streams_core.runtime.autostop.autostop_metadata import AutostopLog, metadata_topic_name
from streams_core.tools.application_reset import reset_application
from tests.integration.apps.counting_app import build_topology, streams_config
from tests.integration.apps.harness import AppProcesses
from tests.integration.group_protocol import UNDER_STREAMS
from tests.integration.streams_testkit import committed_offsets, instance_tasks, wait_until
from tests.kafka_utils import consume_until, create_topic, produce, read_all, unique_topic

pytestmark = pytest.mark.broker

RUN_TIMEOUT = 90.0


async def produce_keys(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str = "") -> None:
    await produce(
        bootstrap,
        topic,
        [(f"k{p}-{i % 7}".encode(), f"{tag}{i}".encode(), p) for p in range(partitions) for i in range(per_partition)],
    )


async def run_batch(topology: Topology, config: dict[str, Any], *, started: asyncio.Event | None = None) -> KafkaStreams:
    """Start one instance with autostop.at=eol and wait until it closed itself (NOT_RUNNING)."""
    streams = KafkaStreams(topology, {**config, "autostop.at": "eol"})
    await streams.start()
    try:
        if started is not None:
            await streams.wait_for_state(State.RUNNING, timeout=RUN_TIMEOUT)
            if UNDER_STREAMS:  # RUNNING can come with the empty first assignment, before the run's start
                await wait_until(lambda: streams.state is not State.RUNNING or bool(instance_tasks(streams)), RUN_TIMEOUT)
            started.set()
        await streams.wait_for_state(State.NOT_RUNNING, State.ERROR, timeout=RUN_TIMEOUT)
    finally:
        await streams.close()
    assert streams.state is State.NOT_RUNNING, streams.errors
    return streams


async def metadata_log(bootstrap: str, app_id: str) -> tuple[AutostopLog, list[tuple[bytes | None, bytes | None]]]:
    records = await read_all(bootstrap, metadata_topic_name(app_id))
    log = AutostopLog(app_id)
    for r in records:
        log.apply(r.key, r.value)
    return log, [(r.key, r.value) for r in records]


def last_counts(records: list[Any]) -> dict[bytes, int]:
    counts: dict[bytes, int] = {}
    for r in records:
        counts[r.key] = int.from_bytes(r.value, "big", signed=True)
    return counts


@pytest.mark.parametrize("partitions", [1, 3])
async def test_a_run_stops_at_the_end_offsets_of_its_start_and_the_next_run_takes_the_rest(
    bootstrap_servers: str, tmp_path: Path, partitions: int
) -> None:
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("auto"), unique_topic("auto-in"), unique_topic("auto-out")
    await create_topic(bootstrap, source, partitions)
    await create_topic(bootstrap, sink, partitions)
    await produce_keys(bootstrap, source, partitions, 50)
    config = streams_config(bootstrap, app_id, tmp_path / "state")

    started = asyncio.Event()
    late = asyncio.create_task(_produce_once_running(bootstrap, source, partitions, started))
    await run_batch(build_topology(source, sink), config, started=started)
    await late

    first = await read_all(bootstrap, sink)
    assert len(first) == 50 * partitions, "the first run processes exactly what was there at its start"
    committed = await committed_offsets(bootstrap, app_id)
    assert sorted(committed.values()) == [50] * partitions
    log, _ = await metadata_log(bootstrap, app_id)
    state = log.state()
    assert state.finished and sorted(state.stop_offsets.values()) == [50] * partitions

    await run_batch(build_topology(source, sink), config)
    second = await read_all(bootstrap, sink)
    assert len(second) - len(first) == 20 * partitions, "the second run processes exactly the records produced later"
    assert sum(last_counts(second).values()) == 70 * partitions
    log, records = await metadata_log(bootstrap, app_id)
    assert log.state().finished and sorted(log.state().stop_offsets.values()) == [70] * partitions
    assert sum(1 for k, v in records if k == app_id.encode() and v == b"1") == 2, "one finished marker per run"
    assert any(v is None for _, v in records), "the second run tombstoned the first run's entries"


async def _produce_once_running(bootstrap: str, topic: str, partitions: int, started: asyncio.Event) -> None:
    await started.wait()
    await produce_keys(bootstrap, topic, partitions, 20, tag="late-")


async def test_an_empty_input_finishes_at_once(bootstrap_servers: str, tmp_path: Path) -> None:
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("auto-empty"), unique_topic("auto-in"), unique_topic("auto-out")
    await create_topic(bootstrap, source, 2)
    await create_topic(bootstrap, sink, 2)
    await run_batch(build_topology(source, sink), streams_config(bootstrap, app_id, tmp_path))
    assert await read_all(bootstrap, sink) == []
    log, _ = await metadata_log(bootstrap, app_id)
    assert log.state().finished


async def test_a_repartitioned_word_count_reaches_its_final_output_in_the_same_run(bootstrap_servers: str, tmp_path: Path) -> None:
    """Intermediate topics stop at the offsets their producers report (done notifications)."""
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("auto-wc"), unique_topic("auto-lines"), unique_topic("auto-counts")
    await create_topic(bootstrap, source, 2)
    await create_topic(bootstrap, sink, 2)
    lines = [f"alpha beta gamma {i % 5} beta".encode() for i in range(120)]
    await produce(bootstrap, source, [(None, line, i % 2) for i, line in enumerate(lines)])
    truth = Counter(word for line in lines for word in line.decode().split())

    config = streams_config(bootstrap, app_id, tmp_path, extra={"statestore.cache.max.bytes": 0})
    await run_batch(word_count(source, sink), config)
    counts = last_counts(await read_all(bootstrap, sink))
    assert {k.decode(): v for k, v in counts.items()} == dict(truth)
    log, _ = await metadata_log(bootstrap, app_id)
    state = log.state()
    assert state.finished
    sources = {source_tp for source_tp, _ in state.done}
    targets = {target for _, target in state.done}
    assert {(tp.topic, tp.partition) for tp in sources} == {(source, 0), (source, 1)}
    assert len(targets) == 2 and all(t.topic.startswith(app_id) and t.topic.endswith("-repartition") for t in targets)
    assert len(state.done) == 4, "one done notification per input partition and repartition partition"


def word_count(source: str, sink: str) -> Topology:
    """Two sub-topologies through a repartition topic: the seed's deadlock DAG when several instances share them."""
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde=Serdes.String(), value_serde=Serdes.String())
        .flat_map_values(lambda line: line.split())
        .group_by(lambda key, word: word)
        .count()
        .to_stream()
        .to(sink, value_serde=Serdes.Long())
    )
    return builder.build()


def three_stage_count(source: str, sink: str) -> Topology:
    """Three sub-topologies chained through two repartition topics (the seed's multi-stage DAG)."""
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde=Serdes.String(), value_serde=Serdes.String())
        .select_key(lambda key, value: value.split()[0])
        .repartition()
        .map_values(lambda value: value.split()[1])
        .group_by(lambda key, second: second)
        .count()
        .to_stream()
        .to(sink, value_serde=Serdes.Long())
    )
    return builder.build()


async def run_instances(topology: Any, configs: list[dict[str, Any]]) -> list[KafkaStreams]:
    """Start every instance (autostop.at=eol) together and wait until all closed themselves."""
    instances = [KafkaStreams(topology(), {**config, "autostop.at": "eol"}) for config in configs]
    try:
        await asyncio.gather(*(s.start() for s in instances))
        await asyncio.gather(*(s.wait_for_state(State.NOT_RUNNING, State.ERROR, timeout=RUN_TIMEOUT) for s in instances))
    finally:
        await asyncio.gather(*(s.close() for s in instances))
    for streams in instances:
        assert streams.state is State.NOT_RUNNING, streams.errors
    return instances


@pytest.mark.parametrize(
    ("instances", "threads", "guarantee", "shape"),
    [
        (2, 1, "at_least_once", "word-count"),
        (3, 2, "at_least_once", "word-count"),
        (2, 2, "exactly_once", "word-count"),
        (2, 1, "at_least_once", "three-stage"),
        (3, 1, "exactly_once", "three-stage"),
    ],
)
async def test_every_instance_stops_and_the_counts_equal_the_truth(
    bootstrap_servers: str, tmp_path: Path, instances: int, threads: int, guarantee: str, shape: str
) -> None:
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("auto-multi"), unique_topic("auto-lines"), unique_topic("auto-counts")
    await create_topic(bootstrap, source, 4)
    await create_topic(bootstrap, sink, 4)
    words = ["alpha", "beta", "gamma", "delta", "eps"]
    lines = [f"{words[i % 5]} {words[(i * 3) % 5]} {words[(i * 7) % 5]}" for i in range(400)]
    await produce(bootstrap, source, [(None, line.encode(), i % 4) for i, line in enumerate(lines)])
    if shape == "word-count":
        truth = Counter(word for line in lines for word in line.split())
        topology = word_count
    else:
        truth = Counter(line.split()[1] for line in lines)
        topology = three_stage_count
    configs = [
        streams_config(
            bootstrap, app_id, tmp_path / f"i{n}", guarantee,
            extra={"num.stream.threads": threads, "statestore.cache.max.bytes": 0},
        )
        for n in range(instances)
    ]
    await run_instances(lambda: topology(source, sink), configs)
    isolation = "read_committed" if guarantee == "exactly_once" else "read_uncommitted"
    counts = last_counts(await read_all(bootstrap, sink, isolation_level=isolation))
    assert {k.decode(): v for k, v in counts.items()} == dict(truth)
    log, records = await metadata_log(bootstrap, app_id)
    assert log.state().finished
    assert sum(1 for k, v in records if k == app_id.encode() and v == b"1") == 1, "the finished marker is written once"
    committed = await committed_offsets(bootstrap, app_id)
    assert {tp.partition: o for tp, o in committed.items() if tp.topic == source} == {p: 100 for p in range(4)}


def reset_args(app_id: str, bootstrap: str, **options: Any) -> argparse.Namespace:
    defaults: dict[str, Any] = {
        "input_topics": [], "intermediate_topics": [], "to_earliest": False, "to_datetime": None, "to_offset": None,
        "delete_stopoffsets": False, "state_dir": None, "dry_run": False,
    }
    return argparse.Namespace(application_id=app_id, bootstrap_servers=bootstrap, **(defaults | options))


async def test_batch_then_streaming_then_batch_as_the_seed_says(bootstrap_servers: str, tmp_path: Path) -> None:
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("auto-switch"), unique_topic("auto-in"), unique_topic("auto-out")
    await create_topic(bootstrap, source, 2)
    await create_topic(bootstrap, sink, 2)
    await produce_keys(bootstrap, source, 2, 30)
    config = streams_config(bootstrap, app_id, tmp_path)
    await run_batch(build_topology(source, sink), config)
    assert len(await read_all(bootstrap, sink)) == 60

    streaming = KafkaStreams(build_topology(source, sink), config)
    await streaming.start()
    try:
        await streaming.wait_for_state(State.RUNNING, timeout=RUN_TIMEOUT)
        assert not await _topic_exists(bootstrap, metadata_topic_name(app_id)), "streaming deletes stale stop offsets"
        await produce_keys(bootstrap, source, 2, 10, tag="stream-")
        await consume_until(bootstrap, sink, 80, timeout=60)
    finally:
        await streaming.close()

    await produce_keys(bootstrap, source, 2, 5, tag="batch2-")
    await run_batch(build_topology(source, sink), config)
    assert len(await read_all(bootstrap, sink)) == 90
    log, _ = await metadata_log(bootstrap, app_id)
    assert log.state().finished and sorted(log.state().stop_offsets.values()) == [45, 45]


async def _topic_exists(bootstrap: str, topic: str) -> bool:
    async with GroupAdmin(StreamsConfig({"application.id": "probe", "bootstrap.servers": bootstrap})) as admin:
        return topic in await admin.list_topics()


class Slow(Processor[str, bytes, str, bytes]):
    """Forwards each record after 10 ms, so a batch run lasts long enough to be stopped by hand."""

    def init(self, context: ProcessorContext[str, bytes]) -> None:
        self.context = context

    def process(self, record: Record[str, bytes]) -> None:
        time.sleep(0.01)
        self.context.forward(record)


def slow_topology(source: str, sink: str) -> Topology:
    return (
        Topology()
        .add_source("SOURCE", source, key_serde=Serdes.String(), value_serde=Serdes.Bytes())
        .add_processor("SLOW", Slow, "SOURCE")
        .add_sink("SINK", sink, "SLOW", key_serde=Serdes.String(), value_serde=Serdes.Bytes())
    )


@pytest.mark.slow
async def test_delete_stopoffsets_lets_a_batch_stopped_by_hand_start_fresh(bootstrap_servers: str, tmp_path: Path) -> None:
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("auto-manual"), unique_topic("auto-in"), unique_topic("auto-out")
    await create_topic(bootstrap, source, 1)
    await create_topic(bootstrap, sink, 1)
    await produce_keys(bootstrap, source, 1, 300)
    config = streams_config(bootstrap, app_id, tmp_path, extra={"max.poll.records": 10})
    stopped = KafkaStreams(slow_topology(source, sink), {**config, "autostop.at": "eol"})
    await stopped.start()
    await stopped.wait_for_state(State.RUNNING, timeout=RUN_TIMEOUT)
    await asyncio.sleep(0.5)
    progress = stopped.metrics()["threads"][0]["autostop"]
    assert 0 < progress["records_to_go"] < 300 and not progress["finished"]
    assert progress["partitions"][f"{source}-0"]["stop_offset"] == 300
    text = (await StreamsMetrics(stopped).render(1.0)).decode()
    assert f'streams_batch_records_to_go{{partition="0",topic="{source}"}}' in text
    await stopped.close()
    assert 0 < len(await read_all(bootstrap, sink)) < 300, "stopped by hand mid-run"
    log, _ = await metadata_log(bootstrap, app_id)
    assert log.state().valid, "a run stopped by hand is left as a run to continue"

    await produce_keys(bootstrap, source, 1, 20, tag="later-")
    plan = await reset_application(reset_args(app_id, bootstrap, delete_stopoffsets=True))
    assert plan.topics_to_delete == [metadata_topic_name(app_id)] and not plan.offsets
    await run_batch(slow_topology(source, sink), config)
    committed = await committed_offsets(bootstrap, app_id)
    assert list(committed.values()) == [320], "the fresh run's stop offset includes the records produced after the stop"


async def test_the_reset_tool_refuses_an_active_group_and_a_reset_rerun_reaches_the_same_counts(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("auto-reset"), unique_topic("auto-in"), unique_topic("auto-out")
    await create_topic(bootstrap, source, 2)
    await create_topic(bootstrap, sink, 2)
    await produce_keys(bootstrap, source, 2, 40)
    config = streams_config(bootstrap, app_id, tmp_path / "state")
    await run_batch(build_topology(source, sink), config)
    first = last_counts(await read_all(bootstrap, sink))
    assert sum(first.values()) == 80

    active = KafkaStreams(build_topology(source, sink), config)
    await active.start()
    try:
        await active.wait_for_state(State.RUNNING, timeout=RUN_TIMEOUT)
        with pytest.raises(StreamsError, match="still has active members"):
            await reset_application(reset_args(app_id, bootstrap, input_topics=[source]))
    finally:
        await active.close()

    dry = await reset_application(reset_args(app_id, bootstrap, input_topics=[source], dry_run=True))
    assert f"{app_id}-counts-changelog" in dry.topics_to_delete and set(dry.offsets.values()) == {0}
    assert await _topic_exists(bootstrap, f"{app_id}-counts-changelog"), "a dry run changes nothing"
    plan = await reset_application(reset_args(app_id, bootstrap, input_topics=[source], state_dir=str(tmp_path / "state")))
    assert {tp.partition: o for tp, o in plan.offsets.items()} == {0: 0, 1: 0}
    assert not (tmp_path / "state" / app_id).exists()
    await asyncio.sleep(1.0)  # topic deletion settles before the rerun recreates the changelog
    await run_batch(build_topology(source, sink), config)
    after = await read_all(bootstrap, sink)
    assert len(after) == 160 and last_counts(after) == first, "the rerun counted from scratch to the same counts"


@pytest.mark.slow
async def test_a_kill_9_restart_reuses_the_first_runs_stop_offsets(bootstrap_servers: str, tmp_path: Path) -> None:
    """Exactly-once, killed mid-run while more input arrives: the restart stops where the first start said."""
    bootstrap = bootstrap_servers
    app_id, source, sink = unique_topic("auto-kill"), unique_topic("auto-in"), unique_topic("auto-out")
    await create_topic(bootstrap, source, 2)
    await create_topic(bootstrap, sink, 2)
    await produce_keys(bootstrap, source, 2, 4000)
    with AppProcesses(tmp_path, bootstrap, app_id, source, sink) as procs:
        app = procs.start("a", "exactly_once", "--autostop", "eol", "--commit-interval-ms", "200")
        await app.wait_running(timeout=90)
        log, _ = await metadata_log(bootstrap, app_id)
        assert log.state().valid and sorted(log.state().stop_offsets.values()) == [4000, 4000]
        app.kill()
        await produce_keys(bootstrap, source, 2, 500, tag="after-kill-")
        again = procs.start("a", "exactly_once", "--autostop", "eol", "--commit-interval-ms", "200")
        assert await asyncio.to_thread(again.proc.wait, RUN_TIMEOUT) == 0, again.log_tail()
    committed = await committed_offsets(bootstrap, app_id)
    assert {tp.partition: o for tp, o in committed.items() if tp.topic == source} == {0: 4000, 1: 4000}
    counts = last_counts(await read_all(bootstrap, sink, isolation_level="read_committed"))
    assert sum(counts.values()) == 8000, "exactly the first run's records, each counted once"
    log, _ = await metadata_log(bootstrap, app_id)
    assert log.state().finished and sorted(log.state().stop_offsets.values()) == [4000, 4000]
