"""The typed layer's write buffer over a record cache: the same reads, flushes and errors as the cache alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams_core import Serdes
from streams_core.errors import InvalidStateStoreError, SerializationError
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp, ValueAndTimestampSerde
from streams_core.serde import Serde
from streams_core.state.internals import metered_key_value_store, thread_cache
from streams_core.state.internals.caching_key_value_store import CachingKeyValueStore
from streams_core.state.internals.in_memory_key_value_store import InMemoryKeyValueStore
from streams_core.state.internals.metered_key_value_store import MeteredKeyValueStore
from streams_core.state.internals.thread_cache import ThreadCache
from tests.unit.test_state_caching import CacheContext

# The String serde's own functions behind another object: the same bytes, but not a serde the
# buffer knows to be one-to-one, so a store with it has no buffer (the reference behaviour).
PLAIN_STRING: Serde[str] = Serdes.from_functions(lambda s: s.encode(), lambda b: b.decode())
STRING, LONG = Serdes.String(), Serdes.Long()


class RecordingStore(InMemoryKeyValueStore):
    """An in-memory store that keeps the keys written to it, also once closed."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.written: list[bytes] = []

    def put(self, key: bytes, value: bytes | None) -> None:
        self.written.append(key)
        super().put(key, value)


class Store:
    """A typed store over a caching layer over an in-memory store, with its flushes recorded."""

    def __init__(self, tmp: Path, key_serde: Serde[Any] = STRING, value_serde: Serde[Any] = LONG,
                 max_bytes: int = 1 << 20) -> None:  # fmt: skip
        self.inner = RecordingStore("s")
        self.caching = CachingKeyValueStore(self.inner)
        self.typed: MeteredKeyValueStore[Any, Any] = MeteredKeyValueStore(self.caching, key_serde, value_serde)
        self.context = CacheContext(tmp, ThreadCache(max_bytes))
        self.typed.init(self.context, self.typed)  # type: ignore[arg-type]
        self.flushed: list[tuple[Any, Any, Any, int]] = []
        assert self.typed.set_flush_listener(lambda key, new, old, ts: self.flushed.append((key, new, old, ts)))

    def write(self, timestamp: int, key: Any, value: Any) -> None:
        self.context.timestamp = timestamp
        self.typed.put(key, value)


def _writes(store: Store) -> None:
    store.write(1, "a", 1)
    store.write(2, "b", 2)
    store.write(3, "a", 3)
    store.write(4, "c", 4)
    store.write(5, "b", None)


def test_flushes_are_those_of_the_cache_alone_in_last_write_order_with_each_write_time(tmp_path: Path) -> None:
    buffered, reference = Store(tmp_path / "b"), Store(tmp_path / "r", key_serde=PLAIN_STRING)
    for store in (buffered, reference):
        store.inner.put(b"b", Serdes.Long().serialize("t", 9))
        _writes(store)
    assert buffered.caching.get(b"a") is None  # still in the buffer, not in the cache
    assert reference.caching.get(b"a") is not None
    assert [buffered.typed.get(k) for k in "abcd"] == [reference.typed.get(k) for k in "abcd"] == [3, None, 4, None]
    buffered.typed.flush()
    reference.typed.flush()
    assert buffered.flushed == reference.flushed == [("a", 3, None, 3), ("c", 4, None, 4), ("b", None, 9, 5)]
    assert dict(buffered.inner.all()) == dict(reference.inner.all())


def test_scans_and_counts_see_buffered_writes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    _writes(store)
    assert [tuple(kv) for kv in store.typed.all()] == [("a", 3), ("c", 4)]
    assert [tuple(kv) for kv in store.typed.range("b", "z")] == [("c", 4)]
    assert [tuple(kv) for kv in store.typed.reverse_all()] == [("c", 4), ("a", 3)]
    assert store.flushed == []  # a scan hands the buffer to the cache; it does not flush


def test_a_delete_of_a_buffered_key_returns_its_value(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write(1, "a", 1)
    assert store.typed.delete("a") == 1
    assert store.typed.get("a") is None
    store.typed.flush()
    assert store.flushed == []  # created and deleted between two flushes: never reaches the store


def test_mutable_values_are_not_buffered(tmp_path: Path) -> None:
    store = Store(tmp_path, value_serde=Serdes.Json())
    store.write(1, "a", [1])
    got = store.typed.get("a")
    got.append(2)
    assert store.typed.get("a") == [1]
    assert store.caching.get(b"a") == b"[1]"


def test_a_store_without_cache_budget_writes_through_at_once(tmp_path: Path) -> None:
    store = Store(tmp_path, max_bytes=0)
    store.write(1, "a", 1)
    assert store.flushed == [("a", 1, None, 1)]  # evicted, so flushed, by the put itself
    assert store.inner.get(b"a") == Serdes.Long().serialize("t", 1)


def test_a_typed_store_buffers_only_over_a_layer_that_offers_to_take_the_writes(tmp_path: Path) -> None:
    """The caching layer offers itself (`write_buffer_target`); a typed layer straight over a bytes
    store (no caching, or a layer that does not offer) writes each put through."""
    inner = RecordingStore("s")
    typed: MeteredKeyValueStore[Any, Any] = MeteredKeyValueStore(inner, STRING, LONG)
    typed.init(CacheContext(tmp_path, ThreadCache(1 << 20)), typed)
    typed.put("a", 1)
    assert inner.written == [b"a"]
    cached = Store(tmp_path / "c")
    assert cached.caching.write_buffer_target() is cached.caching
    cached.write(1, "a", 1)
    assert cached.inner.written == [] and cached.caching.get(b"a") is None  # buffered above the cache


def test_a_full_buffer_moves_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metered_key_value_store, "WRITE_BUFFER_ENTRIES", 3)
    store = Store(tmp_path)
    store.write(1, "a", 1)
    store.write(2, "b", 2)
    assert store.caching.get(b"a") is None
    store.write(3, "c", 3)
    assert [store.caching.get(k) is not None for k in (b"a", b"b", b"c")] == [True, True, True]
    assert store.typed.get("a") == 1


