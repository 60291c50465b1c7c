"""KIP-67's store providers: which local copies a query reads, and when it must say "retry"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams_core import InvalidStateStoreError, KeyQuery, QueryableStoreTypes
from streams_core.common.task_id import TaskId
from streams_core.common.topic_partition import TopicPartition
from streams_core.query.internals.store_query_utils import QUERY_STORE_TYPE
from streams_core.runtime.queries.state_store_providers import (
    LagInfo,
    QueryableStoreProvider,
    StoreQuery,
    StreamThreadStateStoreProvider,
)
from streams_core.runtime.queries.store_host import Deadline, NoCopyError, StoreRead, StoreReads
from streams_core.state.internals.in_memory_key_value_store import InMemoryKeyValueStore
from streams_core.state.internals.processor_state_manager import ProcessorStateManager

KV = QueryableStoreTypes.key_value_store()


class Thread:
    """A stream thread as the provider sees it: the state managers of its tasks."""

    def __init__(self) -> None:
        self.active: list[tuple[TaskId, ProcessorStateManager]] = []
        self.standby: list[tuple[TaskId, ProcessorStateManager]] = []
        self.caught_up: set[TaskId] = set()
        self.highwater: dict[TopicPartition, int] = {}
        self.ends: dict[TopicPartition, int] = {}

    def active_states(self) -> list[tuple[TaskId, ProcessorStateManager]]:
        return self.active

    def standby_states(self) -> list[tuple[TaskId, ProcessorStateManager]]:
        return self.standby

    def readable_standby_states(self) -> list[tuple[TaskId, ProcessorStateManager]]:
        return [(task_id, state) for task_id, state in self.standby if task_id in self.caught_up]

    def changelog_highwater(self, partition: TopicPartition) -> int | None:
        return self.highwater.get(partition)

    async def changelog_end_offsets(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.ends[tp] for tp in partitions if tp in self.ends}

    def input_position(self, task_id: TaskId) -> dict[TopicPartition, int]:
        return {TopicPartition("in", task_id.partition): 100 + task_id.partition}


def task_state(tmp_path: Path, partition: int, value: bytes) -> ProcessorStateManager:
    changelog = TopicPartition("app-counts-changelog", partition)
    state = ProcessorStateManager(TaskId(0, partition), "app", tmp_path / f"0_{partition}", changelog_partitions={"counts": changelog})
    store = InMemoryKeyValueStore("counts")
    store.init(state.context, store)  # registers it with the state manager
    store.put(b"k", value)
    return state


def test_a_standby_copy_is_read_only_once_caught_up_with_its_lag_known_and_within_max_lag(tmp_path: Path) -> None:
    thread = Thread()
    standby = task_state(tmp_path, 1, b"standby")
    thread.standby.append((TaskId(0, 1), standby))
    provider = StreamThreadStateStoreProvider(thread)
    changelog = TopicPartition("app-counts-changelog", 1)
    assert provider.stores("counts", KV, StoreQuery(1, stale=True)) == [], "just created, nothing restored: not read"
    standby.update_changelog_offsets({changelog: 10})
    assert provider.stores("counts", KV, StoreQuery(1, stale=True)) == [], "no fetch yet: the end is unknown"
    thread.highwater[changelog] = 25
    assert provider.standby_lag(standby) == 15
    assert provider.stores("counts", KV, StoreQuery(1, stale=True)) == [], "still on its first restore: not read"
    thread.caught_up.add(TaskId(0, 1))
    [store] = provider.stores("counts", KV, StoreQuery(1, stale=True))
    assert store.get(b"k") == b"standby"
    assert provider.stores("counts", KV, StoreQuery(1, stale=True, max_lag=15)) == [store]
    assert provider.stores("counts", KV, StoreQuery(1, stale=True, max_lag=14)) == [], "too far behind"
    assert provider.stores("counts", KV, StoreQuery(1)) == [], "standbys only for stale reads"


async def test_lags_put_running_active_copies_at_the_end_and_standbys_where_they_are(tmp_path: Path) -> None:
    thread = Thread()
    thread.active.append((TaskId(0, 0), task_state(tmp_path, 0, b"active")))
    standby = task_state(tmp_path, 1, b"standby")
    thread.standby.append((TaskId(0, 1), standby))
    standby.update_changelog_offsets({TopicPartition("app-counts-changelog", 1): 7})
    thread.ends = {TopicPartition("app-counts-changelog", 0): 40, TopicPartition("app-counts-changelog", 1): 12}
    queryable = QueryableStoreProvider(lambda: [StreamThreadStateStoreProvider(thread)], lambda name, stale: None)
    lags = await queryable.lags()
    assert lags == {"counts": {0: LagInfo(40, 40, 0), 1: LagInfo(7, 12, 5)}}


def test_a_partition_with_no_local_copy_is_retry_not_absent(tmp_path: Path) -> None:
    thread = Thread()
    thread.active.append((TaskId(0, 0), task_state(tmp_path, 0, b"active")))
    queryable = QueryableStoreProvider(lambda: [StreamThreadStateStoreProvider(thread)], lambda name, stale: None)
    assert queryable.get_store("counts", KV, StoreQuery(0)).get(b"k") == b"active"
    with pytest.raises(InvalidStateStoreError, match="for partition 1"):
        queryable.get_store("counts", KV, StoreQuery(1)).get(b"k")
    assert queryable.get_store("counts", KV).get(b"k") == b"active", "a scan over every partition reads what is here"


def test_the_position_is_the_active_copys_processed_input_offsets(tmp_path: Path) -> None:
    thread = Thread()
    thread.active.append((TaskId(0, 0), task_state(tmp_path, 0, b"active")))
    thread.standby.append((TaskId(0, 1), task_state(tmp_path, 1, b"standby")))
    provider = StreamThreadStateStoreProvider(thread)
    assert provider.position("counts", 0) == {TopicPartition("in", 0): 100}
    assert provider.position("counts", 1) is None, "a standby copy has no input position"
    assert provider.position("other", 0) is None


async def test_the_async_query_path_reads_the_same_copies_as_the_views(tmp_path: Path) -> None:
    """`query()` (the REST layer's path) answers as `get_store()` views do: a partition with no copy
    here, or only a standby too far behind, is retry (InvalidStateStoreError), never absent."""
    thread = Thread()
    thread.active.append((TaskId(0, 0), task_state(tmp_path, 0, b"active")))
    standby = task_state(tmp_path, 1, b"standby")
    thread.standby.append((TaskId(0, 1), standby))
    changelog = TopicPartition("app-counts-changelog", 1)
    standby.update_changelog_offsets({changelog: 10})
    thread.highwater[changelog] = 25
    thread.caught_up.add(TaskId(0, 1))
    queryable = QueryableStoreProvider(lambda: [StreamThreadStateStoreProvider(thread)], lambda name, stale: None)
    deadline = Deadline.after(1.0)

    def get(query: StoreQuery) -> StoreRead:
        return StoreRead("counts", KV, "get", (b"k",), query)

    assert await queryable.query(get(StoreQuery(0)), deadline) == b"active"
    with pytest.raises(InvalidStateStoreError, match="for partition 1"):
        await queryable.query(get(StoreQuery(1)), deadline)
    assert await queryable.query(get(StoreQuery(1, stale=True)), deadline) == b"standby"
    with pytest.raises(InvalidStateStoreError, match="for partition 1"):
        await queryable.query(get(StoreQuery(1, stale=True, max_lag=14)), deadline)
    assert [kv.value for kv in await queryable.query(StoreRead("counts", KV, "all"), deadline)] == [b"active"]
    assert await queryable.query(get(StoreQuery(0))._replace(with_position=True), deadline) == (
        b"active",
        {TopicPartition("in", 0): 100},
    )


async def test_answers_of_several_hosts_merge_in_key_order(tmp_path: Path) -> None:
    first, second = Thread(), Thread()
    low, high = task_state(tmp_path, 0, b"low"), task_state(tmp_path, 1, b"high")
    low.get_store("counts").put(b"a", b"1")
    high.get_store("counts").put(b"b", b"2")
    first.active.append((TaskId(0, 0), low))
    second.active.append((TaskId(0, 1), high))
    hosts = [StreamThreadStateStoreProvider(first, "t-1"), StreamThreadStateStoreProvider(second, "t-2")]
    queryable = QueryableStoreProvider(lambda: hosts, lambda name, stale: None)
    entries = await queryable.query(StoreRead("counts", KV, "all"), Deadline.after(1.0))
    assert [(kv.key, kv.value) for kv in entries] == [(b"a", b"1"), (b"b", b"2"), (b"k", b"low"), (b"k", b"high")]
    assert await queryable.query(StoreRead("counts", KV, "get", (b"b",)), Deadline.after(1.0)) == b"2"


async def test_an_iqv2_read_prefers_the_host_of_the_active_copy_and_query_each_asks_a_host_once(tmp_path: Path) -> None:
    """A partition with a standby in one thread and its active copy in another is read from the active copy
    (the standby only answers where no active copy is here); `query_each` groups a host's reads into one
    request (`StoreReads`) and gives each read its own outcome."""
    standby_thread, active_thread = Thread(), Thread()
    standby = task_state(tmp_path / "s", 0, b"standby")
    changelog = TopicPartition("app-counts-changelog", 0)
    standby.update_changelog_offsets({changelog: 10})
    standby_thread.highwater[changelog] = 10
    standby_thread.standby.append((TaskId(0, 0), standby))
    standby_thread.caught_up.add(TaskId(0, 0))
    active_thread.active.append((TaskId(0, 0), task_state(tmp_path / "a", 0, b"active")))
    active_thread.active.append((TaskId(0, 1), task_state(tmp_path / "a", 1, b"other")))
    asked: list[object] = []

    class Recorded(StreamThreadStateStoreProvider):
        async def ask(self, request: Any, deadline: Deadline) -> Any:
            asked.append(request)
            return await super().ask(request, deadline)

    hosts = [Recorded(standby_thread, "t-1"), Recorded(active_thread, "t-2")]
    queryable = QueryableStoreProvider(lambda: hosts, lambda name, stale: None)

    def read(partition: int, stale: bool = True) -> StoreRead:
        return StoreRead("counts", QUERY_STORE_TYPE, "run", (KeyQuery.with_key(b"k"),), StoreQuery(partition, stale), True)

    assert await queryable.query(read(0), Deadline.after(1.0)) == (b"active", {TopicPartition("in", 0): 100})
    asked.clear()
    outcomes = await queryable.query_each([read(0), read(1), read(2)], Deadline.after(1.0))
    assert outcomes[0] == (True, (b"active", {TopicPartition("in", 0): 100}))
    assert outcomes[1] == (True, (b"other", {TopicPartition("in", 1): 101}))
    assert outcomes[2][0] is False and isinstance(outcomes[2][1], NoCopyError)
    batches = [request for request in asked if isinstance(request, StoreReads)]
    assert isinstance(asked[0], StoreReads) and len(batches) == 1, "t-2 asked once"
    assert [r.query.partition for r in batches[0].reads] == [0, 1], "both partitions of t-2 in that request"
