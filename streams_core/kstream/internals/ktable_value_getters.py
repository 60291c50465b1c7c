"""Value getters: how a join looks up a KTable's current value (and its timestamp) for a key.

A materialised table is looked up in its store. A filter or map_values that is not
materialised computes its value from its parent's getter, and a table-table join from both
sides' getters, so joins work on any table without storing every intermediate one. Each
supplier names the stores its getters read: the joining processor is connected to them (which
also places it in the same sub-topology as those stores).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from streams_core.kstream.internals.value_and_timestamp import ValueAndTimestamp

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


_Stored = TypeVar("_Stored", bound=_HasValue)  # a ValueAndTimestamp, or a VersionedRecord read as of a time


class ValueGetter(Protocol):
    def init(self, context: Any) -> None: ...

    def get(self, key: Any) -> ValueAndTimestamp[Any] | None: ...


class ValueGetterSupplier(Protocol):
    store_names: tuple[str, ...]

    def get(self) -> ValueGetter: ...


class _StoreGetter:
    __slots__ = ("_name", "_store")

    def __init__(self, name: str) -> None:
        self._name = name

    def init(self, context: Any) -> None:
        self._store = context.get_state_store(self._name).timestamped

    def get(self, key: Any) -> ValueAndTimestamp[Any] | None:
        return self._store.get(key)  # type: ignore[no-any-return]

    @property
    def versioned(self) -> bool:
        """A versioned table's store answers `get_as_of(key, timestamp)` (KIP-914)."""
        return bool(getattr(self._store, "versioned", False))

    def get_as_of(self, key: Any, timestamp: int) -> Any:
        return self._store.get_as_of(key, timestamp)


class StoreValueGetterSupplier:
    """Reads a timestamped key-value store (a source table, an aggregate, a materialised table)."""

    def __init__(self, store_name: str) -> None:
        self.store_names: tuple[str, ...] = (store_name,)

    def get(self) -> ValueGetter:
        return _StoreGetter(self.store_names[0])


class _WindowStoreGetter(_StoreGetter):
    def get(self, key: Any) -> ValueAndTimestamp[Any] | None:
        return self._store.fetch(key.key, key.window.start)  # type: ignore[no-any-return]


class WindowStoreValueGetterSupplier(StoreValueGetterSupplier):
    """Reads a windowed aggregate's store by `Windowed` key."""

    def get(self) -> ValueGetter:
        return _WindowStoreGetter(self.store_names[0])


class _SessionStoreGetter:
    __slots__ = ("_name", "_store")

    def __init__(self, name: str) -> None:
        self._name = name

    def init(self, context: Any) -> None:
        self._store = context.get_state_store(self._name)

    def get(self, key: Any) -> ValueAndTimestamp[Any] | None:
        window = key.window
        value = self._store.fetch_session(key.key, window.start, window.end)
        return None if value is None else ValueAndTimestamp(value, window.end)


class SessionStoreValueGetterSupplier(StoreValueGetterSupplier):
    """Reads a session aggregate's store by `Windowed` key (the timestamp is the session end)."""

    def get(self) -> ValueGetter:
        return _SessionStoreGetter(self.store_names[0])


class _FilterGetter:
    __slots__ = ("_keep", "_parent", "_predicate")

    def __init__(self, parent: ValueGetter, predicate: Callable[[Any, Any], Any], keep: bool) -> None:
        self._parent = parent
        self._predicate = predicate
        self._keep = keep

    def init(self, context: Any) -> None:
        self._parent.init(context)

    def get(self, key: Any) -> ValueAndTimestamp[Any] | None:
        return self._compute(key, self._parent.get(key))

    @property
    def versioned(self) -> bool:
        """As its parent: a filter of a versioned table reads it as of a time (Java's `isVersioned`)."""
        return bool(getattr(self._parent, "versioned", False))

    def get_as_of(self, key: Any, timestamp: int) -> Any:
        return self._compute(key, self._parent.get_as_of(key, timestamp))  # type: ignore[attr-defined]

    def _compute(self, key: Any, stored: _Stored | None) -> _Stored | None:
        if stored is None or bool(self._predicate(key, stored.value)) is not self._keep:
            return None
        return stored


class FilterValueGetterSupplier:
    """A filter's value: the parent's, if the predicate keeps it."""

    def __init__(self, parent: ValueGetterSupplier, predicate: Callable[[Any, Any], Any], negate: bool) -> None:
        self.store_names = parent.store_names
        self._parent = parent
        self._predicate = predicate
        self._keep = not negate

    def get(self) -> ValueGetter:
        return _FilterGetter(self._parent.get(), self._predicate, self._keep)


class _MapValuesGetter:
    __slots__ = ("_mapper", "_parent")

    def __init__(self, parent: ValueGetter, mapper: Callable[[Any, Any], Any]) -> None:
        self._parent = parent
        self._mapper = mapper

    def init(self, context: Any) -> None:
        self._parent.init(context)

    def get(self, key: Any) -> ValueAndTimestamp[Any] | None:
        return self._compute(key, self._parent.get(key))

    @property
    def versioned(self) -> bool:
        """As its parent (Java's `isVersioned`)."""
        return bool(getattr(self._parent, "versioned", False))

    def get_as_of(self, key: Any, timestamp: int) -> ValueAndTimestamp[Any] | None:
        return self._compute(key, self._parent.get_as_of(key, timestamp))  # type: ignore[attr-defined]

    def _compute(self, key: Any, stored: Any) -> ValueAndTimestamp[Any] | None:
        if stored is None:
            return None
        return ValueAndTimestamp(self._mapper(key, stored.value), stored.timestamp)


class MapValuesValueGetterSupplier:
    """A map_values's value: the parent's, mapped (`mapper(key, value)`)."""

    def __init__(self, parent: ValueGetterSupplier, mapper: Callable[[Any, Any], Any]) -> None:
        self.store_names = parent.store_names
        self._parent = parent
        self._mapper = mapper

    def get(self) -> ValueGetter:
        return _MapValuesGetter(self._parent.get(), self._mapper)


class _JoinGetter:
    __slots__ = ("_joiner", "_kind", "_left", "_right")

    def __init__(self, left: ValueGetter, right: ValueGetter, joiner: Callable[[Any, Any], Any], kind: str) -> None:
        self._left = left
        self._right = right
        self._joiner = joiner
        self._kind = kind

    def init(self, context: Any) -> None:
        self._left.init(context)
        self._right.init(context)

    def get(self, key: Any) -> ValueAndTimestamp[Any] | None:
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


class JoinValueGetterSupplier:
    """A table-table join's value from both sides' values (inner, left or outer)."""

    def __init__(
        self, left: ValueGetterSupplier, right: ValueGetterSupplier, joiner: Callable[[Any, Any], Any], kind: str
    ) -> None:
        self.store_names = tuple(dict.fromkeys((*left.store_names, *right.store_names)))
        self._left = left
        self._right = right
        self._joiner = joiner
        self._kind = kind

    def get(self) -> ValueGetter:
        return _JoinGetter(self._left.get(), self._right.get(), self._joiner, self._kind)
