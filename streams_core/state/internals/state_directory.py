"""StateDirectory: `<state.dir>/<application.id>`, owned by one running instance at a time.

As Kafka Streams' StateDirectory (`lockStateDirectory`): an instance whose topology has
persistent stores locks `<state.dir>/<application.id>/.lock`, so that a second instance of the
same application on the same state.dir fails to start with Kafka's message instead of sharing
the task directories with the first. Without persistent stores nothing is locked (Kafka Streams
then keeps no local state either). Kafka Streams locks it in its constructor
(`initializeProcessId`); here `KafkaStreams.start()` does, as constructing does no I/O, and the
lock goes when the client is NOT_RUNNING or ERROR (or the process ends).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streams_core.config import StreamsConfig
from streams_core.errors import ProcessorStateError, StreamsError
from streams_core.state.internals.task_directory_lock import DirectoryLock

if TYPE_CHECKING:
    from streams_core.processor.internals.internal_topology_builder import InternalTopologyBuilder

__all__ = ["StateDirectory", "has_persistent_stores"]

log = logging.getLogger(__name__)


def has_persistent_stores(store_builders: Iterable[Any]) -> bool:
    """Whether any of the builders makes a persistent store (as Kafka, by building one)."""
    return any(builder.build().persistent for builder in store_builders)


class _StateDirectoryLock(DirectoryLock):
    def locked_error(self, holder: str) -> StreamsError:
        return StreamsError(
            "Unable to initialize state, this can happen if multiple instances of Kafka Streams are running "
            f"in the same state directory (current state directory is [{self.path.parent}], locked by pid "
            f"{holder}); give each instance of the application its own state.dir"
        )


class StateDirectory:
    """The application's state directory and its instance lock."""

    def __init__(self, state_dir: Path | str, application_id: str, *, persistent: bool) -> None:
        self.path = Path(state_dir) / application_id
        self.persistent = persistent
        self._lock = _StateDirectoryLock(self.path)

    @classmethod
    def for_topology(cls, config: StreamsConfig, builder: InternalTopologyBuilder) -> StateDirectory:
        """The directory of `config`'s application, locked only if the topology has persistent stores."""
        names = (*builder.state_store_names, *builder.global_state_store_names)
        persistent = has_persistent_stores(builder.store_builder(name) for name in names)
        return cls(config["state.dir"], config["application.id"], persistent=persistent)

    def lock(self) -> None:
        """Own the directory; StreamsError when another instance (in any process) owns it."""
        if not self.persistent or self._lock.held:
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ProcessorStateError(f"state directory {self.path} doesn't exist and couldn't be created: {exc}") from exc
        self._lock.acquire()
        log.info("locked the state directory %s", self.path)

    def unlock(self) -> None:
        """Give the directory up (nothing when not held)."""
        if self._lock.held:
            self._lock.release()
            log.info("unlocked the state directory %s", self.path)