def test_a_key_the_serde_refuses_fails_its_put(tmp_path: Path) -> None:
    store = Store(tmp_path, key_serde=LONG)
    with pytest.raises(SerializationError, match=r"Long serde .*topic=app-s-changelog"):
        store.write(1, 2**70, 1)
    store.typed.flush()
    assert store.flushed == []


def test_a_value_the_serde_refuses_fails_the_flush_and_stays_buffered_until_overwritten(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write(1, "a", 1)
    store.write(2, "b", 2**70)  # an int, as the buffer holds for a Long store, but too large for 8 bytes
    store.write(3, "c", 3)
    with pytest.raises(SerializationError, match="Long serde cannot encode") as failed:
        store.typed.flush()
    assert "key 'b' of store 's'" in "".join(failed.value.__notes__)
    assert store.flushed == []  # nothing flushed: the commit fails
    assert store.caching.get(b"a") is not None and store.caching.get(b"c") is None  # handed over up to "b"
    assert [store.typed.get(k) for k in "abc"] == [1, 2**70, 3]
    with pytest.raises(InvalidStateStoreError, match="cannot be read now"):
        list(store.typed.all())  # a query answers 503, never the store without that write
    store.write(4, "b", 2)
    store.typed.flush()
    assert store.flushed == [("a", 1, None, 1), ("c", 3, None, 3), ("b", 2, None, 4)]  # last-write order


@pytest.mark.parametrize("value", [True, "one", 1.0])
def test_values_the_serde_would_not_give_back_unchanged_take_the_cache_path(tmp_path: Path, value: Any) -> None:
    buffered, reference = Store(tmp_path / "b"), Store(tmp_path / "r", key_serde=PLAIN_STRING)
    outcomes = []
    for store in (buffered, reference):
        try:
            store.write(1, "a", value)
            outcomes.append(("stored", store.typed.get("a"), type(store.typed.get("a"))))
        except SerializationError as exc:
            outcomes.append(("refused", str(exc), None))
    assert outcomes[0] == outcomes[1]  # True comes back as 1 (an int), a str or a float is refused at its put


def test_a_table_value_of_none_is_a_delete_as_through_the_bytes(tmp_path: Path) -> None:
    vat = ValueAndTimestampSerde(Serdes.Long())
    buffered, reference = Store(tmp_path / "b", value_serde=vat), Store(tmp_path / "r", key_serde=PLAIN_STRING, value_serde=vat)
    for store in (buffered, reference):
        store.write(1, "a", ValueAndTimestamp(1, 1))
        store.write(2, "a", ValueAndTimestamp(None, 2))  # a reducer's None: Kafka Streams deletes the key
        store.write(3, "b", ValueAndTimestamp(5, 3))
    assert [buffered.typed.get(k) for k in "ab"] == [reference.typed.get(k) for k in "ab"] == [None, (5, 3)]
    assert buffered.caching.get(b"b") is None  # the pair of a Long and a timestamp is buffered
    buffered.typed.flush()
    reference.typed.flush()
    assert buffered.flushed == reference.flushed


def test_a_key_of_another_type_is_not_answered_from_the_buffer(tmp_path: Path) -> None:
    store = Store(tmp_path, key_serde=Serdes.Long())
    store.write(1, 1, 5)
    assert store.typed.get(1) == 5
    with pytest.raises(SerializationError):
        store.typed.get(1.0)  # type: ignore[arg-type]  # equal to 1 in a dict, refused by the serde


def test_close_drops_buffered_writes_as_the_cache_drops_its_own(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write(1, "a", 1)
    store.typed.close()
    assert store.flushed == []
    assert store.inner.written == []


def test_reads_the_buffer_answers_are_cache_hits_once_handed_over(tmp_path: Path) -> None:
    store = Store(tmp_path)
    cache = store.context.cache
    assert cache is not None
    store.write(1, "a", 1)
    for _ in range(3):
        assert store.typed.get("a") == 1
    store.typed.flush()
    assert cache.hits == 3


def test_a_read_while_the_cache_takes_the_buffer_finds_every_write(tmp_path: Path) -> None:
    overhead = len(b"a") + 16 + thread_cache._ENTRY_OVERHEAD  # one entry fits, a second evicts the first
    store = Store(tmp_path, max_bytes=overhead + 1)
    seen: list[list[Any]] = []
    store.typed.set_flush_listener(lambda key, new, old, ts: seen.append([store.typed.get(k) for k in "abc"]))
    for timestamp, key in enumerate("abc", 1):
        store.write(timestamp, key, timestamp)
    store.typed.flush()
    assert seen and all(values == [1, 2, 3] for values in seen)  # evictions forward while "c" is still buffered
