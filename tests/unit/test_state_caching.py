"""The record cache: write-back, read cache, eviction, flush listeners, and cache on/off equivalence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams_core import Processor, Record, Serdes, Stores, Topology, TopologyTestDriver
from streams_core.common.task_id import TaskId
from streams_core.state.internals.caching_key_value_store import CachingKeyValueStore
from streams_core.state.internals.in_memory_key_value_store import InMemoryKeyValueStore
from streams_core.state.internals.thread_cache import ThreadCache


class CacheContext:
    """The parts of a processor context the caching layer reads."""

    def __init__(self, tmp: Path, cache: ThreadCache | None) -> None:
        self.application_id = "app"
        self.task_id = TaskId(0, 0)
        self.state_dir = tmp
        self.cache = cache
        self.timestamp: int | None = 7
        self.config: dict[str, Any] = {}
        self.registered: list[Any] = []

    def register(self, store: Any, restore_callback: Any = None) -> None:
        self.registered.append(store)


def _store(tmp_path: Path, max_bytes: int = 1 << 20) -> tuple[CachingKeyValueStore, InMemoryKeyValueStore, ThreadCache]:
    inner = InMemoryKeyValueStore("s")
    cache = ThreadCache(max_bytes)
    store = CachingKeyValueStore(inner)
    store.init(CacheContext(tmp_path, cache), store)  # type: ignore[arg-type]
    return store, inner, cache


def test_writes_stay_in_cache_until_flush(tmp_path: Path) -> None:
    store, inner, _ = _store(tmp_path)
    store.put(b"a", b"1")
    store.put(b"a", b"2")
    assert store.get(b"a") == b"2"
    assert inner.get(b"a") is None
    store.flush()
    assert inner.get(b"a") == b"2"


def test_delete_is_cached_as_a_tombstone(tmp_path: Path) -> None:
    store, inner, _ = _store(tmp_path)
    inner.put(b"a", b"1")
    assert store.delete(b"a") == b"1"
    assert store.get(b"a") is None
    assert inner.get(b"a") == b"1"
    store.flush()
    assert inner.get(b"a") is None


def test_flush_listener_sees_each_key_once_with_old_and_new(tmp_path: Path) -> None:
    store, inner, _ = _store(tmp_path)
    inner.put(b"a", b"0")
    seen: list[tuple[bytes, bytes | None, bytes | None, int]] = []
    assert store.set_flush_listener(lambda k, new, old, ts: seen.append((k, new, old, ts)))
    for value in (b"1", b"2", b"3"):
        store.put(b"a", value)
    store.put(b"b", b"x")
    store.flush()
    assert seen == [(b"a", b"3", b"0", 7), (b"b", b"x", None, 7)]
    store.flush()
    assert len(seen) == 2


class _CountingGets(InMemoryKeyValueStore):
    """An in-memory store that counts reads."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.gets = 0

    def get(self, key: bytes) -> bytes | None:
        self.gets += 1
        return super().get(key)


def test_flush_takes_the_old_value_from_a_clean_entry_it_overwrote(tmp_path: Path) -> None:
    inner = _CountingGets("s")
    store = CachingKeyValueStore(inner)
    store.init(CacheContext(tmp_path, ThreadCache(1 << 20)), store)  # type: ignore[arg-type]
    inner.put(b"a", b"0")
    inner.put(b"c", b"5")
    seen: list[tuple[bytes, bytes | None, bytes | None]] = []
    store.set_flush_listener(lambda k, new, old, ts: seen.append((k, new, old)))
    assert store.get(b"a") == b"0" and store.get(b"missing") is None
    store.put(b"a", b"1")
    store.put(b"a", b"2")
    store.put(b"missing", b"m")
    store.put(b"c", b"6")  # never read: the flush reads the store
    reads = inner.gets
    store.flush()
    assert seen == [(b"a", b"2", b"0"), (b"missing", b"m", None), (b"c", b"6", b"5")]
    assert inner.gets == reads + 1
    store.put(b"a", b"3")  # clean after the flush: it holds what the store holds
    store.delete(b"missing")
    store.flush()
    assert seen[3:] == [(b"a", b"3", b"2"), (b"missing", None, b"m")]
    assert inner.gets == reads + 1 and inner.get(b"missing") is None and inner.get(b"a") == b"3"
    store.put(b"x", b"1")
    store.delete(b"x")  # created and deleted between two flushes: neither written nor told
    store.get(b"gone")
    store.delete(b"gone")  # a delete of what the store never had
    store.flush()
    assert seen[5:] == [] and inner.get(b"x") is None


def test_flush_follows_the_order_of_last_writes_and_the_budget_follows_sizes(tmp_path: Path) -> None:
    store, inner, cache = _store(tmp_path)
    seen: list[bytes] = []
    store.set_flush_listener(lambda k, new, old, ts: seen.append(k))
    inner.put(b"c", b"0")
    assert store.get(b"c") == b"0"  # clean first: its first write joins the order then
    for key in (b"a", b"b", b"c", b"a", b"d", b"b"):
        store.put(key, b"1")
    size = cache.size
    store.put(b"d", b"2")  # a value of the same size
    assert cache.size == size
    store.put(b"a", b"22")  # a longer one
    assert cache.size == size + 1
    store.put(b"a", b"1")
    store.put(b"d", b"1")
    store.flush()
    assert seen == [b"c", b"b", b"a", b"d"]


