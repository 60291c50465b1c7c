"""SendOldValues: Kafka Streams' `enableSendingOldValues` chain between KTables.

A Java table processor forwards old values only when an operator downstream asked for them
(a `group_by`, a table join, a foreign-key join) or when its upstream is materialised; what
matters to users is `filter`: a record it rejects is forwarded as a tombstone `(key, None)`
unless old values are being sent, and then only when the key was visible before. We always
compute old values, so only that choice depends on this chain. One `SendOldValues` per KTable,
linked to its upstream tables; `enable(force)` answers as Java's does.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["SendOldValues"]


class SendOldValues:
    """`kind`: "source" (a table from a topic), "stored" (always materialised: aggregations),
    "processor" (filter, map_values, suppress: materialised when given a store) or "join"."""

    __slots__ = ("_on_materialize", "_upstream", "enabled", "kind", "materialized")

    def __init__(self, kind: str, materialized: bool, upstream: tuple[SendOldValues, ...] = ()) -> None:
        self.kind = kind
        self.materialized = materialized or kind == "stored"
        self._upstream = upstream
        self.enabled = False
        self._on_materialize: Callable[[], None] | None = None

    def when_materialized(self, callback: Callable[[], None]) -> None:
        """Call `callback` once this source table is materialised (now, if it already is)."""
        if self.materialized:
            callback()
        else:
            self._on_materialize = callback

    def _materialized_now(self) -> None:
        self.materialized = True
        callback, self._on_materialize = self._on_materialize, None
        if callback is not None:
            callback()

    def enable(self, force: bool) -> bool:
        """Ask this table to send old values (`force`: materialise a source table to do it)."""
        if self.enabled:
            return True
        if self.kind == "join":
            for upstream in self._upstream:
                upstream.enable(True)
        elif self.kind == "source":
            if not force and not self.materialized:
                return False
            self._materialized_now()
        elif self.kind == "processor" and not self.materialized:
            if not all(upstream.enable(force) for upstream in self._upstream):
                return False
        self.enabled = True
        return True

    def materialize(self) -> None:
        """A table read through a value getter (a join) materialises its source (Java's `materialize()`)."""
        if self.kind == "source":
            self._materialized_now()
        elif not self.materialized:
            for upstream in self._upstream:
                upstream.materialize()
