"""State stores: key-value, window and session stores, their suppliers and builders.

Public names live here (and at the top of `streams_core`); the implementations are in
`streams_core.state.internals`. See docs/state.md.
"""

from streams_core.common.store import (
    KeyValue,
    KeyValueStore,
    ReadOnlyKeyValueStore,
    RestoreCallback,
    StateStore,
    StateStoreContext,
    StoreBuilder,
)
from streams_core.state.queryable_store_types import QueryableStoreType, QueryableStoreTypes
from streams_core.state.session_store import ReadOnlySessionStore, SessionStore
from streams_core.state.store_supplier import (
    KeyValueBytesStoreSupplier,
    SessionBytesStoreSupplier,
    StoreSupplier,
    WindowBytesStoreSupplier,
)
from streams_core.state.stores import Stores
from streams_core.state.window_store import ReadOnlyWindowStore, WindowStore
from streams_core.state.windowed import SessionWindow, TimeWindow, Window, Windowed

__all__ = [
    "KeyValue",
    "KeyValueBytesStoreSupplier",
    "KeyValueStore",
    "QueryableStoreType",
    "QueryableStoreTypes",
    "ReadOnlyKeyValueStore",
    "ReadOnlySessionStore",
    "ReadOnlyWindowStore",
    "RestoreCallback",
    "SessionBytesStoreSupplier",
    "SessionStore",
    "SessionWindow",
    "StateStore",
    "StateStoreContext",
    "StoreBuilder",
    "StoreSupplier",
    "Stores",
    "TimeWindow",
    "Window",
    "WindowBytesStoreSupplier",
    "WindowStore",
    "Windowed",
]
