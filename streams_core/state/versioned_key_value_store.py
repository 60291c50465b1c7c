"""Versioned key-value stores (KIP-889): every value a key had, by timestamp, for `history_retention`.

    store.put("k", "v1", 10); store.put("k", "v2", 20)
    store.get("k")            # VersionedRecord("v2", 20, None): the latest
    store.get("k", 15)        # VersionedRecord("v1", 10, 20): the value as of 15, valid until 20

A put older than `observed stream time - history retention` (the largest timestamp put) is
not stored (`PUT_RETURN_CODE_NOT_PUT`), and reads as of such a time answer None, as Java's
RocksDB versioned store. `Stores.persistent_versioned_key_value_store(name, history_retention)`
gives the supplier; a table materialised with it (`builder.table(topic, Materialized.as_(...))`)
is a versioned table, which a stream-table join reads as of each stream record's timestamp.

The versions live in an ordinary (changelogged) key-value store under the key's bytes followed
by the 8-byte timestamp, so changelogging and restoration are the key-value store's; a
tombstone version is a one-byte value. Observed stream time is not restored after a restart
(it starts again from the first put), and expired versions are removed when their key is
written, not in segments.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from streams_core.common.store import KeyValue

__all__ = [
    "DELETED",
    "PUT_RETURN_CODE_NOT_PUT",
    "PUT_RETURN_CODE_VALID_TO_UNDEFINED",
    "VersionedKeyValueBytesStoreSupplier",
    "VersionedKeyValueStore",
    "VersionedRecord",
]

PUT_RETURN_CODE_VALID_TO_UNDEFINED = -1
"""`put` stored the key's latest version."""
PUT_RETURN_CODE_NOT_PUT = -(2**63)
"""`put` was older than the history retention: nothing stored."""

_MAX_TIME = 2**63 - 1


class VersionedRecord(NamedTuple):
    """A value and the time range it is valid for: `[timestamp, valid_to)`, `valid_to` None for the latest."""

    value: Any
    timestamp: int
    valid_to: int | None = None


@dataclass(frozen=True, slots=True)
class VersionedKeyValueBytesStoreSupplier:
    """What `Stores.persistent_versioned_key_value_store` returns: a name and the history retention."""

    name: str
    history_retention_ms: int

    @property
    def metrics_scope(self) -> str:
        return "sqlite-versioned-state"

    def get(self) -> Any:
        from streams_core.state.internals.bytes_store_suppliers import SqliteKeyValueBytesStoreSupplier

        return SqliteKeyValueBytesStoreSupplier(self.name).get()


class _Deleted:
    def __repr__(self) -> str:
        return "<deleted>"


DELETED = _Deleted()
"""The value of a tombstone version in the store of versions."""


