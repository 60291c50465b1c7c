"""KafkaStreams against the real broker: start-up errors, poison records, dying threads (issue 4)."""

from __future__ import annotations

import asyncio
import struct
from functools import partial
from pathlib import Path

import pytest

from streams_core import ConfigError, DeserializationError, Serdes
from streams_core.common.topic_partition import TopicPartition
from streams_core.errors import MissingSinkTopicError
from streams_core.runtime.assignment import CopartitioningError, MissingSourceTopicError, ShutdownRequestedError
from streams_core.runtime.kafka_streams import KafkaStreams, State, StreamThreadExceptionResponse
from streams_core.runtime.threads.thread_state import ThreadState
from tests.integration.streams_testkit import (
    Recorder,
    StreamsApp,
    committed_offsets,
    instance_tasks,
    metric_total,
    passthrough_topology,
    recording_topology,
    tasks_of,
    wait_until,
)
from tests.kafka_utils import Rec, create_topic, produce, read_all, unique_topic

POISON_OFFSET = 10


def long_records(partition: int, count: int, poison_at: int | None = None) -> list[Rec]:
    """`count` records of 8-byte longs; at `poison_at` a 3-byte value Serdes.Long() cannot read."""
    return [
        Rec(
            b"p%d-%03d" % (partition, i),
            b"\x00\x01\x02" if i == poison_at else struct.pack(">q", 1000 * partition + i),
            partition,
            headers=(("origin", b"test"),) if i == poison_at else (),
        )
        for i in range(count)
    ]


async def poisoned_topics(bootstrap: str) -> tuple[str, str, list[Rec]]:
    """A 2-partition source with a poison record at offset 10 of partition 0, and a sink."""
    source, sink = unique_topic("poison-in"), unique_topic("poison-out")
    await create_topic(bootstrap, source, 2)
    await create_topic(bootstrap, sink, 2)
    records = long_records(0, 30, poison_at=POISON_OFFSET) + long_records(1, 30)
    await produce(bootstrap, source, records)
    return source, sink, records


def valid(records: list[Rec]) -> dict[bytes | None, bytes | None]:
    return {r.key: r.value for r in records if r.value is not None and len(r.value) == 8}


# -- poison records under each deserialization handler ---------------------------------------


async def test_poison_record_log_and_fail_stops_the_client(bootstrap_servers: str, tmp_path: Path) -> None:
    """log_and_fail: the client stops in ERROR at the poison record and commits nothing past it.

    Restarted with log_and_continue (what an operator would do), the application then processes
    every valid record: failing lost nothing.
    """
    source, sink, records = await poisoned_topics(bootstrap_servers)
    recorder = Recorder()
    async with StreamsApp(
        bootstrap_servers,
        tmp_path,
        lambda: recording_topology(source, sink, recorder, value_serde=Serdes.Long()),
        config={"default.deserialization.exception.handler": "log_and_fail"},
    ) as app:
        streams = await app.start(0)
        await streams.wait_for_state(State.ERROR, timeout=30)

        (error,) = streams.errors
        assert isinstance(error, DeserializationError)
        assert (error.topic, error.partition, error.offset) == (source, 0, POISON_OFFSET)
        assert f"topic={source}, partition=0, offset={POISON_OFFSET}" in str(error)
        assert not any(t.alive for t in streams.threads)
        # Nothing at or past the poison record of partition 0 was processed or committed.
        assert all(s.offset < POISON_OFFSET for s in recorder.seen if s.partition == 0)
        committed = await committed_offsets(bootstrap_servers, app.application_id)
        assert committed.get(TopicPartition(source, 0), 0) <= POISON_OFFSET

        restarted = await app.start(0, **{"default.deserialization.exception.handler": "log_and_continue"})
        expected = valid(records)
        await wait_until(lambda: set(recorder.keys()) == set(expected), 30, message="valid records missing")
        assert metric_total(restarted, "dropped_records") == 1
    assert {s.key: struct.pack(">q", s.value) for s in recorder.seen} == expected
    assert restarted.errors == []


