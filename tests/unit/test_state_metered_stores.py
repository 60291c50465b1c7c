"""Typed store layers: serdes, key order of serialized keys, errors, default serdes, metrics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streams_core.common.task_id import TaskId
from streams_core.errors import (
    DeserializationError,
    InvalidStateStoreError,
    ProcessorStateError,
    SerializationError,
)
from streams_core.serde import Serde, Serdes
from streams_core.state import KeyValue, SessionWindow, Stores, TimeWindow, Windowed
from streams_core.state.internals.metered_key_value_store import MeteredKeyValueStore
from streams_core.state.internals.processor_state_manager import ProcessorStateManager


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[ProcessorStateManager]:
    with ProcessorStateManager(TaskId(0, 1), "app", tmp_path / "0_1") as manager:
        yield manager


@pytest.fixture(params=["persistent", "in_memory"])
def kv(request: pytest.FixtureRequest, manager: ProcessorStateManager) -> MeteredKeyValueStore[str, int]:
    supplier = getattr(Stores, f"{request.param}_key_value_store")("counts")
    store = Stores.key_value_store_builder(supplier, Serdes.String(), Serdes.Long()).build()
    store.init(manager.context, store)
    return store


def test_typed_operations(kv: MeteredKeyValueStore[str, int]) -> None:
    kv.put("b", 2)
    kv.put("a", 1)
    assert kv.get("a") == 1
    assert kv.get("missing") is None
    assert kv.put_if_absent("a", 5) == 1
    assert kv.put_if_absent("c", 3) is None
    kv.put_all([("d", 4), ("e", 5), ("e", None)])
    assert kv.delete("d") == 4
    assert kv.delete("d") is None
    kv.put("b", None)
    assert list(kv.all()) == [KeyValue("a", 1), KeyValue("c", 3)]
    assert [key for key, _ in kv.reverse_all()] == ["c", "a"]
    assert kv.approximate_num_entries() == 2


def test_typed_ranges_and_prefix_scans(kv: MeteredKeyValueStore[str, int]) -> None:
    for key in ("apple", "apricot", "banana", "b", "cherry"):
        kv.put(key, len(key))
    assert [k for k, _ in kv.range("apricot", "banana")] == ["apricot", "b", "banana"]
    assert [k for k, _ in kv.range(None, "apple")] == ["apple"]
    assert [k for k, _ in kv.reverse_range("b", None)] == ["cherry", "banana", "b"]
    assert list(kv.prefix_scan("ap")) == [KeyValue("apple", 5), KeyValue("apricot", 7)]
    assert [k for k, _ in kv.prefix_scan("b", Serdes.String())] == ["b", "banana"]
    assert [k for k, _ in kv.prefix_scan(b"ch", Serdes.Bytes())] == ["cherry"]


def test_long_keys_order_by_their_bytes_negative_after_positive(manager: ProcessorStateManager) -> None:
    store = Stores.key_value_store_builder(
        Stores.persistent_key_value_store("longs"), Serdes.Long(), Serdes.String()
    ).build()
    store.init(manager.context, store)
    for key in (-1, 2, -(2**63), 0, 2**63 - 1, 1):
        store.put(key, str(key))
    assert [k for k, _ in store.all()] == [0, 1, 2, 2**63 - 1, -(2**63), -1]
    assert [k for k, _ in store.range(0, 2)] == [0, 1, 2]
    assert [k for k, _ in store.range(1, -1)] == [1, 2, 2**63 - 1, -(2**63), -1]


def test_serialization_errors_name_the_store(kv: MeteredKeyValueStore[str, int]) -> None:
    with pytest.raises(SerializationError, match="Long serde expects int"):
        kv.put("a", "not a number")  # type: ignore[arg-type]
    with pytest.raises(SerializationError):
        kv.get(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key cannot be None"):
        kv.put(None, 1)  # type: ignore[arg-type]


def test_foreign_serde_exceptions_become_streams_errors(manager: ProcessorStateManager) -> None:
    class Broken(Serde[Any]):
        def serialize(self, topic: str | None, data: Any) -> bytes | None:
            raise ValueError("boom")

        def deserialize(self, topic: str | None, data: bytes | None) -> Any:
            raise ValueError("bang")

    store = Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("broken"), Serdes.String(), Broken()
    ).build()
    store.init(manager.context, store)
    with pytest.raises(SerializationError, match=r"store 'broken': cannot serialize value 1.*boom"):
        store.put("a", 1)
    store.wrapped().put(b"a", b"raw")
    with pytest.raises(DeserializationError, match="store 'broken': cannot deserialize a value: bang"):
        store.get("a")
    with pytest.raises(DeserializationError):
        list(store.all())


def test_stored_bytes_that_do_not_deserialize(kv: MeteredKeyValueStore[str, int]) -> None:
    kv.wrapped().put(b"a", b"\x01")
    with pytest.raises(DeserializationError, match="expects 8 bytes"):
        kv.get("a")


def test_serdes_see_the_changelog_topic(manager: ProcessorStateManager) -> None:
    topics: list[str | None] = []

    class Recording(Serde[str]):
        def serialize(self, topic: str | None, data: str | None) -> bytes | None:
            topics.append(topic)
            return None if data is None else data.encode()

        def deserialize(self, topic: str | None, data: bytes | None) -> str | None:
            topics.append(topic)
            return None if data is None else data.decode()

    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("t"), Recording(), Recording()).build()
    store.init(manager.context, store)
    store.put("k", "v")
    store.get("k")
    assert set(topics) == {"app-t-changelog"}


def test_missing_serdes_come_from_set_serdes_if_missing(manager: ProcessorStateManager) -> None:
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("d")).build()
    store.set_serdes_if_missing(Serdes.String(), Serdes.Integer())
    store.set_serdes_if_missing(Serdes.Bytes(), Serdes.Bytes())
    store.init(manager.context, store)
    store.put("k", 7)
    assert store.wrapped().get(b"k") == b"\x00\x00\x00\x07"
    assert (store.key_serde, store.value_serde) == (Serdes.String(), Serdes.Integer())


def test_missing_serdes_come_from_the_context_defaults(tmp_path: Path) -> None:
    with ProcessorStateManager(
        TaskId(0, 0), "app", tmp_path / "t", default_key_serde=Serdes.String(), default_value_serde=Serdes.Json()
    ) as manager:
        store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("d"), None, Serdes.String()).build()
        store.init(manager.context, store)
        assert (store.key_serde, store.value_serde) == (Serdes.String(), Serdes.String())


def test_a_serde_still_missing_at_init_is_an_error(manager: ProcessorStateManager) -> None:
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("d"), Serdes.String()).build()
    with pytest.raises(ProcessorStateError, match=r"no value serde.*default\.value\.serde"):
        store.init(manager.context, store)


def test_operations_before_init_and_after_close_are_refused(manager: ProcessorStateManager) -> None:
    store = Stores.key_value_store_builder(
        Stores.persistent_key_value_store("x"), Serdes.String(), Serdes.String()
    ).build()
    with pytest.raises(InvalidStateStoreError):
        store.get("a")
    store.init(manager.context, store)
    store.put("a", "1")
    store.close()
    with pytest.raises(InvalidStateStoreError):
        store.get("a")
    with pytest.raises(InvalidStateStoreError):
        store.all()


def test_the_root_store_is_registered(kv: MeteredKeyValueStore[str, int], manager: ProcessorStateManager) -> None:
    assert manager.get_store("counts") is kv
    meta = manager.store_metadata("counts")
    innermost = kv.wrapped()
    while hasattr(innermost, "wrapped"):
        innermost = innermost.wrapped()
    assert innermost is not kv.wrapped(), "change logging wraps the bytes store by default"
    assert meta is not None and meta.restore_callback == innermost.restore_batch  # type: ignore[attr-defined]


def test_counts_always_latency_only_when_enabled(kv: MeteredKeyValueStore[str, int]) -> None:
    kv.put("a", 1)
    kv.get("a")
    kv.get("b")
    list(kv.range("a", "b"))
    kv.flush()
    assert kv.metrics.counts == {"put": 1, "get": 2, "range": 1, "flush": 1}
    assert kv.metrics.latency_ns == {}
    kv.set_record_latency(True)
    kv.get("a")
    assert kv.metrics.counts["get"] == 3
    assert kv.metrics.latency_ns["get"] > 0
    kv.set_record_latency(False)
    kv.put("a", 2)
    assert "put" not in kv.metrics.latency_ns
    snapshot = kv.metrics.snapshot()
    assert snapshot["store"] == "counts" and snapshot["scope"] in ("sqlite-state", "in-memory-state")


@pytest.mark.parametrize("kind", ["persistent", "in_memory"])
def test_typed_window_store(kind: str, manager: ProcessorStateManager) -> None:
    supplier = getattr(Stores, f"{kind}_window_store")("win", 10_000, 1_000)
    store = Stores.window_store_builder(supplier, Serdes.String(), Serdes.Long()).build()
    store.init(manager.context, store)
    assert (store.window_size, store.retention_period, store.retain_duplicates) == (1_000, 10_000, False)
    store.put("a", 1, 0)
    store.put("a", 2, 1_000)
    store.put("b", 3, 1_000)
    assert store.fetch("a", 1_000) == 2
    assert store.fetch("zzz", 1_000) is None
    assert list(store.fetch("a", 0, 1_000)) == [KeyValue(0, 1), KeyValue(1_000, 2)]
    assert list(store.backward_fetch("a", 0, 1_000)) == [KeyValue(1_000, 2), KeyValue(0, 1)]
    assert list(store.fetch("a", "b", 1_000, 1_000)) == [
        KeyValue(Windowed("a", TimeWindow(1_000, 2_000)), 2),
        KeyValue(Windowed("b", TimeWindow(1_000, 2_000)), 3),
    ]
    assert [kv.value for kv in store.backward_fetch(None, "a", 0, 5_000)] == [2, 1]
    assert [kv.key.key for kv in store.all()] == ["a", "a", "b"]
    assert [kv.value for kv in store.backward_all()] == [3, 2, 1]
    assert [kv.value for kv in store.fetch_all(1_000, 1_000)] == [2, 3]
    assert [kv.value for kv in store.backward_fetch_all(0, 1_000)] == [3, 2, 1]
    assert store.metrics.counts["fetch"] == 4


@pytest.mark.parametrize("kind", ["persistent", "in_memory"])
def test_typed_session_store(kind: str, manager: ProcessorStateManager) -> None:
    supplier = getattr(Stores, f"{kind}_session_store")("sessions", 10_000)
    store = Stores.session_store_builder(supplier, Serdes.String(), Serdes.Long()).build()
    store.init(manager.context, store)
    assert store.retention_period == 10_000
    store.put(Windowed("a", SessionWindow(0, 100)), 2)
    store.put(Windowed("a", SessionWindow(500, 600)), 1)
    store.put(Windowed("b", SessionWindow(50, 60)), 5)
    assert store.fetch_session("a", 0, 100) == 2
    assert list(store.find_sessions("a", 100, 500)) == [
        KeyValue(Windowed("a", SessionWindow(0, 100)), 2),
        KeyValue(Windowed("a", SessionWindow(500, 600)), 1),
    ]
    assert [kv.value for kv in store.backward_find_sessions("a", 100, 500)] == [1, 2]
    assert [kv.value for kv in store.find_sessions("a", "b", 60, 60)] == [2, 5]
    assert [kv.value for kv in store.fetch("a")] == [2, 1]
    assert [kv.value for kv in store.backward_fetch("a", "b")] == [5, 1, 2]
    store.remove(Windowed("a", SessionWindow(0, 100)))
    store.put(Windowed("a", SessionWindow(500, 600)), None)
    assert list(store.fetch("a")) == []


class _CountingSerde(Serde[Any]):
    """Json that counts its serializations."""

    name = "CountingJson"

    def __init__(self) -> None:
        self.calls = 0

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        self.calls += 1
        return Serdes.Json().serialize(topic, data)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        return Serdes.Json().deserialize(topic, data)


def test_a_get_then_put_of_one_immutable_key_serializes_it_once(manager: ProcessorStateManager) -> None:
    serde = _CountingSerde()
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("memo"), serde, Serdes.Long()).build()
    store.init(manager.context, store)
    key = "word"
    assert store.get(key) is None
    store.put(key, 1)
    assert serde.calls == 1
    store.put("other", 2)
    store.put(key, 3)
    assert serde.calls == 3
    assert store.get("word") == 3 and store.get("other") == 2


def test_a_mutable_key_is_serialized_on_every_call(manager: ProcessorStateManager) -> None:
    serde = _CountingSerde()
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("memo"), serde, Serdes.Long()).build()
    store.init(manager.context, store)
    key = ["a"]
    assert store.get(key) is None
    key.append("b")
    store.put(key, 1)
    assert serde.calls == 2
    assert store.get(["a", "b"]) == 1 and store.get(["a"]) is None
