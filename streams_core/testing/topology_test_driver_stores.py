"""The test driver's store access: every state store by name, typed as Kafka's driver gives them.

As Java's `getKeyValueStore`, `getWindowStore` and the timestamped variants, a getter checks that
the store is of the kind asked for and names the known stores when none has the name, so a test
fails with a message rather than an AttributeError later. A base of `TopologyTestDriver`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streams_core.errors import StreamsError, UnknownStateStoreError

if TYPE_CHECKING:
    from streams_core.processor.internals.task_processor import TaskProcessor
    from streams_core.runtime.tasks.stream_task import StreamTask

__all__ = ["TopologyTestDriverStores"]


class TopologyTestDriverStores:
    """The store getters over the driver's tasks (set by `TopologyTestDriver`)."""

    _tasks: dict[int, StreamTask]
    _global_task: TaskProcessor | None

    def _check_open(self) -> None:
        """Raise StreamsError once the driver is closed (`TopologyTestDriver` defines it)."""
        raise NotImplementedError

    def get_all_state_stores(self) -> dict[str, Any]:
        """Every state store of the topology by name (global stores included)."""
        self._check_open()
        topologies = [task.processor.topology for task in self._tasks.values()]
        if self._global_task is not None:
            topologies.insert(0, self._global_task.topology)
        return {name: store for topology in topologies for name, store in topology.state_stores.items()}

    def get_state_store(self, name: str) -> Any:
        """The state store named `name`; UnknownStateStoreError naming the known ones otherwise."""
        stores = self.get_all_state_stores()
        store = stores.get(name)
        if store is None:
            raise UnknownStateStoreError(f"no state store named {name!r}; the topology has {sorted(stores)}")
        return store

    def get_key_value_store(self, name: str) -> Any:
        """The key-value store named `name` (typed: keys and values as the processors see them)."""
        return self._typed_store(name, "key-value", ("get", "put", "all"))

    def get_window_store(self, name: str) -> Any:
        """The window store named `name` (typed; a DSL windowed aggregate's store gives plain aggregates)."""
        return self._typed_store(name, "window", ("fetch", "fetch_all", "window_size"))

    def get_timestamped_key_value_store(self, name: str) -> Any:
        """The DSL key-value store named `name`, answering `ValueAndTimestamp(value, timestamp)`s (as Java's)."""
        return self._timestamped(self.get_key_value_store(name), name)

    def get_timestamped_window_store(self, name: str) -> Any:
        """The DSL window store named `name`, answering `ValueAndTimestamp(value, timestamp)`s (as Java's)."""
        return self._timestamped(self.get_window_store(name), name)

    @staticmethod
    def _timestamped(store: Any, name: str) -> Any:
        timestamped = getattr(store, "timestamped", None)
        if timestamped is None:
            raise StreamsError(f"state store {name!r} keeps no timestamps (a DSL table or aggregate's store does)")
        return timestamped

    def get_session_store(self, name: str) -> Any:
        """The session store named `name` (typed)."""
        return self._typed_store(name, "session", ("find_sessions", "fetch_session"))

    def _typed_store(self, name: str, kind: str, methods: tuple[str, ...]) -> Any:
        store = self.get_state_store(name)
        if not all(hasattr(store, method) for method in methods):
            raise StreamsError(f"state store {name!r} is not a {kind} store ({type(store).__name__})")
        return store
