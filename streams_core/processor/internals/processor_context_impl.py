"""ProcessorContextImpl: the one context of a task, shared by its processors and its stores.

It is the `ProcessorContext` processors see and the `StateStoreContext` stores are initialised
with (as in Kafka Streams). The task sets the current node and the record metadata around every
call into user code; `forward` walks the children depth-first, making each the current node.
It also holds the task's `ProcessorMetadata`, which the runtime commits with the offsets.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from streams_core.common.headers import Headers
from streams_core.common.record_metadata import RecordMetadata
from streams_core.common.store import RestoreCallback, StateStore
from streams_core.common.task_id import TaskId
from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError, TopologyError
from streams_core.processor.internals.processor_metadata import ProcessorMetadata
from streams_core.processor.internals.processor_node import ProcessorNode
from streams_core.processor.internals.record_collector import RecordCollector
from streams_core.processor.processor import Cancellable, PunctuationType, Punctuator, Record
from streams_core.serde import Serde

if TYPE_CHECKING:
    from streams_core.processor.internals.task_processor import StateManager, TaskProcessor

__all__ = ["ProcessorContextImpl", "RecordPosition"]


class RecordPosition(NamedTuple):
    """The `RecordMetadata` of the record being processed, as the context hands it out."""

    topic: str
    partition: int
    offset: int


class ProcessorContextImpl:
    """Implements ProcessorContext and StateStoreContext for one task.

    `node` is the node running user code in a record's walk or a punctuation (None otherwise);
    `init_node` the processor being initialised or closed. `record` is the record the current
    node is handling; `topic`/`partition`/`offset` describe the input record (None in
    punctuations); `punctuation_time` is set during a punctuation.
    """

    __slots__ = (
        "_config",
        "_state_manager",
        "_task",
        "cache",
        "init_node",
        "input_offset",
        "input_partition",
        "input_topic",
        "node",
        "processor_metadata",
        "punctuation_time",
        "record",
        "record_collector",
    )

    def __init__(
        self,
        task: TaskProcessor,
        config: StreamsConfig,
        state_manager: StateManager,
        record_collector: RecordCollector,
    ) -> None:
        self._task = task
        self._config = config
        self._state_manager = state_manager
        self.record_collector = record_collector
        self.cache: Any = None
        """The stream thread's record cache (a ThreadCache), shared by caching stores; None: each makes its own."""
        self.node: ProcessorNode | None = None
        self.init_node: ProcessorNode | None = None
        self.record: Record[Any, Any] | None = None
        self.input_topic: str | None = None
        self.input_partition: int | None = None
        self.input_offset: int | None = None
        self.punctuation_time: int | None = None
        self.processor_metadata = ProcessorMetadata()
        """The task's processor metadata; the runtime's task replaces it with the committed one before
        the processors start (Kafka's `setProcessorMetadata`) and commits it with each offset."""

    # -- identity and configuration -----------------------------------------------------------

    @property
    def application_id(self) -> str:
        return str(self._config["application.id"])

    @property
    def task_id(self) -> TaskId:
        return self._task.task_id

    @property
    def config(self) -> Mapping[str, Any]:
        return self._config

    @property
    def state_dir(self) -> Path:
        return self._state_manager.task_dir

    @property
    def key_serde(self) -> Serde[Any]:
        return self._config["default.key.serde"]  # type: ignore[no-any-return]

    @property
    def value_serde(self) -> Serde[Any]:
        return self._config["default.value.serde"]  # type: ignore[no-any-return]

    # -- the record being processed -----------------------------------------------------------

    @property
    def topic(self) -> str | None:
        """Topic of the input record; None in punctuations, init and close."""
        return self.input_topic

    @property
    def partition(self) -> int | None:
        """Partition of the input record; None in punctuations, init and close."""
        return self.input_partition

    @property
    def offset(self) -> int | None:
        """Offset of the input record; None in punctuations, init and close."""
        return self.input_offset

    @property
    def timestamp(self) -> int | None:
        """Timestamp of the record being handled, or the punctuation time; None in init and close."""
        record = self.record
        return record.timestamp if record is not None else self.punctuation_time

    @property
    def headers(self) -> Headers:
        """Headers of the record being handled; empty in punctuations, init and close."""
        record = self.record
        return record.headers if record is not None else ()

    @property
    def record_metadata(self) -> RecordMetadata | None:
        """Topic, partition and offset of the input record, or None when there is none."""
        if self.input_topic is None:
            return None
        return RecordPosition(self.input_topic, self.input_partition, self.input_offset)  # type: ignore[arg-type]

    def current_stream_time_ms(self) -> int:
        """The task's stream time; a global store's processor has none (StreamsError, as Kafka's
        GlobalProcessorContextImpl throws UnsupportedOperationException)."""
        if self._task.global_task:
            node = self.node or self.init_node
            where = "" if node is None else f"processor {node.name!r}: "
            raise StreamsError(f"{where}there is no concept of stream-time for a global processor (the global thread keeps none)")
        return self._task.stream_time

    def current_system_time_ms(self) -> int:
        return self._task.wall_clock_time()

    # -- what processors do -------------------------------------------------------------------

    def forward(self, record: Record[Any, Any], child_name: str | None = None) -> None:
        """Hand `record` to every child of the current node (or to `child_name`), depth-first."""
        node = self.node
        if node is None:
            raise StreamsError(_outside_scope("forward()", self.init_node, "process() or a punctuation"))
        if child_name is None:
            children = node.children
        else:
            child = node.children_by_name.get(child_name)
            if child is None:
                raise StreamsError(
                    f"processor {node.name!r} cannot forward to {child_name!r}: not one of its children "
                    f"({', '.join(repr(c) for c in node.children_by_name) or 'it has none'})"
                )
            children = (child,)
        previous = self.record
        self.record = record
        for child in children:
            self.node = child
            child.process(record)
        self.node = node
        self.record = previous

    def schedule(self, interval_ms: int, punctuation_type: PunctuationType, callback: Punctuator) -> Cancellable:
        """Schedule `callback(time)` every `interval_ms` ms of stream or wall-clock time; a global
        store's processor cannot (the task refuses: `TaskProcessor.schedule`)."""
        node = self._user_node("schedule()")
        if isinstance(interval_ms, bool) or not isinstance(interval_ms, int):
            raise TypeError(
                f"processor {node.name!r}: the punctuation interval must be an int (ms), got {interval_ms!r}"
            )
        if interval_ms < 1:
            raise ValueError(f"processor {node.name!r}: the punctuation interval must be >= 1 ms, got {interval_ms}")
        if not isinstance(punctuation_type, PunctuationType):
            raise TypeError(
                f"processor {node.name!r}: expected PunctuationType.STREAM_TIME or WALL_CLOCK_TIME, "
                f"got {punctuation_type!r}"
            )
        punctuate = getattr(callback, "punctuate", callback)
        if not callable(punctuate):
            raise TypeError(f"processor {node.name!r}: the punctuation callback must be callable, got {callback!r}")
        return self._task.schedule(node, interval_ms, punctuation_type, punctuate)

    def commit(self) -> None:
        """Request a commit; the task honours it once the current record or punctuation is done."""
        self._task.request_commit()

    def get_state_store(self, name: str) -> Any:
        """A store connected to the current processor; anything else is a TopologyError."""
        node = self._user_node("get_state_store()")
        if name not in node.store_names:
            raise TopologyError(self._no_access(node, name))
        store = self._state_manager.get_store(name)
        if store is None:
            raise StreamsError(f"state store {name!r} of processor {node.name!r} is not registered with its task")
        return store

    def _no_access(self, node: ProcessorNode, name: str) -> str:
        """Why `node` cannot have store `name`: not connected to it, or (a misspelling, most
        likely) no store of that name in its task, with the stores it can reach."""
        reachable = sorted(node.store_names)
        if name in self._task.topology.state_stores or self._state_manager.get_store(name) is not None:
            return (
                f"processor {node.name!r} has no access to state store {name!r}: the store is not connected "
                f"to it. Connect it with Topology.add_state_store(builder, {node.name!r}) or "
                f"Topology.connect_processor_and_state_stores({node.name!r}, {name!r})"
            )
        return (
            f"processor {node.name!r} asked for state store {name!r}, which its sub-topology does not have "
            f"(task {self._task.task_id}); the stores it can reach: {reachable or 'none'}"
        )

    def _user_node(self, what: str) -> ProcessorNode:
        node = self.node or self.init_node
        if node is None:
            raise StreamsError(_outside_scope(what, None, "init(), process() or a punctuation"))
        return node

    def add_processor_metadata_key_value(self, key: str, value: int) -> None:
        """Keep `value` under `key` in the task's processor metadata, committed with the next offsets."""
        self.processor_metadata.put(key, value)

    def processor_metadata_for_key(self, key: str) -> int | None:
        """The value kept under `key` (committed by this task's previous owner too), or None."""
        return self.processor_metadata.get(key)

    # -- StateStoreContext --------------------------------------------------------------------

    def register(self, store: StateStore, restore_callback: RestoreCallback | None = None) -> None:
        """Register a store with the task's state manager (called by the store's `init`)."""
        self._state_manager.register(store, restore_callback)

    def __repr__(self) -> str:
        return f"ProcessorContextImpl(task={self._task.task_id}, node={getattr(self.node, 'name', None)!r})"


def _outside_scope(what: str, init_node: ProcessorNode | None, allowed: str) -> str:
    where = f" (processor {init_node.name!r} is in init() or close())" if init_node is not None else ""
    return f"{what} may only be called from {allowed}{where}"