class VersionedKeyValueStore:
    """The versioned view over a key-value store of (key, timestamp) -> version."""

    versioned = True

    def __init__(self, versions: Any, history_retention_ms: int) -> None:
        self._versions = versions
        self.history_retention_ms = history_retention_ms
        self._observed = -1

    # -- lifecycle: the store below --------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._versions.name  # type: ignore[no-any-return]

    @property
    def persistent(self) -> bool:
        return True

    @property
    def is_open(self) -> bool:
        return self._versions.is_open  # type: ignore[no-any-return]

    def init(self, context: Any, root: Any) -> None:
        self._versions.init(context, root)

    def flush(self) -> None:
        self._versions.flush()

    def close(self) -> None:
        self._versions.close()

    def wrapped(self) -> Any:
        return self._versions

    @property
    def timestamped(self) -> VersionedKeyValueStore:
        """The DSL reads a versioned table through the same object (`get_with_timestamp`, `get_as_of`)."""
        return self

    @property
    def observed_stream_time(self) -> int:
        """The largest timestamp put so far (-1 before any): the history retention counts back from it."""
        return self._observed

    @observed_stream_time.setter
    def observed_stream_time(self, timestamp: int) -> None:
        """Resume with the stream time a runner carried over a restore (the Spark task stage)."""
        self._observed = timestamp

    # -- versions -------------------------------------------------------------------------------

    def _history(self, key: Any) -> list[tuple[int, Any]]:
        """The key's versions, oldest first: (timestamp, value or DELETED)."""
        versions = self._versions.range((key, 0), (key, _MAX_TIME))
        return [(kv.key[1], kv.value) for kv in versions if kv.key[0] == key]

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Store `value` (None: a tombstone) as of `timestamp`; the version's valid-to, or a return code."""
        if timestamp > self._observed:
            self._observed = timestamp
        horizon = self._observed - self.history_retention_ms
        history = self._history(key)
        later = [t for t, _ in history if t > timestamp]
        if timestamp < horizon and (not history or later):
            return PUT_RETURN_CODE_NOT_PUT
        self._versions.put((key, timestamp), DELETED if value is None else value)
        for version_time, _ in history:
            next_times = [t for t, _ in history if t > version_time] + ([timestamp] if timestamp > version_time else [])
            if next_times and min(next_times) <= horizon:  # expired: a later version was valid before the horizon
                self._versions.delete((key, version_time))
        return min(later) if later else PUT_RETURN_CODE_VALID_TO_UNDEFINED

    def put_versioned(self, key: Any, value: Any, timestamp: int) -> bool:
        """The DSL's put: whether the version stored is the key's latest (KIP-914's `isLatest`)."""
        return self.put(key, value, timestamp) == PUT_RETURN_CODE_VALID_TO_UNDEFINED

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """A tombstone as of `timestamp`; the record valid just before it."""
        previous = self.get_as_of(key, timestamp)
        self.put(key, None, timestamp)
        return previous

    def get(self, key: Any, as_of_timestamp: int | None = None) -> VersionedRecord | None:
        """The latest record, or the one valid at `as_of_timestamp`; None if deleted or beyond history."""
        if as_of_timestamp is not None:
            return self.get_as_of(key, as_of_timestamp)
        history = self._history(key)
        if not history or history[-1][1] is DELETED:
            return None
        timestamp, value = history[-1]
        return VersionedRecord(value, timestamp, None)

    def get_as_of(self, key: Any, as_of_timestamp: int) -> VersionedRecord | None:
        if as_of_timestamp < self._observed - self.history_retention_ms:
            return None
        history = self._history(key)
        found: VersionedRecord | None = None
        for index, (timestamp, value) in enumerate(history):
            if timestamp > as_of_timestamp:
                break
            valid_to = history[index + 1][0] if index + 1 < len(history) else None
            found = None if value is DELETED else VersionedRecord(value, timestamp, valid_to)
        return found

    def versions(self, key: Any, from_time: int | None = None, to_time: int | None = None) -> list[VersionedRecord]:
        """The versions of `key` valid at some time in `[from_time, to_time]` (None: open), newest first;
        versions that ended before the history retention are gone (IQv2's MultiVersionedKeyQuery)."""
        history = self._history(key)
        floor = self._observed - self.history_retention_ms
        found: list[VersionedRecord] = []
        for index, (timestamp, value) in enumerate(history):
            valid_to = history[index + 1][0] if index + 1 < len(history) else None
            ended = valid_to is not None and (valid_to <= floor or (from_time is not None and valid_to <= from_time))
            if value is DELETED or ended or (to_time is not None and timestamp > to_time):
                continue
            found.append(VersionedRecord(value, timestamp, valid_to))
        found.reverse()
        return found

    def get_with_timestamp(self, key: Any) -> VersionedRecord | None:
        """The latest record (its `value` and `timestamp` are what the DSL's value getters read)."""
        return self.get(key)

    def all(self) -> Iterator[KeyValue[Any, Any]]:
        """Every key's latest value, in key order (for queries)."""
        latest: dict[Any, Any] = {}
        for kv in self._versions.all():
            latest[kv.key[0]] = kv.value
        return iter([KeyValue(k, v) for k, v in latest.items() if v is not DELETED])

    def __repr__(self) -> str:
        return f"VersionedKeyValueStore({self.name!r}, history={self.history_retention_ms} ms)"
