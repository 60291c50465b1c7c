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
from typing import Any, Generic

from streams_core.common.change import Change
from streams_core.processor.processor import ProcessorContext, Record
from streams_core.processor.type_vars import K, V

__all__ = ["ChangeForwarder"]


class ChangeForwarder(Generic[K, V]):
    """Set up in a processor's `init`: `forward` is the context's, or None when the cache forwards."""

    __slots__ = ("_context", "_node", "caching", "forward")

    def __init__(self, context: ProcessorContext[K, Change[V]], store: object) -> None:
        # the runtime's context: a flush makes the processor its current node, which the Processor API hides
        self._context: Any = context
        self._node = getattr(context, "init_node", None)
        set_listener = getattr(store, "set_flush_listener", None)
        self.caching = bool(set_listener(self._on_flush)) if set_listener is not None else False
        self.forward: Callable[[Record[K, Change[V]]], None] | None = None if self.caching else context.forward

    def _on_flush(self, key: K, new_value: V | None, old_value: V | None, timestamp: int) -> None:
        context = self._context
        previous = context.node
        context.node = self._node
        try:
            context.forward(Record(key, Change(new_value, old_value), timestamp))
        finally:
            context.node = previous
