"""ChangeForwarder: how table-producing processors forward their updates, cached or not.

Kafka Streams enables caching for DSL stores: updates then reach downstream when the cache
flushes (on commit or eviction), de-duplicated per key. A store whose caching layer is on
accepts a flush listener (`store.set_flush_listener(callback) -> True`) and calls
`callback(key, new_value, old_value, timestamp)` on flush; the forwarder then forwards
`Change(new, old)` from the listener, with the processor made the context's current node (a
flush runs during a commit, outside any processor). Without caching every update is forwarded
at once, which is always correct.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streams_core.kstream.internals.change import Change
from streams_core.processor.processor import Record

__all__ = ["ChangeForwarder"]


class ChangeForwarder:
    """Set up in a processor's `init`: `forward` is the context's, or None when the cache forwards."""

    __slots__ = ("_context", "_node", "caching", "forward")

    def __init__(self, context: Any, store: Any) -> None:
        self._context = context
        self._node = getattr(context, "init_node", None)
        set_listener = getattr(store, "set_flush_listener", None)
        self.caching = bool(set_listener(self._on_flush)) if set_listener is not None else False
        self.forward: Callable[[Record[Any, Any]], None] | None = None if self.caching else context.forward

    def _on_flush(self, key: Any, new_value: Any, old_value: Any, timestamp: int) -> None:
        context = self._context
        previous = context.node
        context.node = self._node
        try:
            context.forward(Record(key, Change(new_value, old_value), timestamp))
        finally:
            context.node = previous
