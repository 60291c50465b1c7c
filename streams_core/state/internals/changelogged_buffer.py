"""ChangeloggedBuffer: what the DSL's time-ordered buffers share: memory, a changelog and its restore.

An operator that holds records between records (suppression, a stream-table join's grace
period) keeps them in memory, in a store of Kafka Streams' name registered with its task, so
that they survive a crash or a move to another instance (every buffer is a store: docs/state.md).
As Java's `InMemoryTimeOrderedKeyValueChangeBuffer`, a write only marks its changelog key dirty;
`flush` (every commit, before the producer is flushed and the offsets committed) sends the
current value of each dirty key, or a tombstone for one that left the buffer, so a key updated
many times between commits is logged once and a record that came and went between two commits
is not logged at all. The store is not persistent: a task restores it from the beginning of its
changelog (the runtime never checkpoints in-memory stores). A store initialised outside a task
(a context without a record collector) logs nothing.

`restored_stream_time` is the largest record timestamp met while restoring: with the processor
metadata the operator commits (`resume_stream_time`), where its observed stream time resumes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streams_core.common.headers import Headers
from streams_core.common.store import StateStore, StateStoreContext
from streams_core.errors import InvalidStateStoreError
from streams_core.state.internals.abstract_store_builder import AbstractStoreBuilder
from streams_core.state.internals.not_open import refuse_reinit
from streams_core.state.internals.store_names import store_changelog_topic

__all__ = ["NO_TIMESTAMP", "BufferStoreBuilder", "ChangeloggedBuffer", "resume_stream_time"]

log = logging.getLogger(__name__)

NO_TIMESTAMP = -1


def _ignore(key: bytes) -> None:
    """What `_mark` is when the store logs nothing."""


def resume_stream_time(context: Any, buffer: ChangeloggedBuffer) -> int:
    """The observed stream time an operator resumes with: the larger of what its last commit
    recorded in the processor metadata (under the buffer's name) and what the restored changelog
    shows; both are at most the time it had observed when it stopped."""
    committed = getattr(context, "processor_metadata_for_key", lambda key: None)(buffer.name)
    return max(NO_TIMESTAMP if committed is None else committed, buffer.restored_stream_time)


class ChangeloggedBuffer:
    """The store side of a buffer: registration, dirty changelog keys, flush and restore hooks.

    Subclasses hold the records and implement `_changelog_value(key)` (the bytes and timestamp
    to log for a dirty key, None if it left the buffer), `_restore(key, value)` and `_clear()`.
    """

    changelog_headers: Headers = ()

    def __init__(self, name: str, logging_enabled: bool) -> None:
        self._name = name
        self._logging = logging_enabled
        self._open = False
        self._collector: Any = None
        self._dirty: set[bytes] = set()
        self._mark: Callable[[bytes], None] = _ignore
        """Marks a changelog key dirty (logged at the next flush); ignores it when nothing is logged."""
        self._logged: set[bytes] = set()
        """Keys whose last changelog record is a value: only they need a tombstone when they leave."""
        self.restored_stream_time = NO_TIMESTAMP
        self.observed_stream_time = NO_TIMESTAMP
        """The operator's observed stream time, kept here for the timestamp of tombstones."""

    @property
    def name(self) -> str:
        return self._name

    @property
    def persistent(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        return self._open

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        """Open and register with the task, restoring through `restore_batch`."""
        refuse_reinit(self)
        self._open = True
        self._init(context)
        if self._logging:
            self._collector = getattr(context, "record_collector", None)
            self._topic = store_changelog_topic(context.application_id, self._name)
            self._partition: int = context.task_id.partition
        self._mark = self._dirty.add if self._collector is not None else _ignore
        context.register(root, self.restore_batch)

    def _init(self, context: StateStoreContext) -> None:
        """Resolve what the subclass needs from the context (its serdes) before any restore."""

    def flush(self) -> None:
        """Log the current state of every key changed since the last flush."""
        if not self._dirty:
            return
        send, topic, partition, logged = self._collector.send, self._topic, self._partition, self._logged
        for key in self._dirty:
            found = self._changelog_value(key)
            if found is not None:
                value, timestamp = found
                send(topic, key, value, timestamp, self.changelog_headers, partition)
                logged.add(key)
            elif key in logged:
                logged.discard(key)
                send(topic, key, None, max(self.observed_stream_time, 0), (), partition)
        self._dirty.clear()

    def restore_batch(self, records: Any) -> None:
        """Apply changelog records (key bytes, value bytes or None) in order."""
        if not self._open:
            raise InvalidStateStoreError(f"store {self._name!r} is not open")
        logged = self._logged
        for key, value in records:
            if value is None:
                logged.discard(key)
            else:
                logged.add(key)
            self._restore(key, value)

    def close(self) -> None:
        """Drop the records (they live on in the changelog); unflushed changes are lost, as in Java."""
        if self._dirty:
            log.debug("store %s: closing with %d changelog keys not flushed", self._name, len(self._dirty))
        self._open = False
        self._dirty.clear()
        self._logged.clear()
        self._clear()

    def _changelog_value(self, key: bytes) -> tuple[bytes, int] | None:
        raise NotImplementedError

    def _restore(self, key: bytes, value: bytes | None) -> None:
        raise NotImplementedError

    def _clear(self) -> None:
        raise NotImplementedError


class BufferStoreBuilder(AbstractStoreBuilder[Any]):
    """A buffer's builder: its name, serdes (None: the application's defaults) and logging flag;
    caching does not apply (Java's buffer builders ignore it too)."""

    def with_caching_enabled(self) -> BufferStoreBuilder:
        return self
