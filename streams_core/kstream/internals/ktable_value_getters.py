"""Value getters: how a join looks up a KTable's current value (and its timestamp) for a key.

A materialised table is looked up in its store. A filter or map_values that is not
materialised computes its value from its parent's getter, and a table-table join from both
sides' getters, so joins work on any table without storing every intermediate one. Each
supplier names the stores its getters read: the joining processor is connected to them (which
also places it in the same sub-topology as those stores).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from streams_core.common.store import KeyValueStore
from streams_core.common.task_id import TaskId
from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp
from streams_core.processor.type_vars import VO, VR, K, V
from streams_core.state.session_store import SessionStore
from streams_core.state.window_store import WindowStore
from streams_core.state.windowed import Windowed

__all__ = [
    "FilterValueGetterSupplier",
    "JoinValueGetterSupplier",
    "MapValuesValueGetterSupplier",
    "SessionStoreValueGetterSupplier",
    "StoreValueGetterSupplier",
    "ValueGetter",
    "ValueGetterSupplier",
    "WindowStoreValueGetterSupplier",
]


class _HasValue(Protocol):
    @property
    def value(self) -> Any: ...

    @property
    def timestamp(self) -> int: ...


_Stored = TypeVar("_Stored", bound=_HasValue)  # a ValueAndTimestamp, or a VersionedRecord read as of a time


class StoreSource(Protocol):
    """What a getter needs of the joining processor's context: its task and connected stores."""

    @property
    def task_id(self) -> TaskId: ...

    def get_state_store(self, name: str) -> Any: ...


_K_contra = TypeVar("_K_contra", contravariant=True)


class ValueGetter(Protocol[_K_contra, V]):
    def init(self, context: StoreSource) -> None: ...

    def get(self, key: _K_contra) -> ValueAndTimestamp[V] | None: ...


class ValueGetterSupplier(Protocol[_K_contra, V]):
    @property
    def store_names(self) -> tuple[str, ...]: ...

    def get(self) -> ValueGetter[_K_contra, V]: ...


S = TypeVar("S")


class _StoreLookup(Generic[S]):
    """A getter reading the timestamped store S under a view registered as `name`."""

    __slots__ = ("_name", "_store")

    def __init__(self, name: str) -> None:
        self._name = name

    def init(self, context: StoreSource) -> None:
        self._store: S = context.get_state_store(self._name).timestamped


class _StoreGetter(_StoreLookup[KeyValueStore[K, ValueAndTimestamp[V]]], Generic[K, V]):
    __slots__ = ()

    def get(self, key: K) -> ValueAndTimestamp[V] | None:
        return self._store.get(key)

    @property
    def versioned(self) -> bool:
        """A versioned table's store answers `get_as_of(key, timestamp)` (KIP-914)."""
        return bool(getattr(self._store, "versioned", False))

    def get_as_of(self, key: K, timestamp: int) -> Any:
        return self._store.get_as_of(key, timestamp)  # type: ignore[attr-defined]  # `versioned`: a versioned store


class StoreValueGetterSupplier:
    """Reads a timestamped key-value store (a source table, an aggregate, a materialised table)."""

    def __init__(self, store_name: str) -> None:
        self.store_names: tuple[str, ...] = (store_name,)

    def get(self) -> ValueGetter[Any, Any]:
        return _StoreGetter(self.store_names[0])


class _WindowStoreGetter(_StoreLookup[WindowStore[K, ValueAndTimestamp[V]]], Generic[K, V]):
    __slots__ = ()

    def get(self, key: Windowed[K]) -> ValueAndTimestamp[V] | None:
        return self._store.fetch(key.key, key.window.start)


class WindowStoreValueGetterSupplier(StoreValueGetterSupplier):
    """Reads a windowed aggregate's store by `Windowed` key."""

    def get(self) -> ValueGetter[Any, Any]:
        return _WindowStoreGetter(self.store_names[0])


class _SessionStoreGetter(Generic[K, V]):
    __slots__ = ("_name", "_store")

    def __init__(self, name: str) -> None:
        self._name = name

    def init(self, context: StoreSource) -> None:
        self._store: SessionStore[K, V] = context.get_state_store(self._name)

    def get(self, key: Windowed[K]) -> ValueAndTimestamp[V] | None:
        window = key.window
        value = self._store.fetch_session(key.key, window.start, window.end)
        return None if value is None else ValueAndTimestamp(value, window.end)


class SessionStoreValueGetterSupplier(StoreValueGetterSupplier):
    """Reads a session aggregate's store by `Windowed` key (the timestamp is the session end)."""

    def get(self) -> ValueGetter[Any, Any]:
        return _SessionStoreGetter(self.store_names[0])


