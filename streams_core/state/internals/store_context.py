"""StoreContext: the `StateStoreContext` a task passes to `store.init(context, root)`.

It tells a store where it lives (application id, task id, the task directory) and registers it
with the task's `ProcessorStateManager`. It may also carry the application's default serdes
(`default.key.serde`, `default.value.serde`): metered stores built without serdes take them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from streams_core.common.store import RestoreCallback, StateStore
from streams_core.common.task_id import TaskId
from streams_core.serde import Serde

if TYPE_CHECKING:
    from streams_core.state.internals.processor_state_manager import ProcessorStateManager

__all__ = ["StoreContext"]


class StoreContext:
    """The state manager's view for stores; implements `StateStoreContext`."""

    def __init__(
        self,
        manager: ProcessorStateManager,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
    ) -> None:
        self._manager = manager
        self.key_serde = key_serde
        self.value_serde = value_serde

    @property
    def application_id(self) -> str:
        return self._manager.application_id

    @property
    def task_id(self) -> TaskId:
        return self._manager.task_id

    @property
    def state_dir(self) -> Path:
        """The task directory; persistent stores keep their files here."""
        return self._manager.task_dir

    def register(self, store: StateStore, restore_callback: RestoreCallback | None = None) -> None:
        self._manager.register(store, restore_callback)

    def __repr__(self) -> str:
        return f"StoreContext(task {self.task_id}, {self.state_dir})"
