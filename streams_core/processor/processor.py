"""The Processor API: Processor, Record, ProcessorContext, punctuation types and callbacks.

A processor receives one `Record` at a time in `process` and may forward records to its children
through its `ProcessorContext`, read and write the state stores connected to it, and schedule
punctuations (periodic callbacks in stream time or wall-clock time). Processing is synchronous
and depth-first: `forward` returns after every downstream node has handled the record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar, runtime_checkable

from streams_core.common.headers import Headers
from streams_core.common.record_metadata import RecordMetadata

if TYPE_CHECKING:
    from streams_core.common.task_id import TaskId
    from streams_core.serde import Serde

__all__ = [
    "Cancellable",
    "Processor",
    "ProcessorContext",
    "ProcessorSupplier",
    "PunctuationType",
    "Punctuator",
    "Record",
]

K = TypeVar("K")
V = TypeVar("V")
KIn = TypeVar("KIn")
VIn = TypeVar("VIn")
KOut = TypeVar("KOut")
VOut = TypeVar("VOut")
KF = TypeVar("KF")
VF = TypeVar("VF")


class Record(NamedTuple, Generic[K, V]):
    """A record as processors see it: key, value, timestamp (ms) and headers.

    Immutable, like Kafka Streams' `Record`: the same object may reach several children, so
    derive changed copies with `with_key`, `with_value`, `with_timestamp` or `with_headers`.
    (A named tuple is immutable yet about 2.5 times cheaper to build than a frozen dataclass,
    and one is built for every record and every transformation.)
    """

    key: K
    value: V
    timestamp: int
    headers: Headers = ()

    def with_key(self, key: Any) -> Record[Any, V]:
        """A copy with another key."""
        return Record(key, self.value, self.timestamp, self.headers)

    def with_value(self, value: Any) -> Record[K, Any]:
        """A copy with another value."""
        return Record(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> Record[K, V]:
        """A copy with another timestamp (ms)."""
        return Record(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers: Headers) -> Record[K, V]:
        """A copy with other headers."""
        return Record(self.key, self.value, self.timestamp, tuple(headers))


class PunctuationType(Enum):
    """The clock a punctuation follows.

    STREAM_TIME advances only with the timestamps of processed records (so replaying old data
    punctuates as it did live); WALL_CLOCK_TIME follows the system clock (the test driver's
    mock clock under `TopologyTestDriver`).
    """

    STREAM_TIME = "STREAM_TIME"
    WALL_CLOCK_TIME = "WALL_CLOCK_TIME"


@runtime_checkable
class Cancellable(Protocol):
    """What `ProcessorContext.schedule` returns: `cancel()` stops the punctuation for good."""

    def cancel(self) -> None: ...


Punctuator = Callable[[int], None]
"""A punctuation callback; receives the current stream time or wall-clock time in ms."""


class ProcessorContext(Protocol[KF, VF]):
    """What a processor can do and see besides the record itself.

    Record metadata (`topic`, `partition`, `offset`, `record_metadata`) describes the input
    record being processed and is None where there is none: in `init`, `close` and punctuations.
    `timestamp` is the current record's timestamp, or the punctuation time in a punctuation.
    `forward` may be called only from `process` or a punctuation; `schedule` and
    `get_state_store` from `init`, `process` or a punctuation. Other calls raise `StreamsError`.
    """

    @property
    def application_id(self) -> str: ...

    @property
    def task_id(self) -> TaskId: ...

    @property
    def config(self) -> Mapping[str, Any]:
        """The application's StreamsConfig."""
        ...

    @property
    def state_dir(self) -> Path:
        """The task's state directory (<state.dir>/<application.id>/<task id>)."""
        ...

    @property
    def key_serde(self) -> Serde[Any]:
        """The default key serde (`default.key.serde`)."""
        ...

    @property
    def value_serde(self) -> Serde[Any]:
        """The default value serde (`default.value.serde`)."""
        ...

    @property
    def topic(self) -> str | None: ...

    @property
    def partition(self) -> int | None: ...

    @property
    def offset(self) -> int | None: ...

    @property
    def timestamp(self) -> int | None: ...

    @property
    def headers(self) -> Headers: ...

    @property
    def record_metadata(self) -> RecordMetadata | None: ...

    def current_stream_time_ms(self) -> int:
        """The task's stream time (-1 before the first record)."""
        ...

    def current_system_time_ms(self) -> int:
        """The wall-clock time the task uses (the mock clock under the test driver)."""
        ...

    def forward(self, record: Record[KF, VF], child_name: str | None = None) -> None:
        """Send a record to every child, or only to the child named `child_name`."""
        ...

    def schedule(self, interval_ms: int, punctuation_type: PunctuationType, callback: Punctuator) -> Cancellable:
        """Call `callback(time)` every `interval_ms` of stream or wall-clock time until cancelled."""
        ...

    def commit(self) -> None:
        """Ask for a commit; it happens at the next safe point after the current record."""
        ...

    def get_state_store(self, name: str) -> Any:
        """A state store connected to this processor (`Topology.add_state_store`)."""
        ...


class Processor(Generic[KIn, VIn, KOut, VOut]):
    """Base class of user processors: override `process`, and `init` or `close` when needed.

    Each task builds its own instance (see `ProcessorSupplier`), so instance state is per task.
    """

    def init(self, context: ProcessorContext[KOut, VOut]) -> None:
        """Called once before the first record; keep the context, fetch stores, schedule."""

    def process(self, record: Record[KIn, VIn]) -> None:
        """Handle one record."""
        raise NotImplementedError(f"{type(self).__name__} must implement process(record)")

    def close(self) -> None:
        """Called once when the task closes; stores are closed by the task, not here."""


class ProcessorSupplier(Protocol[KIn, VIn, KOut, VOut]):
    """Makes a new Processor per call; `Topology.add_processor` also takes a class or factory."""

    def get(self) -> Processor[KIn, VIn, KOut, VOut]: ...
