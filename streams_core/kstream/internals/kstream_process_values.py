"""KStreamFixedKeyProcessor: runs a user's FixedKeyProcessor as a node of the topology (`process_values`).

The node hands the user's processor a `FixedKeyRecord` per record and a context whose `forward`
takes FixedKeyRecords only and passes them on as plain Records (Java's
`KStreamFixedKeyProcessorSupplier` and `FixedKeyProcessorContextImpl`). Everything else of the
context (stores, schedule, commit, record metadata) is the task's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streams_core.errors import TopologyError
from streams_core.processor.fixed_key_processor import FixedKeyRecord
from streams_core.processor.internals.node_factories import processor_factory
from streams_core.processor.processor import ProcessorContext, Record

__all__ = ["FixedKeyContext", "KStreamFixedKeyProcessor", "fixed_key_factory"]

_new = tuple.__new__


class FixedKeyContext:
    """The FixedKeyProcessorContext: the task's context, with a `forward` of FixedKeyRecords."""

    __slots__ = ("_context", "_forward")

    def __init__(self, context: ProcessorContext[Any, Any]) -> None:
        self._context = context
        self._forward = context.forward

    def forward(self, record: FixedKeyRecord[Any, Any], child_name: str | None = None) -> None:
        """Forward a record derived from one this processor received (its key unchanged)."""
        if type(record) is not FixedKeyRecord:
            raise TypeError(
                f"a FixedKeyProcessor forwards FixedKeyRecords (derive them with record.with_value(...)), "
                f"got {type(record).__name__}"
            )
        self._forward(_new(Record, record), child_name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def __repr__(self) -> str:
        return f"FixedKeyContext({self._context!r})"


class KStreamFixedKeyProcessor:
    """Adapts a FixedKeyProcessor to the Processor interface the topology runs."""

    __slots__ = ("_close", "_init", "_process")

    def __init__(self, processor: Any) -> None:
        process = getattr(processor, "process", None)
        if not callable(process):
            raise TopologyError(f"process_values: {processor!r} has no process(record) method")
        self._process: Callable[[FixedKeyRecord[Any, Any]], None] = process
        self._init = getattr(processor, "init", None)
        self._close = getattr(processor, "close", None)

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        if self._init is not None:
            self._init(FixedKeyContext(context))

    def process(self, record: Record[Any, Any]) -> None:
        self._process(_new(FixedKeyRecord, record))

    def close(self) -> None:
        if self._close is not None:
            self._close()


def fixed_key_factory(name: str, supplier: object) -> Callable[[], KStreamFixedKeyProcessor]:
    """A factory of adapters around the processors `supplier` makes (a class, a factory or a supplier)."""
    make = processor_factory(name, supplier, "FixedKeyProcessor")
    return lambda: KStreamFixedKeyProcessor(make())
