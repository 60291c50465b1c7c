"""Change logging: every write to a bytes store is also sent to its changelog topic.

The changelog is `<application.id>-<store>-changelog`, partition = the task's partition, so a
store instance can be rebuilt by replaying its partition (KIP-28 "Log-backed State Storage").
Records go to the task's RecordCollector (the producer; the test driver's topics) with the
timestamp of the record being processed. Window and session keys use Java's changelog layouts.
A timestamped store (value-and-timestamp bytes: the DSL's tables and windowed aggregates) logs
the plain value with its own timestamp as the record's, as Java's `ChangeLoggingTimestamped*`
stores, so its changelog is the one a Java instance writes and restores (a restore puts the
record's timestamp back in front: `ChangelogPartition.apply`). A collector that keeps the stores'
own bytes instead of a Kafka changelog (`keeps_store_bytes`: the Spark task stage, which restores
them through the store's restore callback) gets them as they are.
Reads pass straight through; restore bypasses this layer (the inner store registers itself).
A store initialised outside a task (a context without a record collector) logs nothing.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from streams_core.common.headers import Headers
from streams_core.common.store import KeyValue, KeyValueStore, StateStore, StateStoreContext
from streams_core.state.internals import session_key_schema, window_key_schema
from streams_core.state.internals.store_names import store_changelog_topic
from streams_core.state.internals.wrapped_state_store import WrappedStateStore
from streams_core.state.windowed import Windowed

__all__ = [
    "ChangeLoggingKeyValueBytesStore",
    "ChangeLoggingSessionBytesStore",
    "ChangeLoggingWindowBytesStore",
]

_NO_HEADERS: Headers = ()
_TIMESTAMP = struct.Struct(">q")


class _ChangeLogger(WrappedStateStore[Any]):
    """Shared part: where the changelog records go and with which timestamp."""

    def __init__(self, wrapped: Any, *, timestamped: bool = False) -> None:
        super().__init__(wrapped)
        self.timestamped = timestamped

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._wrapped.init(context, root)
        self._context: Any = context
        self._collector: Any = getattr(context, "record_collector", None)
        self._topic = store_changelog_topic(context.application_id, self.name)
        self._partition: int = context.task_id.partition
        # Chosen at every init, both ways: a store re-initialised under another collector logs its way.
        timestamped = self.timestamped and not getattr(self._collector, "keeps_store_bytes", False)
        self._log: Callable[[bytes, bytes | None], None] = self._log_timestamped if timestamped else self._log_as_is

    @property
    def changelog_topic(self) -> str:
        return self._topic

    def _log_as_is(self, key: bytes, value: bytes | None) -> None:
        """Log the store's bytes as they are, with the processed record's timestamp."""
        if self._collector is None:
            return
        timestamp = self._context.timestamp
        self._collector.send(
            self._topic, key, value, 0 if timestamp is None else timestamp, _NO_HEADERS, self._partition
        )

    def _log_timestamped(self, key: bytes, value: bytes | None) -> None:
        """`_log` of value-and-timestamp bytes: the plain value, the timestamp as the record's (its
        copy, `value[8:]`, measured and kept: bench/LOG.md, "The timestamped changelog's value slice")."""
        if self._collector is None:
            return
        if value is None:
            timestamp = self._context.timestamp
            timestamp = 0 if timestamp is None else timestamp
        else:
            timestamp = _TIMESTAMP.unpack_from(value)[0]
            value = value[8:]
        self._collector.send(self._topic, key, value, timestamp, _NO_HEADERS, self._partition)


class ChangeLoggingKeyValueBytesStore(_ChangeLogger):
    """A key-value bytes store whose writes are logged; deletes are logged as tombstones."""

    def __init__(self, wrapped: KeyValueStore[bytes, bytes], *, timestamped: bool = False) -> None:
        super().__init__(wrapped, timestamped=timestamped)

    def get(self, key: bytes) -> bytes | None:
        return self._wrapped.get(key)  # type: ignore[no-any-return]

    def put(self, key: bytes, value: bytes | None) -> None:
        self._wrapped.put(key, value)
        self._log(key, value)

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        existing = self._wrapped.put_if_absent(key, value)
        if existing is None:
            self._log(key, value)
        return existing  # type: ignore[no-any-return]

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        entries = list(entries)
        self._wrapped.put_all(entries)
        for key, value in entries:
            self._log(key, value)

    def delete(self, key: bytes) -> bytes | None:
        old = self._wrapped.delete(key)
        self._log(key, None)
        return old  # type: ignore[no-any-return]

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[KeyValue[bytes, bytes]]:
        return self._wrapped.range(from_key, to_key)  # type: ignore[no-any-return]

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[KeyValue[bytes, bytes]]:
        return self._wrapped.reverse_range(from_key, to_key)  # type: ignore[no-any-return]

    def prefix_scan(self, prefix: bytes, prefix_serde: Any = None) -> Iterator[KeyValue[bytes, bytes]]:
        return self._wrapped.prefix_scan(prefix, prefix_serde)  # type: ignore[no-any-return]

    def all(self) -> Iterator[KeyValue[bytes, bytes]]:
        return self._wrapped.all()  # type: ignore[no-any-return]

    def reverse_all(self) -> Iterator[KeyValue[bytes, bytes]]:
        return self._wrapped.reverse_all()  # type: ignore[no-any-return]

    def approximate_num_entries(self) -> int:
        return self._wrapped.approximate_num_entries()  # type: ignore[no-any-return]


class ChangeLoggingWindowBytesStore(_ChangeLogger):
    """A window bytes store whose puts are logged under `window_key_schema` keys."""

    def __init__(self, wrapped: Any, *, timestamped: bool = False) -> None:
        super().__init__(wrapped, timestamped=timestamped)
        self._seqnum = 0

    def put(self, key: bytes, value: bytes | None, window_start_timestamp: int) -> None:
        self._wrapped.put(key, value, window_start_timestamp)
        seqnum = 0
        if self._wrapped.retain_duplicates:
            self._seqnum = self._seqnum + 1 if self._seqnum < 0x7FFFFFFF else 1
            seqnum = self._seqnum
        self._log(window_key_schema.to_store_key_binary(key, window_start_timestamp, seqnum), value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)


class ChangeLoggingSessionBytesStore(_ChangeLogger):
    """A session bytes store whose puts and removes are logged under `session_key_schema` keys."""

    def put(self, session_key: Windowed[bytes], value: bytes | None) -> None:
        self._wrapped.put(session_key, value)
        window = session_key.window
        self._log(session_key_schema.to_binary(session_key.key, window.start, window.end), value)

    def remove(self, session_key: Windowed[bytes]) -> None:
        self.put(session_key, None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)
