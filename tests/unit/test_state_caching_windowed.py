"""The caching window and session stores: write-back, merged reads in every order, tombstones, expiry, eviction.

Each read of a caching store is compared with the same read of an uncached store that got the
same writes directly: the cache changes when things are written below, not what reads answer,
except that it serves a window or session the store below has expired while it is still
cached, as Kafka Streams' caching stores do.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streams_core import SessionWindow, TimeWindow, Windowed
from streams_core.state.internals.caching_session_store import CachingSessionStore
from streams_core.state.internals.caching_window_store import CachingWindowStore
from streams_core.state.internals.in_memory_session_store import InMemorySessionStore
from streams_core.state.internals.in_memory_window_store import InMemoryWindowStore
from streams_core.state.internals.sqlite_session_store import SqliteSessionStore
from streams_core.state.internals.sqlite_window_store import SqliteWindowStore
from streams_core.state.internals.thread_cache import ThreadCache
from streams_core.state.internals.window_key_schema import to_store_key_binary
from tests.unit.test_state_caching import CacheContext

SIZE = 10
RETENTION = 100
Flushed = list[tuple[Any, bytes | None, bytes | None, int]]


def _opened(store: Any, tmp_path: Path, cache: ThreadCache | None = None) -> Any:
    tmp_path.mkdir(parents=True, exist_ok=True)
    store.init(CacheContext(tmp_path, cache), store)
    return store


def _window_stores(kind: str, tmp_path: Path, max_bytes: int = 1 << 20) -> tuple[CachingWindowStore, Any, Any, Flushed]:
    """(caching store, the store below it, an uncached reference store, what the flush listener saw)."""
    factory: Callable[..., Any] = InMemoryWindowStore if kind == "memory" else SqliteWindowStore
    inner = factory("w", RETENTION, SIZE)
    caching = _opened(CachingWindowStore(inner), tmp_path / "cached", ThreadCache(max_bytes))
    reference = _opened(factory("w", RETENTION, SIZE), tmp_path / "reference")
    flushed: Flushed = []
    assert caching.set_flush_listener(lambda k, new, old, ts: flushed.append((k, new, old, ts)))
    return caching, inner, reference, flushed


def _session_stores(kind: str, tmp_path: Path, max_bytes: int = 1 << 20) -> tuple[CachingSessionStore, Any, Any, Flushed]:
    factory: Callable[..., Any] = InMemorySessionStore if kind == "memory" else SqliteSessionStore
    inner = factory("s", RETENTION)
    caching = _opened(CachingSessionStore(inner), tmp_path / "cached", ThreadCache(max_bytes))
    reference = _opened(factory("s", RETENTION), tmp_path / "reference")
    flushed: Flushed = []
    assert caching.set_flush_listener(lambda k, new, old, ts: flushed.append((k, new, old, ts)))
    return caching, inner, reference, flushed


def _window_reads(store: Any) -> dict[str, Any]:
    """Every kind of read of the window store, as lists."""
    return {
        "fetch one": [store.fetch(k, s) for k in (b"a", b"b", b"c") for s in (0, 10, 20, 30)],
        "fetch": list(store.fetch(b"a", 0, 40)),
        "fetch inner range": list(store.fetch(b"a", 10, 20)),
        "backward fetch": list(store.backward_fetch(b"a", 0, 40)),
        "fetch single-key range": list(store.fetch(b"a", b"a", 0, 40)),
        "backward single-key range": list(store.backward_fetch(b"b", b"b", 0, 40)),
        "fetch key range": list(store.fetch(b"a", b"b", 0, 40)),
        "backward key range": list(store.backward_fetch(None, None, 10, 40)),
        "inverted range": list(store.fetch(b"b", b"a", 0, 40)),
        "fetch all": list(store.fetch_all(10, 30)),
        "backward fetch all": list(store.backward_fetch_all(0, 40)),
        "all": list(store.all()),
        "backward all": list(store.backward_all()),
    }


def _session_reads(store: Any) -> dict[str, Any]:
    return {
        "fetch session": [store.fetch_session(k, s, e) for k in (b"a", b"b") for s, e in ((0, 5), (10, 20), (30, 30))],
        "find": list(store.find_sessions(b"a", 0, 40)),
        "find narrow": list(store.find_sessions(b"a", 12, 25)),
        "backward find": list(store.backward_find_sessions(b"a", 0, 40)),
        "find key range": list(store.find_sessions(b"a", b"b", 0, 40)),
        "backward find open range": list(store.backward_find_sessions(None, None, 0, 40)),
        "inverted range": list(store.find_sessions(b"b", b"a", 0, 40)),
        "fetch": list(store.fetch(b"a")),
        "backward fetch": list(store.backward_fetch(b"b")),
        "fetch range": list(store.fetch(b"a", b"c")),
        "backward fetch range": list(store.backward_fetch(b"a", b"c")),
    }


def _w(key: bytes, start: int) -> Windowed[bytes]:
    return Windowed(key, TimeWindow(start, start + SIZE))


def _s(key: bytes, start: int, end: int) -> Windowed[bytes]:
    return Windowed(key, SessionWindow(start, end))


# -- window stores ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_window_reads_merge_cached_writes_with_the_store_in_every_order_without_flushing(
    kind: str, tmp_path: Path
) -> None:
    caching, inner, reference, flushed = _window_stores(kind, tmp_path)
    stored = [(b"a", 0, b"a0"), (b"a", 20, b"a20"), (b"b", 10, b"b10"), (b"b", 30, b"b30"), (b"c", 20, b"c20")]
    for key, start, value in stored:
        caching.put(key, value, start)
        reference.put(key, value, start)
    caching.flush()
    flushed.clear()
    cached = [
        (b"a", 10, b"a10 new"),  # a new window between stored ones
        (b"a", 20, b"a20 updated"),  # an update of a stored window
        (b"b", 10, None),  # a cached delete hides the stored window
        (b"b", 20, b"b20 new"),
        (b"ab", 20, b"ab20 new"),  # a longer key between "a" and "b"
        (b"c", 40, b"c40 new"),  # after every stored window
    ]
    for key, start, value in cached:
        caching.put(key, value, start)
        reference.put(key, value, start)
    assert _window_reads(caching) == _window_reads(reference)
    assert list(caching.fetch(b"a", 0, 40)) == [(0, b"a0"), (10, b"a10 new"), (20, b"a20 updated")]
    assert [(kv.key.key, kv.key.window.start) for kv in caching.fetch(b"a", b"b", 0, 40)] == [
        (b"a", 0), (b"a", 10), (b"a", 20), (b"ab", 20), (b"b", 20), (b"b", 30)]  # fmt: skip
    assert [(kv.key.window.start, kv.key.key) for kv in caching.backward_fetch_all(0, 40)] == [
        (40, b"c"), (30, b"b"), (20, b"c"), (20, b"b"), (20, b"ab"), (20, b"a"), (10, b"a"), (0, b"a")]  # fmt: skip
    assert flushed == [], "reads flushed nothing"
    assert inner.fetch(b"b", 10) == b"b10" and inner.fetch(b"a", 10) is None, "nothing was written below"
    caching.flush()
    assert [(k.key, k.window.start, new, old) for k, new, old, _ in flushed] == [
        (b"a", 10, b"a10 new", None), (b"a", 20, b"a20 updated", b"a20"), (b"b", 10, None, b"b10"),
        (b"b", 20, b"b20 new", None), (b"ab", 20, b"ab20 new", None), (b"c", 40, b"c40 new", None)]  # fmt: skip
    assert all(k.window.end == k.window.start + SIZE for k, *_ in flushed)
    assert _window_reads(inner) == _window_reads(reference)


def test_window_updates_between_flushes_reach_the_store_and_the_listener_once(tmp_path: Path) -> None:
    caching, inner, _, flushed = _window_stores("memory", tmp_path)
    for value in (b"1", b"2", b"3"):
        caching.put(b"k", value, 10)
    assert caching.fetch(b"k", 10) == b"3" and inner.fetch(b"k", 10) is None
    caching.put(b"gone", b"x", 10)
    caching.put(b"gone", None, 10)  # created and deleted between flushes: never written, never told
    caching.flush()
    assert flushed == [(_w(b"k", 10), b"3", None, 7)]
    assert inner.fetch(b"k", 10) == b"3" and inner.fetch(b"gone", 10) is None
    caching.flush()
    assert len(flushed) == 1, "a second flush has nothing to write"


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_cached_windows_are_served_after_the_store_below_expired_them(kind: str, tmp_path: Path) -> None:
    """As Kafka Streams' CachingWindowStore (fetch: the cache entry, else the store below; range
    reads merge the cache, which applies no retention): an expired window is served while cached."""
    caching, inner, reference, _ = _window_stores(kind, tmp_path)
    for store in (caching, reference):
        store.put(b"a", b"old", 0)
    caching.flush()
    for store in (caching, reference):
        store.put(b"b", b"cached old", 50)
        store.put(b"a", b"new", 200)  # observed 200: starts <= 100 have expired
    expected = [(_w(b"a", 0), b"old"), (_w(b"b", 50), b"cached old"), (_w(b"a", 200), b"new")]
    for flushed in (False, True):
        assert caching.fetch(b"a", 0) == b"old" and caching.fetch(b"b", 50) == b"cached old", f"flushed: {flushed}"
        assert list(caching.all()) == expected and list(caching.fetch_all(0, 60)) == expected[:2]
        assert [kv.key for kv in caching.fetch(b"a", 0, 300)] == [0, 200]
        assert [kv.key for kv in caching.backward_fetch(b"a", b"b", 0, 300)] == [_w(b"b", 50), _w(b"a", 200), _w(b"a", 0)]
        caching.flush()
    assert inner.fetch(b"a", 0) is None and list(inner.all()) == [(_w(b"a", 200), b"new")], "expired below"
    assert reference.fetch(b"a", 0) is None and list(reference.all()) == [(_w(b"a", 200), b"new")]


def test_an_evicted_expired_window_is_no_longer_served(tmp_path: Path) -> None:
    entry = len(b"k0") + 12 + 3 + 64  # key, window suffix, value, overhead
    caching, inner, _, _ = _window_stores("memory", tmp_path, max_bytes=3 * entry)
    caching.put(b"k0", b"old", 0)
    caching.put(b"k1", b"new", 200)
    caching.flush()
    assert len(list(caching.all())) == 2, "k0's window is expired below, still cached"
    caching.put(b"k2", b"new", 200)
    caching.put(b"k3", b"new", 200)  # evicts k0's window, the least recently used
    assert caching.fetch(b"k0", 0) is None and inner.fetch(b"k0", 0) is None
    assert [kv.key.key for kv in caching.all()] == [b"k1", b"k2", b"k3"]
    assert [kv.key.key for kv in caching.fetch(b"k0", b"k9", 0, 300)] == [b"k1", b"k2", b"k3"]


def test_window_eviction_flushes_the_dirty_entries_through_the_listener(tmp_path: Path) -> None:
    entry = len(b"k0") + 12 + 1 + 64  # key, window suffix, value, overhead
    caching, inner, _, flushed = _window_stores("memory", tmp_path, max_bytes=3 * entry)
    for i in range(4):
        caching.put(f"k{i}".encode(), b"v", 10)
    assert caching._cache is not None and caching._cache.evictions >= 1
    assert [k.key for k, *_ in flushed] == [b"k0", b"k1", b"k2", b"k3"], "the eviction flushed every dirty entry"
    assert inner.fetch(b"k0", 10) == b"v"
    assert [kv.key.key for kv in caching.all()] == [b"k0", b"k1", b"k2", b"k3"]


def test_window_cache_invalidated_by_a_restore_below(tmp_path: Path) -> None:
    inner = InMemoryWindowStore("w", RETENTION, SIZE)
    context = CacheContext(tmp_path, ThreadCache(1 << 20))
    callbacks: list[Any] = []
    context.register = lambda store, restore_callback=None: callbacks.append(restore_callback)  # type: ignore[method-assign]
    caching = CachingWindowStore(inner)
    caching.init(context, caching)  # type: ignore[arg-type]
    caching.put(b"a", b"1", 10)
    caching.flush()  # now a clean cache entry
    (restore,) = callbacks
    restore([(to_store_key_binary(b"a", 10, 0), b"2")])
    assert caching.fetch(b"a", 10) == b"2"


# -- session stores --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_session_reads_merge_cached_writes_with_the_store_in_every_order_without_flushing(
    kind: str, tmp_path: Path
) -> None:
    caching, inner, reference, flushed = _session_stores(kind, tmp_path)
    stored = [(b"a", 0, 5, b"a0-5"), (b"a", 10, 20, b"a10-20"), (b"b", 10, 20, b"b10-20"), (b"c", 30, 30, b"c30")]
    for key, start, end, value in stored:
        caching.put(_s(key, start, end), value)
        reference.put(_s(key, start, end), value)
    caching.flush()
    flushed.clear()
    # a session merge as the aggregation makes it: remove the old sessions, put the merged one
    for store in (caching, reference):
        store.remove(_s(b"a", 10, 20))
        store.put(_s(b"a", 10, 25), b"a10-25 merged")
        store.put(_s(b"a", 30, 30), b"a30 new")
        store.put(_s(b"b", 10, 20), b"b10-20 updated")
        store.put(_s(b"ab", 12, 12), b"ab12 new")
    assert _session_reads(caching) == _session_reads(reference)
    assert [(kv.key.window.start, kv.key.window.end) for kv in caching.find_sessions(b"a", 0, 40)] == [
        (0, 5), (10, 25), (30, 30)]  # fmt: skip
    assert [(kv.key.key, kv.key.window.end) for kv in caching.backward_fetch(b"a", b"b")] == [
        (b"b", 20), (b"ab", 12), (b"a", 30), (b"a", 25), (b"a", 5)]  # fmt: skip
    assert flushed == [] and inner.fetch_session(b"a", 10, 20) == b"a10-20", "reads wrote nothing"
    caching.flush()
    assert [(k.key, k.window.start, k.window.end, new, old) for k, new, old, _ in flushed] == [
        (b"a", 10, 20, None, b"a10-20"), (b"a", 10, 25, b"a10-25 merged", None), (b"a", 30, 30, b"a30 new", None),
        (b"b", 10, 20, b"b10-20 updated", b"b10-20"), (b"ab", 12, 12, b"ab12 new", None)]  # fmt: skip
    assert _session_reads(inner) == _session_reads(reference)


def test_session_created_and_merged_away_between_flushes_never_reaches_the_store(tmp_path: Path) -> None:
    caching, inner, _, flushed = _session_stores("memory", tmp_path)
    caching.put(_s(b"a", 0, 0), b"1")
    caching.remove(_s(b"a", 0, 0))
    caching.put(_s(b"a", 0, 5), b"2")
    assert [kv.key.window for kv in caching.fetch(b"a")] == [SessionWindow(0, 5)]
    caching.flush()
    assert flushed == [(_s(b"a", 0, 5), b"2", None, 7)]
    assert list(inner.fetch(b"a")) == [(_s(b"a", 0, 5), b"2")]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_cached_sessions_are_served_after_the_store_below_expired_them(kind: str, tmp_path: Path) -> None:
    """As Kafka Streams' CachingSessionStore (fetchSession: the cache entry, else the store below;
    findSessions merges the cache, which applies no retention): an expired session is served while cached."""
    caching, inner, reference, _ = _session_stores(kind, tmp_path)
    for store in (caching, reference):
        store.put(_s(b"a", 0, 0), b"old")
    caching.flush()
    for store in (caching, reference):
        store.put(_s(b"a", 40, 50), b"cached old")
        store.put(_s(b"b", 200, 200), b"new")  # observed 200: ends <= 100 have expired
    for flushed in (False, True):
        assert caching.fetch_session(b"a", 0, 0) == b"old", f"flushed: {flushed}"
        assert list(caching.fetch(b"a")) == [(_s(b"a", 0, 0), b"old"), (_s(b"a", 40, 50), b"cached old")]
        assert [kv.key for kv in caching.backward_fetch(b"a", b"b")] == [_s(b"b", 200, 200), _s(b"a", 40, 50), _s(b"a", 0, 0)]
        caching.flush()
    assert inner.fetch_session(b"a", 0, 0) is None and list(inner.fetch(b"a")) == [], "expired below"
    assert list(reference.fetch(b"a")) == []


def test_session_eviction_flushes_through_the_listener(tmp_path: Path) -> None:
    entry = len(b"k0") + 16 + 1 + 64
    caching, inner, _, flushed = _session_stores("memory", tmp_path, max_bytes=3 * entry)
    for i in range(4):
        caching.put(_s(f"k{i}".encode(), 5, 5), b"v")
    assert caching._cache is not None and caching._cache.evictions >= 1
    assert [k.key for k, *_ in flushed] == [b"k0", b"k1", b"k2", b"k3"], "the eviction flushed every dirty entry"
    assert inner.fetch_session(b"k0", 5, 5) == b"v"
    assert [kv.key.key for kv in caching.fetch(None, None)] == [b"k0", b"k1", b"k2", b"k3"]
