"""How a store copy answers an IQv2 query, run on the host that holds it (a stream thread or a worker process).

A query travels the one store path (`runtime/queries/store_host.py`) as a `StoreRead` of `QUERY_STORE_TYPE`:
the host builds this type's view over its copies of the asked partition and calls
`run(query)`, which picks the store's own way to answer by the query's type and the store's
kind (Kafka's `StoreQueryUtils` and the metered stores' `query()`):

| store kind                 | answers                                                        |
|----------------------------|----------------------------------------------------------------|
| key-value                  | KeyQuery, RangeQuery                                           |
| timestamped key-value      | KeyQuery, RangeQuery (plain values), TimestampedKeyQuery,      |
| (a KTable's)               | TimestampedRangeQuery (ValueAndTimestamp values)               |
| window                     | WindowKeyQuery, WindowRangeQuery.with_window_start_range       |
| session                    | WindowRangeQuery.with_key                                      |
| versioned key-value        | VersionedKeyQuery, MultiVersionedKeyQuery                      |

Any other pair raises `UnknownQueryTypeError`, which the instance turns into an
UNKNOWN_QUERY_TYPE result. A range's answer is an iterator (a worker sends its entries).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from streams_core.errors import InvalidStateStoreError, StreamsError
from streams_core.query.queries import (
    KeyQuery,
    Query,
    RangeQuery,
    ResultOrder,
    TimestampedKeyQuery,
    TimestampedRangeQuery,
)
from streams_core.query.versioned_queries import MultiVersionedKeyQuery, VersionedKeyQuery
from streams_core.query.window_queries import WindowKeyQuery, WindowRangeQuery
from streams_core.state.queryable_store_types import StateStoreProvider

__all__ = ["QUERY_STORE_TYPE", "QueryStoreType", "UnknownQueryTypeError", "run_query"]


class UnknownQueryTypeError(StreamsError):
    """The store does not know how to answer this kind of query (UNKNOWN_QUERY_TYPE)."""


_KINDS: dict[type, str] = {}
"""The kind of each store class seen whose attributes are its class's (no `__getattr__`): found once."""


def _kind(store: Any) -> str:
    """The store's kind, by what it can do; remembered per class unless the class forwards attributes."""
    kind = _KINDS.get(type(store))
    if kind is None:
        kind = _kind_of(store)
        if not hasattr(type(store), "__getattr__"):
            _KINDS[type(store)] = kind
    return kind


def _kind_of(store: Any) -> str:
    """The store's kind, by what it can do (versioned before timestamped: a versioned store has both reads)."""
    if hasattr(store, "get_as_of"):
        return "versioned"
    if hasattr(store, "window_size") and hasattr(store, "fetch_all"):
        return "window"
    if hasattr(store, "find_sessions"):
        return "session"
    if hasattr(store, "get_with_timestamp") and hasattr(store, "timestamped"):
        return "timestamped"
    return "key-value"


def _range(store: Any, query: RangeQuery | TimestampedRangeQuery) -> Iterator[Any]:
    lower, upper = query.lower_bound(), query.upper_bound()
    if query.result_order() is ResultOrder.DESCENDING:
        found: Iterator[Any] = store.reverse_range(lower, upper)
    else:
        found = store.range(lower, upper)
    return found


def _key_value(store: Any, query: Query[Any]) -> Any:
    if isinstance(query, KeyQuery):
        return store.get(query.key())
    if isinstance(query, RangeQuery):
        return _range(store, query)
    raise _unknown(store, query)


def _timestamped(store: Any, query: Query[Any]) -> Any:
    if isinstance(query, TimestampedKeyQuery):
        return store.get_with_timestamp(query.key())
    if isinstance(query, TimestampedRangeQuery):
        return _range(store.timestamped, query)
    return _key_value(store, query)


def _window(store: Any, query: Query[Any]) -> Any:
    if isinstance(query, WindowKeyQuery):
        return store.fetch(query.key(), query.time_from(), query.time_to())
    if isinstance(query, WindowRangeQuery) and query.key() is None:
        return store.fetch_all(query.time_from(), query.time_to())
    raise _unknown(store, query, " (a window store answers WindowRangeQuery.with_window_start_range only)")


def _session(store: Any, query: Query[Any]) -> Any:
    if isinstance(query, WindowRangeQuery) and query.key() is not None:
        return store.fetch(query.key())
    raise _unknown(store, query, " (a session store answers WindowRangeQuery.with_key only)")


def _versioned(store: Any, query: Query[Any]) -> Any:
    if isinstance(query, VersionedKeyQuery):
        as_of = query.as_of_timestamp()
        return store.get(query.key()) if as_of is None else store.get_as_of(query.key(), as_of)
    if isinstance(query, MultiVersionedKeyQuery):
        return _versions(store, query)
    raise _unknown(store, query)


def _versions(store: Any, query: MultiVersionedKeyQuery) -> Iterator[Any]:
    """The versions valid at some time in the query's range, newest first unless ASCENDING."""
    records = store.versions(query.key(), query.get_from_time(), query.get_to_time())
    if query.result_order() is ResultOrder.ASCENDING:
        records.reverse()
    return iter(records)


_BY_KIND: dict[str, Callable[[Any, Query[Any]], Any]] = {
    "key-value": _key_value,
    "timestamped": _timestamped,
    "window": _window,
    "session": _session,
    "versioned": _versioned,
}


def _unknown(store: Any, query: Query[Any], detail: str = "") -> UnknownQueryTypeError:
    return UnknownQueryTypeError(
        f"This store ({type(store).__name__}, {_kind(store)}) doesn't know how to execute the given query ({query!r}){detail}."
    )


def run_query(store: Any, query: Query[Any]) -> Any:
    """`query` answered by one store copy; UnknownQueryTypeError when the store does not know it."""
    return _BY_KIND[_kind(store)](store, query)


class StoreQueryView:
    """The view a host makes over its copies of one partition: `run(query)` asks the copy."""

    __slots__ = ("_name", "_provider", "_type")

    def __init__(self, provider: StateStoreProvider, name: str, store_type: QueryStoreType) -> None:
        self._provider = provider
        self._name = name
        self._type = store_type

    def run(self, query: Query[Any]) -> Any:
        copies = self._provider.stores(self._name, self._type)
        if not copies:
            raise InvalidStateStoreError(f"no queryable copy of store {self._name!r} here now (retry)")
        return run_query(copies[0], query)


@dataclass(frozen=True, slots=True)
class QueryStoreType:
    """The queryable store type of IQv2 reads: accepts every store, its view answers `run(query)`.

    A value (every instance equal), so the worker's cache of views keeps one per store and partition
    however many requests bring it over the channel."""

    def accepts(self, store: Any) -> bool:
        return True

    def create(self, provider: StateStoreProvider, store_name: str) -> StoreQueryView:
        return StoreQueryView(provider, store_name, self)

    def __repr__(self) -> str:
        return "QueryStoreType()"


QUERY_STORE_TYPE = QueryStoreType()