async def test_poison_record_log_and_continue_skips_only_it(bootstrap_servers: str, tmp_path: Path) -> None:
    source, sink, records = await poisoned_topics(bootstrap_servers)
    expected = valid(records)
    async with StreamsApp(
        bootstrap_servers,
        tmp_path,
        lambda: passthrough_topology(source, sink),
        config={"default.deserialization.exception.handler": "log_and_continue", "default.value.serde": Serdes.Long()},
    ) as app:
        streams = await app.start(0)
        await wait_until(lambda: metric_total(streams, "processed_records") == len(expected), 30)
        assert metric_total(streams, "dropped_records") == 1
        assert streams.state is State.RUNNING
        await app.close_all()

    assert streams.errors == []
    output = await read_all(bootstrap_servers, sink)
    assert {r.key: r.value for r in output} == expected
    assert len(output) == len(expected)


async def test_poison_record_goes_to_the_dead_letter_topic(bootstrap_servers: str, tmp_path: Path) -> None:
    source, sink, records = await poisoned_topics(bootstrap_servers)
    dlq = unique_topic("dlq")
    await create_topic(bootstrap_servers, dlq, 1)
    expected = valid(records)
    (poison,) = [r for r in records if r.key not in expected]
    async with StreamsApp(
        bootstrap_servers,
        tmp_path,
        lambda: passthrough_topology(source, sink),
        config={
            "default.deserialization.exception.handler": "dead_letter",
            "errors.dead.letter.queue.topic.name": dlq,
            "default.value.serde": "long",
        },
    ) as app:
        streams = await app.start(0)
        await wait_until(lambda: metric_total(streams, "processed_records") == len(expected), 30)
        assert metric_total(streams, "dropped_records") == 1
        await app.close_all()

    assert streams.errors == []
    output = await read_all(bootstrap_servers, sink)
    assert {r.key: r.value for r in output} == expected and len(output) == len(expected)
    (dead,) = await read_all(bootstrap_servers, dlq)
    assert (dead.key, dead.value) == (poison.key, poison.value)  # the original bytes
    assert dead.headers == (
        ("origin", b"test"),
        ("__streams.errors.topic", source.encode()),
        ("__streams.errors.partition", b"0"),
        ("__streams.errors.offset", str(POISON_OFFSET).encode()),
        ("__streams.errors.exception", b"DeserializationError"),
    )


