"""Timestamped stores: the stores of KTables and windowed aggregates, and their builders.

The DSL keeps `ValueAndTimestamp` values (see value_and_timestamp.py) in an ordinary typed
store (`MeteredKeyValueStore` / `MeteredWindowStore` with a `ValueAndTimestampSerde`), and
registers this view over it with the task. The view answers with plain values, so interactive
queries, the TopologyTestDriver and the REST layer see `store.get("hello") == 3`; DSL
processors use `view.timestamped`, the store of `ValueAndTimestamp`s. A plain `put` through the
view stores the value with an unknown timestamp (-1), as Java's facade does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from streams_core.common.store import KeyValue, KeyValueStore, StateStore, StateStoreContext, key_value
from streams_core.kstream.internals.value_and_timestamp import UNKNOWN_TIMESTAMP, ValueAndTimestamp
from streams_core.processor.type_vars import K, V
from streams_core.serde import Serde
from streams_core.state.window_store import WindowStore
from streams_core.state.windowed import Windowed

__all__ = [
    "TimestampedKeyValueStore",
    "TimestampedStoreBuilder",
    "TimestampedWindowStore",
]

FlushListener = Callable[[Any, Any, Any, int], None]


S = TypeVar("S", bound=StateStore)
_K = TypeVar("_K")
_V = TypeVar("_V")


def _plain(entries: Iterator[KeyValue[_K, ValueAndTimestamp[_V]]]) -> Iterator[KeyValue[_K, _V]]:
    for key, stored in entries:
        yield key_value((key, stored.value))


def _value(stored: ValueAndTimestamp[_V] | None) -> _V | None:
    return None if stored is None else stored.value


class _TimestampedView(Generic[S]):
    """What both views share: the lifecycle of the store below (S) and the flush listener.

    Anything else is the store below's (`__getattr__`), `timestamped_values` included: whether it
    holds `ValueAndTimestamp` bytes is its value serde's to say (`state_serdes.timestamped_values`).
    """

    def __init__(self, timestamped: S) -> None:
        self.timestamped = timestamped

    @property
    def name(self) -> str:
        return self.timestamped.name

    @property
    def persistent(self) -> bool:
        return self.timestamped.persistent

    @property
    def is_open(self) -> bool:
        return self.timestamped.is_open

    @property
    def key_serde(self) -> Serde[Any] | None:
        return self.timestamped.key_serde  # type: ignore[attr-defined,no-any-return]  # the metered layer's

    @property
    def value_serde(self) -> Serde[Any] | None:
        """The serde of the plain values (the store below holds them with their timestamps)."""
        return getattr(self.timestamped.value_serde, "inner", None)  # type: ignore[attr-defined]

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self.timestamped.init(context, root)

    def flush(self) -> None:
        self.timestamped.flush()

    def close(self) -> None:
        self.timestamped.close()

    def wrapped(self) -> S:
        return self.timestamped

    def set_flush_listener(self, listener: FlushListener) -> bool:
        """Forward the caching layer's flushes as (key, new value, old value, timestamp); False without caching.

        The timestamp is the new value's own (the table's), as Java's timestamped flush listener.
        """
        setter = getattr(self.timestamped, "set_flush_listener", None)
        if setter is None:
            return False

        def unwrap(
            key: object, new: ValueAndTimestamp[object] | None, old: ValueAndTimestamp[object] | None,
            timestamp: int | None = None,
        ) -> None:  # fmt: skip
            if new is not None:
                timestamp = new.timestamp
            elif timestamp is None:
                timestamp = UNKNOWN_TIMESTAMP
            listener(key, _value(new), _value(old), timestamp)

        return bool(setter(unwrap))

    def __getattr__(self, name: str) -> Any:
        if name == "timestamped":
            raise AttributeError(name)
        return getattr(self.timestamped, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.timestamped!r})"


class TimestampedKeyValueStore(_TimestampedView[KeyValueStore[K, ValueAndTimestamp[V]]], Generic[K, V]):
    """A key-value store of plain values over a store of `ValueAndTimestamp`s."""

    def get(self, key: K) -> V | None:
        return _value(self.timestamped.get(key))

    def get_with_timestamp(self, key: K) -> ValueAndTimestamp[V] | None:
        return self.timestamped.get(key)

    def put(self, key: K, value: V | None) -> None:
        self.timestamped.put(key, None if value is None else ValueAndTimestamp(value, UNKNOWN_TIMESTAMP))

    def put_if_absent(self, key: K, value: V) -> V | None:
        return _value(self.timestamped.put_if_absent(key, ValueAndTimestamp(value, UNKNOWN_TIMESTAMP)))

    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None:
        self.timestamped.put_all(
            [(k, None if v is None else ValueAndTimestamp(v, UNKNOWN_TIMESTAMP)) for k, v in entries]
        )

    def delete(self, key: K) -> V | None:
        return _value(self.timestamped.delete(key))

    def range(self, from_key: K | None, to_key: K | None) -> Iterator[KeyValue[K, V]]:
        return _plain(self.timestamped.range(from_key, to_key))

    def reverse_range(self, from_key: K | None, to_key: K | None) -> Iterator[KeyValue[K, V]]:
        return _plain(self.timestamped.reverse_range(from_key, to_key))

    def all(self) -> Iterator[KeyValue[K, V]]:
        return _plain(self.timestamped.all())

    def reverse_all(self) -> Iterator[KeyValue[K, V]]:
        return _plain(self.timestamped.reverse_all())

    def prefix_scan(self, prefix: Any, prefix_serde: Any = None) -> Iterator[KeyValue[K, V]]:
        return _plain(self.timestamped.prefix_scan(prefix, prefix_serde))

    def approximate_num_entries(self) -> int:
        return self.timestamped.approximate_num_entries()


class TimestampedWindowStore(_TimestampedView[WindowStore[K, ValueAndTimestamp[V]]], Generic[K, V]):
    """A window store of plain values over a window store of `ValueAndTimestamp`s."""

    @property
    def window_size(self) -> int:
        return self.timestamped.window_size

    @property
    def retention_period(self) -> int:
        return self.timestamped.retention_period

    @property
    def retain_duplicates(self) -> bool:
        return self.timestamped.retain_duplicates

    def put(self, key: K, value: V | None, window_start_timestamp: int) -> None:
        stored = None if value is None else ValueAndTimestamp(value, UNKNOWN_TIMESTAMP)
        self.timestamped.put(key, stored, window_start_timestamp)

    def fetch(self, *args: Any) -> Any:
        """fetch(key, start) -> value; fetch(key, from, to); fetch(key_from, key_to, from, to)."""
        result = self.timestamped.fetch(*args)
        return _value(result) if len(args) == 2 else _plain(result)

    def backward_fetch(self, *args: Any) -> Any:
        return _plain(self.timestamped.backward_fetch(*args))

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[KeyValue[Windowed[K], V]]:
        return _plain(self.timestamped.fetch_all(time_from, time_to))

    def backward_fetch_all(self, time_from: int, time_to: int) -> Iterator[KeyValue[Windowed[K], V]]:
        return _plain(self.timestamped.backward_fetch_all(time_from, time_to))

    def all(self) -> Iterator[KeyValue[Windowed[K], V]]:
        return _plain(self.timestamped.all())

    def backward_all(self) -> Iterator[KeyValue[Windowed[K], V]]:
        return _plain(self.timestamped.backward_all())


class TimestampedStoreBuilder:
    """Wraps a state store builder whose values are `ValueAndTimestamp`s; builds the plain view.

    Flags, the name and the changelog config are the wrapped builder's, so the runtime treats
    it as any store builder (`logging_enabled`, `log_config()`, `retention_period`...).
    """

    def __init__(self, builder: Any, view: Callable[[Any], _TimestampedView[Any]]) -> None:
        self._builder = builder
        self._view = view

    @property
    def name(self) -> str:
        return self._builder.name  # type: ignore[no-any-return]

    @property
    def logging_enabled(self) -> bool:
        return self._builder.logging_enabled  # type: ignore[no-any-return]

    @property
    def caching_enabled(self) -> bool:
        return self._builder.caching_enabled  # type: ignore[no-any-return]

    def log_config(self) -> dict[str, str]:
        return self._builder.log_config()  # type: ignore[no-any-return]

    def with_caching_enabled(self) -> TimestampedStoreBuilder:
        self._builder.with_caching_enabled()
        return self

    def with_caching_disabled(self) -> TimestampedStoreBuilder:
        self._builder.with_caching_disabled()
        return self

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> TimestampedStoreBuilder:
        self._builder.with_logging_enabled(config)
        return self

    def with_logging_disabled(self) -> TimestampedStoreBuilder:
        self._builder.with_logging_disabled()
        return self

    def build(self) -> _TimestampedView[Any]:
        return self._view(self._builder.build())

    def __getattr__(self, name: str) -> Any:
        if name == "_builder":
            raise AttributeError(name)
        return getattr(self._builder, name)

    def __repr__(self) -> str:
        return f"TimestampedStoreBuilder({self._builder!r})"
