"""Worker processes killed while they start (issue 40), on the fake cluster.

A worker that dies or fails while starting, in `start()` or in `add_stream_thread()`, is a dead
stream thread like any other: the uncaught-exception handler decides, REPLACE_THREAD starts another
worker with its index, and a worker that can never start ends the client in ERROR naming the cause
after `MAX_FAILED_STARTS` tries instead of being replaced forever.

The supplier is shipped to each worker by value, so each worker runs on its own copy of the fake
cluster and owns every task there; `DyingSupplier` gives each worker a state directory of its own
for that reason, and SIGKILLs its worker's process where the test says: while the worker loads the
application (`prepare`, before it says ready) or while its thread starts its clients (`start`).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from streams_core import KafkaStreams, WorkerDiedError
from streams_core.clients.ports import GroupAssignor
from streams_core.config import StreamsConfig
from streams_core.runtime.kafka_streams import StreamThreadExceptionResponse
from streams_core.runtime.threads.stream_threads import MAX_FAILED_STARTS
from streams_core.runtime.threads.thread_state import ThreadState
from streams_core.testing import FakeKafkaClientSupplier, FakeKafkaCluster
from streams_core.testing.fake_kafka import FakeConsumer

from .harness import APP, passthrough_topology, streams_config

START_TIMEOUT = 90.0
"""Each worker is a new interpreter; several start one after the other on a loaded machine."""


class _KilledWhileStarting(FakeConsumer):
    """A main consumer whose start SIGKILLs its own worker process."""

    __slots__ = ()

    async def start(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


class _BrokenStart(FakeConsumer):
    """A main consumer that can never start (as a worker whose install is broken)."""

    __slots__ = ()

    async def start(self) -> None:
        raise RuntimeError("broken install")


class DyingSupplier(FakeKafkaClientSupplier):
    """The fake supplier, which in a worker process of thread `threads` (every thread when None) kills
    that worker in `phase` (`prepare` or `start`) the first `kills` times, or makes its start fail
    with `broken` for good. `marks` counts the kills across processes (one file per kill)."""

    def __init__(
        self, cluster: FakeKafkaCluster, marks: Path, *, kills: int = 0, phase: str = "start",
        threads: frozenset[int] | None = None, broken: bool = False,
    ) -> None:  # fmt: skip
        super().__init__(cluster)
        self.instance_pid = os.getpid()
        self.marks, self.kills, self.phase, self.threads, self.broken = marks, kills, phase, threads, broken

    def _takes_a_kill(self) -> bool:
        for n in range(self.kills):
            try:
                os.close(os.open(self.marks / f"kill-{n}", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                continue
            return True
        return False

    def get_main_consumer(
        self, config: StreamsConfig, *, assignor: GroupAssignor, thread_index: int = 1, client_id: str | None = None
    ) -> FakeConsumer:
        consumer = super().get_main_consumer(config, assignor=assignor, thread_index=thread_index, client_id=client_id)
        if os.getpid() == self.instance_pid:
            return consumer
        state_dir = Path(config["state.dir"]) / f"worker-{thread_index}"
        config._values["state.dir"] = str(state_dir)  # this worker's own copy of the cluster: its own tasks
        if self.threads is not None and thread_index not in self.threads:
            return consumer
        if self.broken:
            consumer.__class__ = _BrokenStart
        elif self._takes_a_kill():
            if self.phase == "prepare":
                os.kill(os.getpid(), signal.SIGKILL)
            consumer.__class__ = _KilledWhileStarting
        return consumer


def cluster() -> FakeKafkaCluster:
    made = FakeKafkaCluster()
    for topic in ("in", "out"):
        made.create_topic(topic, 4)
    return made


def workers(tmp_path: Path, supplier: DyingSupplier, threads: int) -> tuple[KafkaStreams, list[BaseException]]:
    """A process-mode instance on `supplier` whose handler replaces every dead thread; the errors it saw."""
    config = streams_config(tmp_path, {"num.stream.threads": threads, "stream.threads.mode": "process"})
    streams = KafkaStreams(passthrough_topology(), config, client_supplier=supplier)
    handled: list[BaseException] = []

    def replace(error: BaseException) -> StreamThreadExceptionResponse:
        handled.append(error)
        return StreamThreadExceptionResponse.REPLACE_THREAD

    streams.set_uncaught_exception_handler(replace)
    return streams, handled


def running_threads(streams: KafkaStreams) -> dict[str, Any]:
    """Thread name -> worker pid, for the threads RUNNING now."""
    return {t.name: t.metrics()["pid"] for t in streams.threads if t.state is ThreadState.RUNNING}


async def wait_running_with(streams: KafkaStreams, threads: int) -> None:
    await streams.wait_for_state(KafkaStreams.State.RUNNING, timeout=START_TIMEOUT)
    names = [f"{APP}-StreamThread-{i}" for i in range(1, threads + 1)]
    assert sorted(running_threads(streams)) == names, [repr(t) for t in streams.threads]
    assert sorted(m.thread_name for m in streams.metadata_for_local_threads()) == names


@pytest.mark.parametrize("phase", ["prepare", "start"])
async def test_workers_killed_while_the_instance_starts_are_replaced(tmp_path: Path, phase: str) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    streams, handled = workers(tmp_path, DyingSupplier(cluster(), marks, kills=2, phase=phase), threads=2)
    try:
        await streams.start()  # returns: the dead workers went to the handler
        await wait_running_with(streams, 2)
        assert len(handled) == 2 and all(isinstance(error, WorkerDiedError) for error in handled), handled
        assert all("ended while starting with exit code -9" in str(error) for error in handled), handled
        assert streams.errors == handled
        assert len(set(running_threads(streams).values())) == 2
    finally:
        await streams.close(timeout=30)
    assert streams.state is KafkaStreams.State.NOT_RUNNING


async def test_a_worker_killed_while_add_stream_thread_starts_it_is_replaced(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    supplier = DyingSupplier(cluster(), marks, kills=1, threads=frozenset({2}))
    streams, handled = workers(tmp_path, supplier, threads=1)
    try:
        await streams.start()
        await wait_running_with(streams, 1)
        assert handled == []
        assert await streams.add_stream_thread() == f"{APP}-StreamThread-2", "the replacement, with the dead one's index"
        await wait_running_with(streams, 2)
        assert [type(error) for error in handled] == [WorkerDiedError]
    finally:
        await streams.close(timeout=30)


@pytest.mark.parametrize("broken", [False, True], ids=["killed", "failing"])
async def test_a_worker_that_never_starts_ends_the_client_after_the_bound(tmp_path: Path, broken: bool) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    supplier = DyingSupplier(cluster(), marks, kills=10 * MAX_FAILED_STARTS, broken=broken)
    streams, handled = workers(tmp_path, supplier, threads=1)
    try:
        await streams.start()
        await streams.wait_for_state(KafkaStreams.State.ERROR, timeout=START_TIMEOUT * 2)
    finally:
        await streams.close(timeout=30)
    *failures, gave_up = streams.errors
    assert failures == handled and len(failures) == MAX_FAILED_STARTS
    cause = "RuntimeError('broken install')" if broken else "ended while starting with exit code -9"
    assert f"{MAX_FAILED_STARTS} stream thread starts in a row failed" in str(gave_up) and cause in str(gave_up)
    assert gave_up.__cause__ is failures[-1]
    assert not any(t.alive for t in streams.threads)


async def test_a_worker_given_a_new_cache_size_before_it_starts_still_starts(tmp_path: Path) -> None:
    """A thread that comes or dies while a worker is prepared re-divides the cache, so the worker may
    hear of its new size before "go": it takes it and starts (it took any word but "go" for a stop,
    and ended with exit code 0 while starting: found by the test above when a kill came in between)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    streams, _handled = workers(tmp_path, DyingSupplier(cluster(), marks), threads=1)
    thread = streams._threads.add()
    await thread.prepare()
    thread.resize_cache(4096)
    try:
        await thread.start()
        assert thread.alive and thread.state is not ThreadState.DEAD
    finally:
        await thread.stop()
