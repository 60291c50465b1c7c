"""The fixed-key Processor API (KIP-820): FixedKeyProcessor, FixedKeyRecord, FixedKeyProcessorContext.

What `KStream.process_values` runs: a processor that may change a record's value, timestamp and
headers but never its key, so the stream it makes needs no repartitioning before a grouping or a
join (it replaces `transformValues`, which Kafka Streams 4.0 removed). A `FixedKeyRecord` has no
`with_key`: derive the records to forward from the one received (`record.with_value(...)`).
Kafka Streams makes its constructor private; here the class is a named tuple that user code
should not build itself (a key built anew could differ from the input's, which the stream's
partitioning relies on).
"""

from __future__ import annotations

from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from streams_core.common.headers import Headers
from streams_core.processor.processor import ProcessorContext

__all__ = [
    "ContextualFixedKeyProcessor",
    "FixedKeyProcessor",
    "FixedKeyProcessorContext",
    "FixedKeyProcessorSupplier",
    "FixedKeyRecord",
]

K = TypeVar("K")
V = TypeVar("V")
KIn = TypeVar("KIn")
VIn = TypeVar("VIn")
VOut = TypeVar("VOut")
KF = TypeVar("KF")
VF = TypeVar("VF")


class FixedKeyRecord(NamedTuple, Generic[K, V]):
    """A record whose key cannot change: key, value, timestamp (ms) and headers."""

    key: K
    value: V
    timestamp: int
    headers: Headers = ()

    def with_value(self, value: Any) -> FixedKeyRecord[K, Any]:
        """A copy with another value."""
        return FixedKeyRecord(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> FixedKeyRecord[K, V]:
        """A copy with another timestamp (ms)."""
        return FixedKeyRecord(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers: Headers) -> FixedKeyRecord[K, V]:
        """A copy with other headers."""
        return FixedKeyRecord(self.key, self.value, self.timestamp, tuple(headers))


class FixedKeyProcessorContext(ProcessorContext[KF, VF], Protocol[KF, VF]):
    """A ProcessorContext whose `forward` takes only FixedKeyRecords (derived from received ones)."""

    def forward(self, record: FixedKeyRecord[KF, VF], child_name: str | None = None) -> None:  # type: ignore[override]
        """Send a record to every child, or only to the child named `child_name`."""
        ...


class FixedKeyProcessor(Generic[KIn, VIn, VOut]):
    """Base class of `process_values` processors: override `process`, and `init` or `close` when needed."""

    def init(self, context: FixedKeyProcessorContext[KIn, VOut]) -> None:
        """Called once before the first record; keep the context, fetch stores, schedule."""

    def process(self, record: FixedKeyRecord[KIn, VIn]) -> None:
        """Handle one record."""
        raise NotImplementedError(f"{type(self).__name__} must implement process(record)")

    def close(self) -> None:
        """Called once when the task closes."""


class ContextualFixedKeyProcessor(FixedKeyProcessor[KIn, VIn, VOut]):
    """A FixedKeyProcessor that keeps its context: `self.context()` in `process` (Java's class of that name)."""

    _context: FixedKeyProcessorContext[KIn, VOut] | None = None

    def init(self, context: FixedKeyProcessorContext[KIn, VOut]) -> None:
        self._context = context

    def context(self) -> FixedKeyProcessorContext[KIn, VOut]:
        """The context given to `init`."""
        if self._context is None:
            raise RuntimeError(f"{type(self).__name__}: context() before init() (did an override skip super().init?)")
        return self._context


class FixedKeyProcessorSupplier(Protocol[KIn, VIn, VOut]):
    """Makes a new FixedKeyProcessor per call; may also have `stores()` (a ConnectedStoreProvider)."""

    def get(self) -> FixedKeyProcessor[KIn, VIn, VOut]: ...

