"""The nodes of an instantiated topology: SourceNode, ProcessorNode and SinkNode.

Nodes are built per task by `InternalTopologyBuilder` and wired once: children sit in a tuple,
and a user processor's `process` is bound straight onto its node, so the depth-first walk of a
record is a chain of plain calls (`ProcessorContextImpl.forward` → `node.process(record)`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streams_core.errors import SerializationError, StreamsError, TopologyError
from streams_core.processor.processor import Record
from streams_core.processor.stream_partitioner import StreamPartitioner
from streams_core.processor.timestamp_extractor import ExtractFunction
from streams_core.processor.topic_name_extractor import TopicNameExtractor
from streams_core.serde import Serde, Serdes

if TYPE_CHECKING:
    from streams_core.processor.internals.processor_context_impl import ProcessorContextImpl
    from streams_core.processor.internals.record_collector import RecordCollector

__all__ = ["ProcessorNode", "SinkNode", "SourceNode"]

_STRING_SERIALIZE = Serdes.String().serialize
_BYTES_SERIALIZE = Serdes.Bytes().serialize


class ProcessorNode:
    """A named node with its children; for a user processor, `process` is the processor's own."""

    __slots__ = ("children", "children_by_name", "name", "process", "processor", "store_names")

    process: Callable[[Record[Any, Any]], None]

    def __init__(self, name: str, processor: Any = None, store_names: frozenset[str] = frozenset()) -> None:
        self.name = name
        self.processor = processor
        self.store_names = store_names
        self.children: tuple[ProcessorNode, ...] = ()
        self.children_by_name: dict[str, ProcessorNode] = {}
        if processor is not None:
            process = getattr(processor, "process", None)
            if not callable(process):
                raise TopologyError(
                    f"processor {name!r}: its supplier returned {processor!r}, which has no process(record) method"
                )
            self.process = process

    def add_child(self, child: ProcessorNode) -> None:
        self.children = (*self.children, child)
        self.children_by_name[child.name] = child

    def init(self, context: ProcessorContextImpl) -> None:
        """Initialise the user processor (if any) with the task's context."""
        init = getattr(self.processor, "init", None)
        if init is not None:
            init(context)

    def close(self) -> None:
        close = getattr(self.processor, "close", None)
        if close is not None:
            close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, children={[c.name for c in self.children]})"


class SourceNode(ProcessorNode):
    """Entry of a sub-topology: holds the serdes and timestamp extractor of its topics, forwards to children."""

    __slots__ = ("_forward", "extract_timestamp", "key_serde", "pattern", "topics", "value_serde")

    def __init__(
        self,
        name: str,
        topics: tuple[str, ...],
        pattern: re.Pattern[str] | None,
        key_serde: Serde[Any],
        value_serde: Serde[Any],
        extract_timestamp: ExtractFunction,
    ) -> None:
        super().__init__(name)
        self.topics = topics
        self.pattern = pattern
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.extract_timestamp = extract_timestamp
        self._forward: Callable[[Record[Any, Any]], None] | None = None

    def init(self, context: ProcessorContextImpl) -> None:
        self._forward = context.forward

    def close(self) -> None:
        self._forward = None

    def process(self, record: Record[Any, Any]) -> None:
        """Forward to every child (the task has made this node current)."""
        forward = self._forward
        if forward is None:
            raise StreamsError(f"source {self.name!r} is not initialised")
        forward(record)


class SinkNode(ProcessorNode):
    """Exit of a sub-topology: serializes records and hands them to the task's RecordCollector."""

    __slots__ = ("_collector", "_context", "_own_type", "key_serde", "partitioner", "topic", "topic_extractor", "value_serde")

    def __init__(
        self,
        name: str,
        topic: str | None,
        topic_extractor: TopicNameExtractor | None,
        key_serde: Serde[Any],
        value_serde: Serde[Any],
        partitioner: StreamPartitioner | None,
    ) -> None:
        super().__init__(name)
        self.topic = topic
        self.topic_extractor = topic_extractor
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.partitioner = partitioner
        self._context: ProcessorContextImpl | None = None
        self._collector: RecordCollector | None = None
        self._own_type: type | None = None

    def add_child(self, child: ProcessorNode) -> None:
        raise TopologyError(f"sink {self.name!r} cannot have children (tried to add {child.name!r})")

    def init(self, context: ProcessorContextImpl) -> None:
        self._context = context
        self._collector = context.record_collector
        # Serdes.String() or Serdes.Bytes() both ways (the serdes are bound by now): `send` encodes str, or
        # passes bytes on, itself
        serializers = (self.key_serde.serialize, self.value_serde.serialize)
        self._own_type = (
            str if serializers == (_STRING_SERIALIZE, _STRING_SERIALIZE)
            else bytes if serializers == (_BYTES_SERIALIZE, _BYTES_SERIALIZE)
            else None
        )

    def close(self) -> None:
        self._collector = None

    def process(self, record: Record[Any, Any]) -> None:
        """Serialize the record, choose topic and partition, and send it to the collector."""
        key, value, timestamp, headers = record
        self.send(key, value, timestamp, headers)

    def send(self, key: Any, value: Any, timestamp: int, headers: Any) -> None:
        """`process` of the record's fields (a fused chain's terminal calls it without a `Record`)."""
        collector = self._collector
        if collector is None:
            raise StreamsError(f"sink {self.name!r} is not initialised")
        topic = self.topic
        if topic is None:
            topic = self.topic_extractor(key, value, self._context)  # type: ignore[misc, arg-type]
            if not isinstance(topic, str) or not topic:
                raise StreamsError(f"sink {self.name!r}: its topic extractor returned {topic!r}, not a topic name")
        if timestamp < 0:
            raise StreamsError(
                f"sink {self.name!r}: invalid (negative) timestamp {timestamp} for a record to topic {topic!r}"
            )
        key_bytes: bytes | None = None
        value_bytes: bytes | None
        own = self._own_type
        if own is bytes and type(key) is bytes and type(value) is bytes:
            key_bytes, value_bytes = key, value
        elif own is str and type(key) is str and type(value) is str:
            try:
                key_bytes, value_bytes = key.encode(), value.encode()
            except UnicodeEncodeError:  # left to the serdes, which report it
                key_bytes = None
        if key_bytes is None:
            try:
                key_bytes = self.key_serde.serialize(topic, key)
            except SerializationError as exc:
                raise self._serialization_error("key", topic, self.key_serde, exc) from exc
            try:
                value_bytes = self.value_serde.serialize(topic, value)
            except SerializationError as exc:
                raise self._serialization_error("value", topic, self.value_serde, exc) from exc
        partition = None
        if self.partitioner is not None:
            partition = self._partition(collector, topic, key, value)
        collector.send(topic, key_bytes, value_bytes, timestamp, headers, partition)

    def _partition(self, collector: RecordCollector, topic: str, key: Any, value: Any) -> int | None:
        count = collector.partitions_for(topic)
        partition = self.partitioner(topic, key, value, count)  # type: ignore[misc]
        if partition is not None and not (isinstance(partition, int) and 0 <= partition < count):
            raise StreamsError(
                f"sink {self.name!r}: its partitioner returned {partition!r} for topic {topic!r}, "
                f"which has {count} partition(s)"
            )
        return partition

    def _serialization_error(
        self, what: str, topic: str, serde: Serde[Any], exc: SerializationError
    ) -> SerializationError:
        return SerializationError(
            f"sink {self.name!r} cannot serialize the record {what} with {serde!r}: {exc}; "
            f"give the sink a {what}_serde or set default.{what}.serde",
            topic=topic,
        )
