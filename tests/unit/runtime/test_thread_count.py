"""KIP-663 on the fake cluster: adding and removing stream threads at run time, their names and
index reuse, the client states that allow it, the record cache's share per thread, REPLACE_THREAD
through the same path, and `metadata_for_local_threads()`."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from streams_core import KafkaStreams, TaskId, TaskMetadata, ThreadMetadata, clients
from streams_core.common.topic_partition import TopicPartition
from streams_core.runtime.kafka_streams import StreamThreadExceptionResponse
from streams_core.runtime.threads.stream_threads import MAX_FAILED_STARTS
from streams_core.runtime.threads.thread_state import ThreadState
from streams_core.state.internals.thread_cache import ThreadCache
from streams_core.testing import FakeKafkaCluster

from .harness import APP, Instance, counting_topology, eventually, long, passthrough_topology, running, streams_config
from .test_error_handlers import Exploding, exploding_topology
from .test_global_thread_failure import global_table_topology

CACHE = 1_000_000


def cluster_with(partitions: int) -> FakeKafkaCluster:
    cluster = FakeKafkaCluster()
    for topic in ("in", "out"):
        cluster.create_topic(topic, partitions)
    return cluster


def config(tmp_path: Path, extra: dict[str, Any] | None = None, *, instance: int = 0) -> dict[str, Any]:
    return streams_config(tmp_path, {"statestore.cache.max.bytes": CACHE, **(extra or {})}, instance=instance)


def names(app: Instance) -> list[str]:
    return sorted(m.thread_name for m in app.streams.metadata_for_local_threads())


def tasks_per_thread(app: Instance) -> dict[str, set[TaskId]]:
    return {m.thread_name: {t.task_id for t in m.active_tasks} for m in app.streams.metadata_for_local_threads()}


def cache_sizes(app: Instance) -> list[int]:
    return [t.task_manager.cache.max_bytes for t in app.streams.threads if t.state is not ThreadState.DEAD]


async def caches_become(app: Instance, sizes: list[int]) -> None:
    """A running thread takes a new size at its next loop round."""
    await eventually(lambda: cache_sizes(app) == sizes, what=f"cache sizes {sizes} ({cache_sizes(app)})")


async def spread_over(app: Instance, threads: int) -> None:
    """RUNNING, the group stable, and the four tasks spread over `threads` threads."""
    await app.wait_running()
    await eventually(
        lambda: sorted(len(tasks) for tasks in tasks_per_thread(app).values()) == [4 // threads] * threads,
        what=f"the tasks over {threads} threads ({tasks_per_thread(app)})",
    )


async def test_an_added_thread_takes_the_next_index_gets_tasks_and_halves_the_cache(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    async with running(cluster, passthrough_topology(), config(tmp_path)) as app:
        assert names(app) == [f"{APP}-StreamThread-1"] and cache_sizes(app) == [CACHE]
        assert await app.streams.add_stream_thread() == f"{APP}-StreamThread-2"
        assert app.streams.state is KafkaStreams.State.REBALANCING
        await spread_over(app, 2)
        assert len(cluster.members(APP)) == 2
        await caches_become(app, [CACHE // 2, CACHE // 2])
        for i in range(40):
            cluster.produce("in", b"k%d" % i, b"v")
        await eventually(lambda: len(cluster.records("out")) == 40, what="output")
        assert all(t.metrics()["processed_records"] > 0 for t in app.streams.threads)


async def test_a_removed_thread_leaves_the_group_and_its_index_is_reused(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    async with running(cluster, passthrough_topology(), config(tmp_path, {"num.stream.threads": 3})) as app:
        assert names(app) == [f"{APP}-StreamThread-{i}" for i in (1, 2, 3)]
        assert cache_sizes(app) == [CACHE // 3] * 3
        removed = await app.streams.remove_stream_thread(timeout=5)
        assert removed == f"{APP}-StreamThread-1", "the oldest thread goes, as in Kafka Streams' list order"
        assert names(app) == [f"{APP}-StreamThread-2", f"{APP}-StreamThread-3"]
        assert len(cluster.members(APP)) == 2, "its consumer left the group at once"
        await spread_over(app, 2)
        await caches_become(app, [CACHE // 2, CACHE // 2])
        assert await app.streams.add_stream_thread() == removed, "the lowest free index is taken again"
        await app.wait_running()
        await caches_become(app, [CACHE // 3] * 3)


async def test_the_last_thread_can_be_removed_and_one_added_again(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    async with running(cluster, passthrough_topology(), config(tmp_path)) as app:
        assert await app.streams.remove_stream_thread() == f"{APP}-StreamThread-1"
        assert app.streams.metadata_for_local_threads() == set() and cluster.members(APP) == []
        assert app.streams.state is KafkaStreams.State.RUNNING, "as Kafka Streams, a client without threads stays RUNNING"
        assert await app.streams.remove_stream_thread() is None, "no thread left to remove"
        cluster.produce("in", b"k", b"v")
        assert await app.streams.add_stream_thread() == f"{APP}-StreamThread-1"
        await eventually(lambda: len(cluster.records("out")) == 1, what="processing by the new thread")
        await caches_become(app, [CACHE])


async def test_threads_change_only_while_running_or_rebalancing(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    instance = Instance(cluster, passthrough_topology(), config(tmp_path))
    assert await instance.streams.add_stream_thread() is None, "CREATED"
    assert await instance.streams.remove_stream_thread() is None
    await instance.start()
    await instance.close()
    assert instance.streams.state is KafkaStreams.State.NOT_RUNNING
    assert await instance.streams.add_stream_thread() is None
    assert await instance.streams.remove_stream_thread() is None
    assert len(instance.streams.threads) == 1


async def test_a_thread_that_does_not_stop_in_time_keeps_its_index_until_dead(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = cluster_with(4)
    async with running(cluster, passthrough_topology(), config(tmp_path, {"num.stream.threads": 2})) as app:
        caplog.set_level(logging.INFO, logger="streams_core.runtime.threads.stream_threads")
        with pytest.raises(TimeoutError):
            await app.streams.remove_stream_thread(timeout=0)
        resized = f"Resizing thread cache due to thread removal, new cache size per thread is {CACHE}"
        assert resized in caplog.messages, "the cache is re-divided even so (Kafka's test reads the same log line)"
        assert await app.streams.add_stream_thread() == f"{APP}-StreamThread-3", "index 1 is still shutting down"
        await eventually(lambda: all(t.index != 1 or t.state is ThreadState.DEAD for t in app.streams.threads), what="DEAD")
        await caches_become(app, [CACHE // 2, CACHE // 2])
        await app.wait_running()
        assert await app.streams.add_stream_thread() == f"{APP}-StreamThread-1"
        await app.wait_running()
        assert names(app) == [f"{APP}-StreamThread-{i}" for i in (1, 2, 3)]


async def test_concurrent_adds_and_removes_never_share_an_index(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    async with running(cluster, passthrough_topology(), config(tmp_path)) as app:
        added = await asyncio.gather(*(app.streams.add_stream_thread() for _ in range(3)))
        assert sorted(name or "" for name in added) == [f"{APP}-StreamThread-{i}" for i in (2, 3, 4)]
        removed = await asyncio.gather(*(app.streams.remove_stream_thread() for _ in range(2)))
        assert len(set(removed)) == 2 and None not in removed
        await app.wait_running()
        assert len(names(app)) == 2 and len(cluster.members(APP)) == 2


async def test_replace_thread_takes_the_dead_threads_index_and_cache_share(tmp_path: Path) -> None:
    cluster = cluster_with(2)
    Exploding.exploded = 0
    instance = Instance(cluster, exploding_topology(once=True), config(tmp_path, {"num.stream.threads": 2}))
    instance.streams.set_uncaught_exception_handler(lambda error: StreamThreadExceptionResponse.REPLACE_THREAD)
    await instance.start()
    dead = {t.name: t for t in instance.streams.threads}
    cluster.produce("in", "a", long(13), partition=0)
    cluster.produce("in", "b", long(13), partition=1)
    await eventually(lambda: Exploding.exploded == 1 and instance.streams.state is KafkaStreams.State.RUNNING, what="replacement")
    await instance.wait_running()
    assert names(instance) == sorted(dead), "the replacement has the dead thread's name"
    assert any(t is not dead[t.name] for t in instance.streams.threads), "one thread is new"
    await caches_become(instance, [CACHE // 2, CACHE // 2])
    await instance.close()


async def test_thread_metadata_lists_tasks_offsets_and_client_ids(tmp_path: Path) -> None:
    cluster = cluster_with(2)
    extra = {"num.standby.replicas": 1}
    active = Instance(cluster, counting_topology(), config(tmp_path, extra, instance=0))
    await active.start()
    for key in ("a", "b", "c", "d"):
        cluster.produce("in", key, "v")
    await eventually(lambda: len(cluster.records("out")) == 4, what="counts")
    async with running(cluster, counting_topology(), config(tmp_path, extra, instance=1)) as other:
        await active.wait_running()
        (mine,) = active.streams.metadata_for_local_threads()
        (theirs,) = other.streams.metadata_for_local_threads()
        assert isinstance(mine, ThreadMetadata) and mine.thread_state == "RUNNING"
        name = f"{APP}-StreamThread-1"
        assert (mine.thread_name, mine.consumer_client_id, mine.restore_consumer_client_id) == (
            name, f"{name}-consumer", f"{name}-restore-consumer"
        )
        assert mine.producer_client_ids == {f"{name}-producer"} and mine.admin_client_id == f"{APP}-admin"
        assert len(mine.active_tasks) == len(theirs.active_tasks) == 1
        assert {t.task_id for t in mine.standby_tasks} == {t.task_id for t in theirs.active_tasks}
        assert {t.task_id for t in theirs.standby_tasks} == {t.task_id for t in mine.active_tasks}
        (task,) = mine.active_tasks
        tp = TopicPartition("in", task.task_id.partition)
        assert task.topic_partitions == {tp}
        written = sum(1 for r in cluster.records("in") if r.partition == tp.partition)
        await eventually(
            lambda: next(iter(next(iter(active.streams.metadata_for_local_threads())).active_tasks)).committed_offsets.get(tp)
            == written,
            what="the committed offset",
        )
        (task,) = next(iter(active.streams.metadata_for_local_threads())).active_tasks
        assert task.end_offsets == {tp: written} and task.time_current_idling_started is None
        (standby,) = mine.standby_tasks
        assert standby == TaskMetadata(standby.task_id, frozenset({TopicPartition("in", standby.task_id.partition)}))
    await active.close()


def test_a_shrinking_cache_evicts_in_turn_and_flushes_dirty_entries_first() -> None:
    cache = ThreadCache(10_000)
    flushed: dict[str, list[bytes]] = {"a": [], "b": []}
    named = {n: cache.named_cache(n, lambda batch, n=n: flushed[n].extend(k for k, _ in batch)) for n in ("a", "b")}  # type: ignore[misc]
    for i in range(10):
        for n in ("a", "b"):
            cache.put(named[n], b"k%d" % i, b"v" * 10, dirty=True, timestamp=i)
    full = cache.size
    cache.resize(full // 2)
    assert cache.max_bytes == full // 2 and cache.size <= full // 2
    assert abs(named["a"].size - named["b"].size) <= max(e.size for e in named["a"].entries.values())
    assert flushed["a"] and flushed["b"], "each evicted dirty entry reached its store first"
    cache.resize(full * 2)
    cache.put(named["a"], b"new", b"v", dirty=False, timestamp=0)
    assert cache.evictions == 10, "growing evicts nothing"


async def test_the_global_thread_takes_a_share_of_the_cache(tmp_path: Path) -> None:
    cluster = cluster_with(2)
    cluster.create_topic("reference", 1)
    cluster.produce("reference", b"k", b"v")
    async with running(cluster, global_table_topology(), config(tmp_path)) as app:
        global_cache = app.streams._global_thread.cache  # type: ignore[union-attr]
        assert global_cache.size > 0, "the global store caches through it"
        assert cache_sizes(app) == [CACHE // 2] and global_cache.max_bytes == CACHE // 2, "threads + 1, as Kafka"
        await app.streams.add_stream_thread()
        await caches_become(app, [CACHE // 3, CACHE // 3])
        assert global_cache.max_bytes == CACHE // 3
        await app.streams.remove_stream_thread()
        await app.streams.remove_stream_thread()
        assert global_cache.max_bytes == CACHE, "without stream threads the global thread has all of it"


async def test_a_thread_that_fails_to_start_is_replaced_like_any_dead_thread(tmp_path: Path) -> None:
    """As in Kafka Streams, a thread that fails while starting goes to the uncaught-exception handler:
    REPLACE_THREAD starts another with its index, and add_stream_thread() answers that one's name."""
    cluster = cluster_with(4)
    handled: list[BaseException] = []
    async with running(cluster, passthrough_topology(), config(tmp_path)) as app:
        app.streams.set_uncaught_exception_handler(lambda error: handled.append(error) or StreamThreadExceptionResponse.REPLACE_THREAD)
        cluster.fail_next("consumer_start", clients.KafkaConnectionError("no broker known"))
        assert await app.streams.add_stream_thread() == f"{APP}-StreamThread-2"
        assert [type(error) for error in handled] == [clients.KafkaConnectionError]
        await spread_over(app, 2)
        await caches_become(app, [CACHE // 2, CACHE // 2])


async def test_a_thread_that_fails_to_start_shuts_the_client_down_by_default(tmp_path: Path) -> None:
    cluster = cluster_with(4)
    failure = clients.KafkaConnectionError("no broker known")
    async with running(cluster, passthrough_topology(), config(tmp_path)) as app:
        cluster.fail_next("consumer_start", failure)
        assert await app.streams.add_stream_thread() is None, "the client is shutting down"
        await app.streams.wait_for_state(KafkaStreams.State.ERROR, timeout=5)
        assert app.streams.errors == [failure]


async def test_threads_that_never_start_end_the_client_in_error_after_the_bound(tmp_path: Path) -> None:
    """REPLACE_THREAD replaces a thread that fails to start at most MAX_FAILED_STARTS times in a row: a
    thread that can never start ends the client with an error naming the cause, instead of looping."""
    cluster = cluster_with(4)
    cluster.fail_next("consumer_start", RuntimeError("broken install"), times=1000)
    instance = Instance(cluster, passthrough_topology(), config(tmp_path))
    instance.streams.set_uncaught_exception_handler(lambda error: StreamThreadExceptionResponse.REPLACE_THREAD)
    await instance.start(wait=False)
    await instance.streams.wait_for_state(KafkaStreams.State.ERROR, timeout=5)
    *failures, gave_up = instance.streams.errors
    assert len(failures) == MAX_FAILED_STARTS and all(str(error) == "broken install" for error in failures)
    assert f"{MAX_FAILED_STARTS} stream thread starts in a row failed" in str(gave_up) and "broken install" in str(gave_up)
    assert gave_up.__cause__ is failures[-1]
    await instance.close()
