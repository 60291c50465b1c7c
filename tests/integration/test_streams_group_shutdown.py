"""SHUTDOWN_APPLICATION under `group.protocol=streams` (KIP-1071) on the 4.3.1 broker.

The failing instance's request goes to the broker as ShutdownApplication in a heartbeat (a member
joins with it set). The broker then answers every member with the SHUTDOWN_APPLICATION status,
whose detail names the asking member, and keeps doing so until the group is empty. The other
instance's thread stops with ShutdownRequestedError.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streams_core.runtime.assignment import ShutdownRequestedError
from streams_core.runtime.kafka_streams import State, StreamThreadExceptionResponse
from tests.integration.streams_testkit import Recorder, StreamsApp, instance_tasks, recording_topology, wait_until
from tests.kafka_utils import Rec, create_topic, produce, unique_topic

pytestmark = pytest.mark.broker


async def test_shutdown_application_reaches_every_member_through_the_broker(bootstrap_servers: str, tmp_path: Path) -> None:
    source, sink = unique_topic("sg-fail-in"), unique_topic("sg-fail-out")
    await create_topic(bootstrap_servers, source, 2)
    await create_topic(bootstrap_servers, sink, 2)
    recorder = Recorder(fail_on={b"boom"})
    handled: list[BaseException] = []

    def handler(error: BaseException) -> StreamThreadExceptionResponse:
        handled.append(error)
        return StreamThreadExceptionResponse.SHUTDOWN_APPLICATION

    app = StreamsApp(bootstrap_servers, tmp_path, lambda: recording_topology(source, sink, recorder), config={"group.protocol": "streams"})
    created = [app.create(i) for i in range(2)]
    for streams in created:
        streams.set_uncaught_exception_handler(handler)
    async with app:
        for streams in created:
            await streams.start()
        await wait_until(
            lambda: all(s.state is State.RUNNING and len(instance_tasks(s)) == 1 for s in created),
            60,
            message=lambda: f"a task each: {[(s.state.name, sorted(map(str, instance_tasks(s)))) for s in created]}",
        )
        (failing,) = [s for s in created if any(t.partition == 0 for t in instance_tasks(s))]
        (other,) = [s for s in created if s is not failing]
        await produce(bootstrap_servers, source, [Rec(b"k1", b"v", 0), Rec(b"boom", b"v", 0)])
        await wait_until(lambda: all(s.state is State.ERROR for s in created), 90, message="not every client stopped")
        assert len(handled) == 1 and isinstance(handled[0], RuntimeError), handled
        assert failing.errors[0] is handled[0]
        assert other.errors and all(isinstance(e, ShutdownRequestedError) for e in other.errors), other.errors
        assert "encountered a fatal error and requested a shutdown for the entire application" in str(other.errors[0])
        assert not any(t.alive for s in created for t in s.threads)