class _FilterGetter(Generic[K, V]):
    __slots__ = ("_keep", "_parent", "_predicate")

    def __init__(self, parent: ValueGetter[K, V], predicate: Callable[[K, V], object], keep: bool) -> None:
        self._parent = parent
        self._predicate = predicate
        self._keep = keep

    def init(self, context: StoreSource) -> None:
        self._parent.init(context)

    def get(self, key: K) -> ValueAndTimestamp[V] | None:
        return self._compute(key, self._parent.get(key))

    @property
    def versioned(self) -> bool:
        """As its parent: a filter of a versioned table reads it as of a time (Java's `isVersioned`)."""
        return bool(getattr(self._parent, "versioned", False))

    def get_as_of(self, key: K, timestamp: int) -> Any:
        return self._compute(key, self._parent.get_as_of(key, timestamp))  # type: ignore[attr-defined]

    def _compute(self, key: K, stored: _Stored | None) -> _Stored | None:
        if stored is None or bool(self._predicate(key, stored.value)) is not self._keep:
            return None
        return stored


class FilterValueGetterSupplier(Generic[K, V]):
    """A filter's value: the parent's, if the predicate keeps it."""

    def __init__(self, parent: ValueGetterSupplier[K, V], predicate: Callable[[K, V], object], negate: bool) -> None:
        self.store_names = parent.store_names
        self._parent = parent
        self._predicate = predicate
        self._keep = not negate

    def get(self) -> ValueGetter[K, V]:
        return _FilterGetter(self._parent.get(), self._predicate, self._keep)


class _MapValuesGetter(Generic[K, V, VR]):
    __slots__ = ("_mapper", "_parent")

    def __init__(self, parent: ValueGetter[K, V], mapper: Callable[[K, V], VR]) -> None:
        self._parent = parent
        self._mapper = mapper

    def init(self, context: StoreSource) -> None:
        self._parent.init(context)

    def get(self, key: K) -> ValueAndTimestamp[VR] | None:
        return self._compute(key, self._parent.get(key))

    @property
    def versioned(self) -> bool:
        """As its parent (Java's `isVersioned`)."""
        return bool(getattr(self._parent, "versioned", False))

    def get_as_of(self, key: K, timestamp: int) -> ValueAndTimestamp[VR] | None:
        return self._compute(key, self._parent.get_as_of(key, timestamp))  # type: ignore[attr-defined]

    def _compute(self, key: K, stored: _HasValue | None) -> ValueAndTimestamp[VR] | None:
        if stored is None:
            return None
        return ValueAndTimestamp(self._mapper(key, stored.value), stored.timestamp)


class MapValuesValueGetterSupplier(Generic[K, V, VR]):
    """A map_values's value: the parent's, mapped (`mapper(key, value)`)."""

    def __init__(self, parent: ValueGetterSupplier[K, V], mapper: Callable[[K, V], VR]) -> None:
        self.store_names = parent.store_names
        self._parent = parent
        self._mapper = mapper

    def get(self) -> ValueGetter[K, VR]:
        return _MapValuesGetter(self._parent.get(), self._mapper)


class _JoinGetter(Generic[K, V, VO, VR]):
    __slots__ = ("_joiner", "_kind", "_left", "_right")

    def __init__(
        self, left: ValueGetter[K, V], right: ValueGetter[K, VO], joiner: Callable[[V | None, VO | None], VR], kind: str
    ) -> None:
        self._left = left
        self._right = right
        self._joiner = joiner
        self._kind = kind

    def init(self, context: StoreSource) -> None:
        self._left.init(context)
        self._right.init(context)

    def get(self, key: K) -> ValueAndTimestamp[VR] | None:
        left = self._left.get(key)
        right = self._right.get(key)
        kind = self._kind
        if left is None and (kind != "outer" or right is None):
            return None
        if right is None and kind == "inner":
            return None
        timestamp = max(-1 if left is None else left.timestamp, -1 if right is None else right.timestamp)
        value = self._joiner(None if left is None else left.value, None if right is None else right.value)
        return ValueAndTimestamp(value, timestamp)


class JoinValueGetterSupplier(Generic[K, V, VO, VR]):
    """A table-table join's value from both sides' values (inner, left or outer)."""

    def __init__(
        self,
        left: ValueGetterSupplier[K, V],
        right: ValueGetterSupplier[K, VO],
        joiner: Callable[[V | None, VO | None], VR],
        kind: str,
    ) -> None:
        self.store_names = tuple(dict.fromkeys((*left.store_names, *right.store_names)))
        self._left = left
        self._right = right
        self._joiner = joiner
        self._kind = kind

    def get(self) -> ValueGetter[K, VR]:
        return _JoinGetter(self._left.get(), self._right.get(), self._joiner, self._kind)