async def test_skipped_record_at_the_end_of_a_partition_is_committed_past(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """A skipped last record still moves the committed offset: a restart does not meet it again."""
    source, sink, dlq = unique_topic("tail-in"), unique_topic("tail-out"), unique_topic("tail-dlq")
    for topic in (source, sink, dlq):
        await create_topic(bootstrap_servers, topic, 1)
    records = [*long_records(0, 5), Rec(b"poison", b"\x00\x01\x02", 0)]
    await produce(bootstrap_servers, source, records)
    config = {
        "default.deserialization.exception.handler": "dead_letter",
        "errors.dead.letter.queue.topic.name": dlq,
        "default.value.serde": Serdes.Long(),
    }
    async with StreamsApp(bootstrap_servers, tmp_path, partial(passthrough_topology, source, sink), config=config) as app:
        streams = await app.start(0)

        async def committed_to_the_end() -> bool:
            return (await committed_offsets(bootstrap_servers, app.application_id)).get(TopicPartition(source, 0)) == 6

        await wait_until(committed_to_the_end, 15, message="the offset after the skipped record was never committed")
        assert metric_total(streams, "dropped_records") == 1
        await app.stop(0)

        restarted = await app.start(0)
        await produce(bootstrap_servers, source, [Rec(b"after", struct.pack(">q", 7), 0)])
        await wait_until(lambda: metric_total(restarted, "processed_records") == 1, 15)
        assert metric_total(restarted, "dropped_records") == 0  # the poison was not read again
    assert len(await read_all(bootstrap_servers, dlq)) == 1
    assert [r.key for r in await read_all(bootstrap_servers, sink)] == [r.key for r in records[:5]] + [b"after"]


# -- start-up and configuration errors -------------------------------------------------------


async def test_mismatched_copartitioned_topics_fail_at_start(bootstrap_servers: str, tmp_path: Path) -> None:
    left, right, sink = unique_topic("left"), unique_topic("right"), unique_topic("out")
    await create_topic(bootstrap_servers, left, 4)
    await create_topic(bootstrap_servers, right, 3)
    topology = partial(recording_topology, [left, right], sink, Recorder())
    async with StreamsApp(bootstrap_servers, tmp_path, topology) as app:
        streams = app.create(0)
        with pytest.raises(CopartitioningError) as caught:
            await streams.start()
        assert streams.threads == []
    assert caught.value.counts == {left: 4, right: 3}
    message = str(caught.value)
    assert f"{left}=4" in message and f"{right}=3" in message


async def test_missing_source_topic_fails_at_start(bootstrap_servers: str, tmp_path: Path) -> None:
    present, missing = unique_topic("present"), unique_topic("missing")
    await create_topic(bootstrap_servers, present, 1)
    async with StreamsApp(
        bootstrap_servers, tmp_path, lambda: recording_topology([present, missing], unique_topic("out"), Recorder())
    ) as app:
        streams = app.create(0)
        with pytest.raises(MissingSourceTopicError, match=missing) as caught:
            await streams.start()
        assert streams.threads == []
    assert caught.value.topics == [missing]


async def test_missing_sink_topic_fails_at_start(bootstrap_servers: str, tmp_path: Path) -> None:
    source, missing = unique_topic("source"), unique_topic("missing-sink")
    await create_topic(bootstrap_servers, source, 1)
    async with StreamsApp(bootstrap_servers, tmp_path, lambda: passthrough_topology(source, missing)) as app:
        streams = app.create(0)
        with pytest.raises(MissingSinkTopicError, match=missing) as caught:
            await streams.start()
        assert streams.threads == []
    assert caught.value.topics == [missing]


def test_bad_config_fails_at_construction_naming_the_key() -> None:
    topology = passthrough_topology("in", "out")
    base = {"application.id": "bad-config", "bootstrap.servers": "127.0.0.1:9"}
    with pytest.raises(ConfigError, match=r"commit\.intervall\.ms") as caught:
        KafkaStreams(topology, base | {"commit.intervall.ms": 100})
    assert caught.value.key == "commit.intervall.ms"
    with pytest.raises(ConfigError) as caught:
        KafkaStreams(topology, base | {"num.stream.threads": 0})
    assert caught.value.key == "num.stream.threads"
    with pytest.raises(ConfigError) as caught:
        KafkaStreams(topology, base | {"session.timeout.ms": "soon"})
    assert caught.value.key == "session.timeout.ms"


# -- state listener and uncaught exceptions --------------------------------------------------


async def test_state_listener_sees_the_lifecycle(bootstrap_servers: str, tmp_path: Path) -> None:
    source, sink = unique_topic("states-in"), unique_topic("states-out")
    await create_topic(bootstrap_servers, source, 2)
    await create_topic(bootstrap_servers, sink, 2)
    transitions: list[tuple[State, State]] = []
    async with StreamsApp(bootstrap_servers, tmp_path, lambda: passthrough_topology(source, sink)) as app:
        streams = app.create(0)
        streams.set_state_listener(lambda new, old: transitions.append((old, new)))
        assert streams.state is State.CREATED
        await streams.start()
        await streams.wait_for_state(State.RUNNING, timeout=30)
        await app.stop(0)
    assert [old for old, _ in transitions] + [transitions[-1][1]] == [
        State.CREATED,
        State.REBALANCING,
        State.RUNNING,
        State.PENDING_SHUTDOWN,
        State.NOT_RUNNING,
    ]


async def test_close_during_start_leaves_no_member_behind(bootstrap_servers: str, tmp_path: Path) -> None:
    """close() while start() is under way: start stops, no thread keeps running or holds tasks."""
    source, sink = unique_topic("closing-in"), unique_topic("closing-out")
    await create_topic(bootstrap_servers, source, 4)
    await create_topic(bootstrap_servers, sink, 4)
    async with StreamsApp(bootstrap_servers, tmp_path, lambda: passthrough_topology(source, sink)) as app:
        await app.start(0)
        assert await app.wait_settled(tasks_of(4)) == {0: tasks_of(4)}

        # Closed while start() checks the topics (the client is still CREATED).
        early = app.create(1)
        await asyncio.gather(early.start(), early.close(timeout=30))
        assert early.state is State.NOT_RUNNING and early.threads == []

        # Closed once start() begins starting the stream thread (the client is REBALANCING).
        late = app.create(2)
        closing: list[asyncio.Task[bool]] = []

        def close_when_rebalancing(new: State, old: State) -> None:
            if new is State.REBALANCING and not closing:
                closing.append(asyncio.get_running_loop().create_task(late.close(timeout=30)))

        late.set_state_listener(close_when_rebalancing)
        await late.start()
        assert await closing[0]
        assert late.state is State.NOT_RUNNING
        assert [t.state for t in late.threads] == [ThreadState.DEAD]

        # No member was left behind holding tasks: the first instance gets all of them.
        assert await app.wait_settled(tasks_of(4)) == {0: tasks_of(4)}
        await produce(bootstrap_servers, source, [(b"k%d" % i, b"v") for i in range(100)])
        await wait_until(lambda: metric_total(app.instances[0], "processed_records") == 100, 30)


async def failing_app(
    bootstrap: str, tmp_path: Path, response: StreamThreadExceptionResponse, instances: int = 1
) -> tuple[StreamsApp, list[KafkaStreams], Recorder, list[BaseException], str, list[Rec]]:
    """Instances (not started) whose processor raises once, on key b"boom"; the handler answers `response`."""
    source, sink = unique_topic("fail-in"), unique_topic("fail-out")
    await create_topic(bootstrap, source, 1)
    await create_topic(bootstrap, sink, 1)
    records = [Rec(b"k%03d" % i, b"v", 0) for i in range(20)] + [Rec(b"boom", b"v", 0)] + [
        Rec(b"k%03d" % i, b"v", 0) for i in range(20, 40)
    ]
    recorder = Recorder(fail_on={b"boom"})
    handled: list[BaseException] = []

    def handler(error: BaseException) -> StreamThreadExceptionResponse:
        handled.append(error)
        return response

    app = StreamsApp(bootstrap, tmp_path, lambda: recording_topology(source, sink, recorder))
    created = [app.create(i) for i in range(instances)]
    for streams in created:
        streams.set_uncaught_exception_handler(handler)
    await produce(bootstrap, source, records)
    return app, created, recorder, handled, sink, records


async def test_replace_thread_replaces_a_thread_that_died(bootstrap_servers: str, tmp_path: Path) -> None:
    app, (streams,), recorder, handled, sink, records = await failing_app(
        bootstrap_servers, tmp_path, StreamThreadExceptionResponse.REPLACE_THREAD
    )
    async with app:
        await streams.start()
        (first_thread,) = streams.threads
        await wait_until(lambda: recorder.failed == [b"boom"], 30, message="the processor never failed")
        await wait_until(lambda: b"boom" in recorder.keys(), 30, message="the replacement never processed b'boom'")
        await streams.wait_for_state(State.RUNNING, timeout=30)
        (thread,) = streams.threads
        assert thread is not first_thread and thread.index == first_thread.index
        assert not first_thread.alive and thread.alive
        await wait_until(lambda: set(recorder.keys()) == {r.key for r in records}, 30)
        await app.stop(0)

    (error,) = handled
    assert isinstance(error, RuntimeError) and "b'boom'" in str(error)
    assert streams.errors == [error]
    assert streams.state is State.NOT_RUNNING
    # At least once: every input is in the output (records before the failure may be repeated).
    assert {r.key for r in await read_all(bootstrap_servers, sink)} == {r.key for r in records}


async def test_shutdown_client_puts_the_client_in_error(bootstrap_servers: str, tmp_path: Path) -> None:
    """SHUTDOWN_CLIENT: the failing instance ends in ERROR; the other one takes over its task."""
    app, created, recorder, handled, _, records = await failing_app(
        bootstrap_servers, tmp_path, StreamThreadExceptionResponse.SHUTDOWN_CLIENT, instances=2
    )
    states: dict[int, list[State]] = {0: [], 1: []}
    for index, streams in enumerate(created):
        streams.set_state_listener(lambda new, old, index=index: states[index].append(new))
    async with app:
        for streams in created:
            await streams.start()
        await wait_until(lambda: any(s.state is State.ERROR for s in created), 30, message="no client failed")
        (failed,) = [s for s in created if s.state is State.ERROR]
        (survivor,) = [s for s in created if s is not failed]
        await wait_until(lambda: set(recorder.keys()) == {r.key for r in records}, 30, message="records missing")
        await survivor.wait_for_state(State.RUNNING, timeout=30)

        (error,) = handled
        assert failed.errors == [error] and isinstance(error, RuntimeError)
        assert states[created.index(failed)][-2:] == [State.PENDING_ERROR, State.ERROR]
        assert not any(t.alive for t in failed.threads)
        assert survivor.errors == [] and instance_tasks(survivor) == tasks_of(1)
        assert [s.server for s in recorder.seen if s.key == b"boom"] == [app.server(created.index(survivor))]


@pytest.mark.parametrize("protocol", ["classic", "streams"])
async def test_shutdown_application_stops_every_instance(bootstrap_servers: str, tmp_path: Path, protocol: str) -> None:
    """SHUTDOWN_APPLICATION: the failing instance asks the group to stop; every member ends in ERROR.

    As in Kafka Streams the request reaches the members of the group at that moment, so the
    poison record is produced only once both instances have joined. Under the classic protocol the
    request travels in the assignor's error code; under streams (KIP-1071) as ShutdownApplication in
    a heartbeat, and the broker answers every member with SHUTDOWN_APPLICATION naming the asker.
    """
    source, sink = unique_topic("fail-in"), unique_topic("fail-out")
    await create_topic(bootstrap_servers, source, 1)
    await create_topic(bootstrap_servers, sink, 1)
    recorder = Recorder(fail_on={b"boom"})
    handled: list[BaseException] = []

    def handler(error: BaseException) -> StreamThreadExceptionResponse:
        handled.append(error)
        return StreamThreadExceptionResponse.SHUTDOWN_APPLICATION

    app = StreamsApp(
        bootstrap_servers, tmp_path, lambda: recording_topology(source, sink, recorder), config={"group.protocol": protocol}
    )
    created = [app.create(i) for i in range(2)]
    for streams in created:
        streams.set_uncaught_exception_handler(handler)
    async with app:
        for streams in created:
            await streams.start()

        def both_joined() -> bool:
            return all(
                s.state is State.RUNNING and s.threads[0].assignor.assignment is not None for s in created
            )

        await wait_until(both_joined, 60, message="both instances in the group")
        await produce(bootstrap_servers, source, [Rec(b"k1", b"v", 0), Rec(b"boom", b"v", 0)])
        await wait_until(lambda: all(s.state is State.ERROR for s in created), 90, message="not every client stopped")
        (failing,) = [s for s in created if s.errors and s.errors[0] is handled[0]]
        (other,) = [s for s in created if s is not failing]
        assert isinstance(handled[0], RuntimeError)
        assert len(handled) == 1, "the shutdown request is not handed to the user's handler again"
        assert other.errors and all(isinstance(e, ShutdownRequestedError) for e in other.errors)
        if protocol == "streams":
            assert "encountered a fatal error and requested a shutdown for the entire application" in str(other.errors[0])
        assert not any(t.alive for s in created for t in s.threads)