def test_eviction_flushes_dirty_entries_of_the_store(tmp_path: Path) -> None:
    store, inner, cache = _store(tmp_path, max_bytes=3 * (1 + 1 + 64))
    for key in (b"a", b"b", b"c", b"d"):
        store.put(key, b"v")
    assert cache.evictions >= 1
    assert inner.get(b"a") == b"v"
    assert cache.size <= cache.max_bytes
    assert [kv.key for kv in store.all()] == [b"a", b"b", b"c", b"d"]


def test_range_sees_cached_writes(tmp_path: Path) -> None:
    store, _, _ = _store(tmp_path)
    store.put(b"b", b"2")
    store.put(b"a", b"1")
    assert list(store.range(b"a", b"b")) == [(b"a", b"1"), (b"b", b"2")]


def test_close_drops_unflushed_entries(tmp_path: Path) -> None:
    store, _inner, cache = _store(tmp_path)
    store.put(b"a", b"1")
    store.close()
    assert cache.size == 0


class _Counter(Processor):
    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store("counts")

    def process(self, record: Record[Any, Any]) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)


def _count_topology(caching: bool) -> Topology:
    builder = Stores.key_value_store_builder(
        Stores.persistent_key_value_store("counts"), Serdes.String(), Serdes.Long()
    )
    builder = builder.with_caching_enabled() if caching else builder.with_caching_disabled()
    return (
        Topology()
        .add_source("S", "words", key_serde=Serdes.String(), value_serde=Serdes.String())
        .add_processor("P", _Counter, "S")
        .add_state_store(builder, "P")
    )


@pytest.mark.parametrize("cache_bytes", [0, 200, 10 * 1024 * 1024])
def test_results_are_the_same_with_cache_on_and_off(cache_bytes: int) -> None:
    words = [f"w{i % 37}" for i in range(500)]
    results = []
    for caching in (False, True):
        config = {"application.id": "cache-eq", "statestore.cache.max.bytes": cache_bytes}
        with TopologyTestDriver(_count_topology(caching), config) as driver:
            topic = driver.create_input_topic("words", Serdes.String(), Serdes.String())
            for i, word in enumerate(words):
                topic.pipe_input(word, "x", timestamp=i)
            store = driver.get_key_value_store("counts")
            results.append(dict(store.all()))
            changelog = driver.create_output_topic("cache-eq-counts-changelog", Serdes.String(), Serdes.Long())
            last = changelog.read_key_values_to_map()
        assert last == results[-1], "the changelog's latest values equal the store"
    assert results[0] == results[1]
    assert results[0]["w0"] == len([w for w in words if w == "w0"])


def test_a_restore_below_the_cache_evicts_what_it_changes(tmp_path: Path) -> None:
    inner = InMemoryKeyValueStore("s")
    cache = ThreadCache(1 << 20)
    context = CacheContext(tmp_path, cache)
    callbacks: list[Any] = []
    context.register = lambda store, restore_callback=None: callbacks.append(restore_callback)  # type: ignore[method-assign]
    store = CachingKeyValueStore(inner)
    store.init(context, store)  # type: ignore[arg-type]
    assert store.get(b"a") is None, "a miss is cached"
    (restore,) = callbacks
    restore([(b"a", b"1")])
    assert store.get(b"a") == b"1"
    restore([(b"a", None)])
    assert store.get(b"a") is None


def test_reads_never_write_scans_merge_the_cache_with_the_store(tmp_path: Path) -> None:
    """Range, all and their reverses answer from cache and store together without flushing."""
    store, inner, _ = _store(tmp_path)
    flushed: list[bytes] = []
    store.set_flush_listener(lambda key, new, old, ts: flushed.append(key))
    for key in (b"a", b"c", b"e", b"g"):
        inner.put(key, b"stored")
    store.put(b"b", b"cached")  # new key between stored ones
    store.put(b"c", b"updated")  # cached update of a stored key
    store.delete(b"e")  # cached delete hides the stored key
    store.put(b"h", b"cached")  # new key after every stored one
    expected = [(b"a", b"stored"), (b"b", b"cached"), (b"c", b"updated"), (b"g", b"stored"), (b"h", b"cached")]
    assert [tuple(kv) for kv in store.all()] == expected
    assert [tuple(kv) for kv in store.reverse_all()] == expected[::-1]
    assert [tuple(kv) for kv in store.range(b"b", b"g")] == expected[1:4]
    assert [tuple(kv) for kv in store.reverse_range(b"b", b"g")] == expected[1:4][::-1]
    assert [tuple(kv) for kv in store.prefix_scan(b"h")] == [(b"h", b"cached")]
    assert flushed == [] and inner.get(b"e") == b"stored" and inner.get(b"b") is None, "nothing was written below"
    store.flush()
    assert sorted(flushed) == [b"b", b"c", b"e", b"h"] and inner.get(b"e") is None
