"""IQv2 (`KafkaStreams.query`) against the real broker, the stores in two worker processes.

Each partition is asked of the worker that holds it, through the one store path: key and range
queries answer from both workers with their copies' positions, and a stalled worker (SIGSTOP)
costs only its own partitions, which come back as STORE_EXCEPTION results by the deadline.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from streams_core import (
    FailureReason,
    Grouped,
    KafkaStreams,
    KeyQuery,
    Materialized,
    MultiVersionedKeyQuery,
    Position,
    PositionBound,
    RangeQuery,
    Serdes,
    StateQueryRequest,
    StateQueryResult,
    Stores,
    StreamsBuilder,
    TimestampedKeyQuery,
    TimeWindows,
    Topology,
    VersionedRecord,
    WindowKeyQuery,
)
from streams_core.runtime.kafka_streams import State, StreamThreadExceptionResponse
from tests.integration import streams_testkit as kit
from tests.integration.group_protocol import UNDER_STREAMS
from tests.integration.test_worker_processes import PARTITIONS, PROCESS_MODE, counting_topology, keyed, setup_topics, worker_pids
from tests.kafka_utils import Rec, create_topic, produce, unique_topic

pytestmark = pytest.mark.broker


async def all_answered(streams: KafkaStreams, request: StateQueryRequest[Any], timeout: float = 30.0) -> StateQueryResult[Any]:
    """The result of `request` once every partition succeeds (a rebalance of the workers' tasks may
    briefly answer NOT_ACTIVE or NOT_PRESENT: retry, as a caller would)."""
    deadline = time.monotonic() + timeout
    while True:
        result = await streams.query(request)
        if len(result.get_partition_results()) == PARTITIONS and all(r.is_success() for r in result.get_partition_results().values()):
            return result
        assert time.monotonic() < deadline, f"not every partition answered: {dict(result.get_partition_results())}"
        await asyncio.sleep(0.1)


async def test_queries_are_answered_per_partition_by_the_workers_and_a_stalled_one_fails_alone(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    source, sink = await setup_topics(bootstrap_servers)
    records = keyed("k", 200)
    await produce(bootstrap_servers, source, records)
    async with kit.StreamsApp(
        bootstrap_servers, tmp_path, partial(counting_topology, source, sink), config=PROCESS_MODE
    ) as app:
        streams = await app.start(0)
        await app.wait_settled(kit.tasks_of(PARTITIONS))
        await kit.wait_until(  # at once under the classic protocol; the second member's tasks at a heartbeat under streams
            lambda: all(m.active_tasks for m in streams.metadata_for_local_threads()),
            30 if UNDER_STREAMS else 0,
            message=lambda: f"a worker without tasks: {streams.metadata_for_local_threads()}",
        )
        await kit.wait_for_output_keys(bootstrap_servers, sink, [k for k, _ in records])
        counts = StateQueryRequest.in_store("counts")

        for key, _ in records[::25]:
            result = await all_answered(streams, counts.with_query(KeyQuery.with_key(key)))
            only = result.get_only_partition_result()
            assert only is not None and only.get_result() == 1, key

        ranged = await all_answered(streams, counts.with_query(RangeQuery.with_no_bounds()).enable_execution_info())
        keys: list[bytes] = []
        for partition, answer in sorted(ranged.get_partition_results().items()):
            entries = list(answer.get_result())
            assert entries and [kv.key for kv in entries] == sorted(kv.key for kv in entries), "one copy's range, in key order"
            keys += [kv.key for kv in entries]
            # its copy's position names its partition, a copy a late task move between the workers
            # reopened too: it saved its position with its checkpoint (docs/iqv2.md)
            position = answer.get_position()
            assert position is not None and set(position.get_partition_positions(source)) == {partition}, position
            assert answer.get_execution_info()
        assert sorted(keys) == sorted(key for key, _ in records), "every key in exactly one partition"

        reached = PositionBound.at(ranged.get_position())
        bounded = await streams.query(counts.with_query(KeyQuery.with_key(records[0][0])).with_position_bound(reached))
        assert all(r.is_success() for r in bounded.get_partition_results().values())
        ahead = PositionBound.at(Position.from_map({source: dict.fromkeys(range(PARTITIONS), 10**9)}))
        behind = await streams.query(counts.with_query(KeyQuery.with_key(records[0][0])).with_position_bound(ahead))
        assert {r.get_failure_reason() for r in behind.get_partition_results().values()} == {FailureReason.NOT_UP_TO_BOUND}

        thread, pid = sorted(worker_pids(streams).items())[0]
        stalled = {t.task_id.partition for m in streams.metadata_for_local_threads() if m.thread_name == thread for t in m.active_tasks}
        assert stalled and stalled != set(range(PARTITIONS))
        os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            result = await streams.query(counts.with_query(RangeQuery.with_no_bounds()), timeout=1.0)
            took = time.monotonic() - started
        finally:
            os.kill(pid, signal.SIGCONT)
        assert took < 5.0, f"the deadline holds: {took:.2f} s"
        failed = {p for p, r in result.get_partition_results().items() if r.is_failure()}
        assert failed == stalled
        assert {result.get_partition_results()[p].get_failure_reason() for p in failed} == {FailureReason.STORE_EXCEPTION}
        assert all(list(r.get_result()) for p, r in result.get_partition_results().items() if p not in stalled)

        await all_answered(streams, counts.with_query(RangeQuery.with_no_bounds()))  # the resumed worker answers again


def dsl_topology(source: str, versioned: str) -> Topology:
    """Counts of `source` per key in a table ("table") and 10 ms windows ("windows"); "versions" a versioned table of `versioned`."""
    text = Serdes.String()
    builder = StreamsBuilder()
    grouped = builder.stream(source, key_serde=text, value_serde=text).group_by_key(Grouped.with_(text, text))
    grouped.count(Materialized.as_("table"))
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).count(Materialized.as_("windows").with_retention(60_000))
    versions = Materialized.as_(Stores.persistent_versioned_key_value_store("versions", 10_000))
    builder.table(versioned, versions, key_serde=text, value_serde=text)
    built: Topology = builder.build()
    return built


async def test_timestamped_window_and_versioned_queries_cross_the_worker_channel(bootstrap_servers: str, tmp_path: Path) -> None:
    """The queries, the IQv2 store type and the answers (ValueAndTimestamp, windows, VersionedRecords) pickle both ways."""
    source, versioned = unique_topic("iqv2-in"), unique_topic("iqv2-versions")
    await create_topic(bootstrap_servers, source, PARTITIONS)
    await create_topic(bootstrap_servers, versioned, PARTITIONS)
    await produce(bootstrap_servers, source, [Rec(b"a", b"x", timestamp_ms=t) for t in (1, 3, 12)])
    await produce(bootstrap_servers, versioned, [Rec(b"k", v, timestamp_ms=t) for v, t in ((b"v1", 100), (b"v2", 200))])
    async with kit.StreamsApp(
        bootstrap_servers, tmp_path, partial(dsl_topology, source, versioned), config=PROCESS_MODE
    ) as app:
        streams = await app.start(0)
        await app.wait_settled(kit.tasks_of(PARTITIONS, 0) | kit.tasks_of(PARTITIONS, 1))

        async def answer(store: str, query: object, expected: object) -> None:
            """The partitions' answers to `query` (a value, or an iterator's entries, joined) once they are
            `expected` (the workers process meanwhile); a range answers an iterator in every partition."""
            found: object = None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                result: StateQueryResult[object] = await streams.query(StateQueryRequest.in_store(store).with_query(query))  # type: ignore[arg-type]
                answers = [r.get_result() for r in result.get_partition_results().values()]
                if any(hasattr(a, "__next__") for a in answers):
                    found = [entry for a in answers for entry in a]  # type: ignore[attr-defined]
                else:
                    found = next((a for a in answers if a is not None), None)
                if found == expected:
                    return
                await asyncio.sleep(0.1)
            raise AssertionError(f"{store}: {query!r} answered {found!r}, not {expected!r}")

        await answer("table", TimestampedKeyQuery.with_key("a"), (3, 12))
        await answer("windows", WindowKeyQuery.with_key_and_window_start_range("a", 0, 10), [(0, 2), (10, 1)])
        await answer("versions", MultiVersionedKeyQuery.with_key("k").with_ascending_timestamps(),
                     [VersionedRecord("v1", 100, 200), VersionedRecord("v2", 200, None)])  # fmt: skip
        wrong = await streams.query(StateQueryRequest.in_store("versions").with_query(KeyQuery.with_key("k")))
        assert {r.get_failure_reason() for r in wrong.get_partition_results().values()} == {FailureReason.UNKNOWN_QUERY_TYPE}


async def test_a_standby_in_a_worker_answers_unless_active_is_required_and_after_failover_it_is_active(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """Two instances, one worker each, two partitions: each holds one active copy and a standby of the
    other. The standby answers a plain query (its position: none) and NOT_ACTIVE under
    require_active(); once its peer leaves, it answers as the active copy, nothing lost."""
    source, sink = unique_topic("iqv2-standby-in"), unique_topic("iqv2-standby-out")
    await create_topic(bootstrap_servers, source, 2)
    await create_topic(bootstrap_servers, sink, 2)
    records = keyed("s", 40)
    await produce(bootstrap_servers, source, records)
    config = {"num.stream.threads": 1, "stream.threads.mode": "process", "num.standby.replicas": 1}
    async with kit.StreamsApp(bootstrap_servers, tmp_path, partial(counting_topology, source, sink), config=config) as app:
        first = await app.start(0)
        await app.start(1)
        tasks = await app.wait_settled(kit.tasks_of(2))
        mine = {t.partition for t in tasks[0]}
        assert len(mine) == 1
        await kit.wait_for_output_keys(bootstrap_servers, sink, [k for k, _ in records])
        everything = StateQueryRequest.in_store("counts").with_query(RangeQuery.with_no_bounds())

        expected = sorted(k for k, _ in records)
        active, other = next(iter(mine)), 1 - next(iter(mine))

        async def answered(request: StateQueryRequest[Any], done: Callable[[dict[int, Any]], bool]) -> dict[int, Any]:
            """Per partition, the keys read or the failure reason, once `done` of them (the standby catches up)."""
            deadline = time.monotonic() + 60
            while True:
                results = (await first.query(request)).get_partition_results()
                found = {p: sorted(kv.key for kv in r.get_result()) if r.is_success() else r.get_failure_reason()
                         for p, r in results.items()}  # fmt: skip
                if done(found):
                    return found
                assert time.monotonic() < deadline, f"not answered in time: {found}"
                await asyncio.sleep(0.2)

        def all_keys(found: dict[int, Any]) -> bool:
            return set(found) == {0, 1} and all(isinstance(v, list) for v in found.values()) and sorted(
                k for v in found.values() for k in v
            ) == expected

        await answered(everything, all_keys)  # the standby answers too
        results = (await first.query(everything)).get_partition_results()
        assert results[other].get_position() is None and results[active].get_position() is not None
        required = await answered(everything.require_active(), lambda found: set(found) == {0, 1})
        assert required[other] is FailureReason.NOT_ACTIVE and isinstance(required[active], list) and required[active]

        await app.stop(1)
        await app.wait_settled(kit.tasks_of(2))
        await answered(everything.require_active(), all_keys)  # failed over: both copies active here, nothing lost


async def test_a_killed_worker_fails_only_its_partitions_and_its_replacement_answers_every_count(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """kill -9 of a worker under exactly-once: IQv2 never raises and never answers a wrong count; a
    partition answers a count of 1 or fails with a reason, until the replacement answers them all."""
    source, sink = await setup_topics(bootstrap_servers)
    records = keyed("kill", 200)
    await produce(bootstrap_servers, source, records)
    config: dict[str, Any] = {**PROCESS_MODE, "processing.guarantee": "exactly_once_v2"}
    async with kit.StreamsApp(bootstrap_servers, tmp_path, partial(counting_topology, source, sink), config=config) as app:
        streams = app.create(0)
        streams.set_uncaught_exception_handler(lambda error: StreamThreadExceptionResponse.REPLACE_THREAD)
        await streams.start()
        await app.wait_settled(kit.tasks_of(PARTITIONS))
        await kit.wait_for_output_keys(bootstrap_servers, sink, [k for k, _ in records])
        everything = StateQueryRequest.in_store("counts").with_query(RangeQuery.with_no_bounds())
        await all_answered(streams, everything)
        first = f"{app.application_id}-StreamThread-1"
        victim = worker_pids(streams)[first]

        os.kill(victim, signal.SIGKILL)
        reasons: set[FailureReason] = set()
        deadline = time.monotonic() + 60
        while worker_pids(streams).get(first) in (None, victim) or reasons == set():
            assert time.monotonic() < deadline, f"no replacement of {first}: {worker_pids(streams)}"
            if streams.state is not State.RUNNING and streams.state is not State.REBALANCING:
                await asyncio.sleep(0.05)  # a stopped instance raises, as Kafka's StreamsStoppedException
                continue
            for partition, result in (await streams.query(everything, timeout=2.0)).get_partition_results().items():
                if result.is_failure():
                    reasons.add(result.get_failure_reason())
                else:
                    counts = {kv.value for kv in result.get_result()}
                    assert counts <= {1}, f"partition {partition}: counts {counts}"
            await asyncio.sleep(0.02)
        assert reasons <= {FailureReason.NOT_ACTIVE, FailureReason.NOT_PRESENT, FailureReason.STORE_EXCEPTION}, reasons

        result = await all_answered(streams, everything, timeout=60)
        entries = [kv for r in result.get_partition_results().values() for kv in r.get_result()]
        assert sorted(kv.key for kv in entries) == sorted(k for k, _ in records) and {kv.value for kv in entries} == {1}
