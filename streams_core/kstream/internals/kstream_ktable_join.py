"""KStreamKTableJoin: a stream record joined with a table's current value for its key.

Only stream records trigger output: `joiner(key, value, table value)` at the stream record's
timestamp; table updates just change what later records see. An inner join drops records
whose key has no table value; a left join passes None. For a GlobalKTable the lookup key is
`key_selector(key, value)`. Records with a None value are dropped and counted, as are records
with a None lookup key; a left join keeps a record whose own key is None (KIP-962) and joins it
with None (or with what its selected global key finds), as Java's KStreamKTableJoinProcessor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streams_core.processor.processor import Record

__all__ = ["KStreamKTableJoin"]

log = logging.getLogger(__name__)


class KStreamKTableJoin:
    """Looks the record's key (or `key_selector(key, value)`) up through a table value getter."""

    def __init__(
        self,
        getter_supplier: Any,
        joiner: Callable[[Any, Any, Any], Any],
        left: bool,
        key_selector: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self._getter = getter_supplier.get()
        self._joiner = joiner
        self._left = left
        self._key_selector = key_selector
        self.dropped_records = 0

    def init(self, context: Any) -> None:
        self._getter.init(context)
        self._forward = context.forward
        self._context = context

    def close(self) -> None:
        """Stores are closed by their tasks."""

    def process(self, record: Record[Any, Any]) -> None:
        key, value, timestamp, headers = record
        lookup = key if self._key_selector is None else self._key_selector(key, value)
        if not (self._left and key is None and value is not None) and (lookup is None or value is None):
            self.dropped_records += 1
            log.debug("join: skipping a record with a None join key or value at offset %s", self._context.offset)
            return
        stored = None if lookup is None else self._getter.get(lookup)
        if stored is None:
            if self._left:
                self._forward(Record(key, self._joiner(key, value, None), timestamp, headers))
            return
        self._forward(Record(key, self._joiner(key, value, stored.value), timestamp, headers))
