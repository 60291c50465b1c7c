"""The test driver's topics: input and output topics, and the in-memory topics behind them.

Every topic has the single partition 0. What a sink produces is kept per topic for the output
topics to read, and, when a source of the topology reads that topic, handed to its task after the
record that produced it (`TopologyTestDriver._add_produced`). Which task reads a topic is looked up
once per topic. A base of `TopologyTestDriver`.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from streams_core.common.headers import Headers
from streams_core.config import StreamsConfig
from streams_core.errors import TopologyError
from streams_core.processor.internals.internal_topology_builder import InternalTopologyBuilder
from streams_core.serde import Serde
from streams_core.testing.fake_kafka_cluster import FakeRecord
from streams_core.testing.test_input_topic import TestInputTopic
from streams_core.testing.test_output_topic import TestOutputTopic

if TYPE_CHECKING:
    from streams_core.runtime.tasks.stream_task import StreamTask
    from streams_core.testing.topology_test_driver import TopologyTestDriver

__all__ = ["TopologyTestDriverTopics"]

K = TypeVar("K")
V = TypeVar("V")


class TopologyTestDriverTopics:
    """Creating input and output topics, producing to and reading from the in-memory topics (state set by
    `TopologyTestDriver`, which is the only class built on this one)."""

    config: StreamsConfig
    _builder: InternalTopologyBuilder
    _wall_clock_ms: int
    _tasks: dict[int, StreamTask]
    _topics: dict[str, deque[FakeRecord]]
    _next_offsets: dict[str, int]
    _produced: deque[FakeRecord]
    _task_of_topic: dict[str, StreamTask | None]
    _reads_topic: dict[str, bool]

    def _check_open(self) -> None:
        """Raise StreamsError once the driver is closed (`TopologyTestDriver` defines it)."""
        raise NotImplementedError

    @overload
    def create_input_topic(
        self,
        name: str,
        key_serde: Serde[K],
        value_serde: Serde[V],
        *,
        start_timestamp_ms: int | None = None,
        auto_advance_ms: int = 0,
    ) -> TestInputTopic[K, V]: ...

    @overload
    def create_input_topic(
        self,
        name: str,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        *,
        start_timestamp_ms: int | None = None,
        auto_advance_ms: int = 0,
    ) -> TestInputTopic[Any, Any]: ...

    def create_input_topic(
        self,
        name: str,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        *,
        start_timestamp_ms: int | None = None,
        auto_advance_ms: int = 0,
    ) -> TestInputTopic[Any, Any]:
        """An input topic read by a source of the topology; serdes default to the config's.

        Records piped without a timestamp start at `start_timestamp_ms` (default: the mock
        wall-clock time) and advance by `auto_advance_ms` each.
        """
        self._check_open()
        if self._builder.source_for_topic(name) is None and not self._reads(name):
            raise TopologyError(
                f"topic {name!r} is not read by any source of the topology "
                f"(sources read {sorted(self._builder.source_topics)}"
                + (
                    f" and patterns {[p.pattern for p in self._builder.source_patterns]}"
                    if self._builder.source_patterns
                    else ""
                )
                + ")"
            )
        start = self._wall_clock_ms if start_timestamp_ms is None else start_timestamp_ms
        return TestInputTopic(
            cast("TopologyTestDriver", self),  # this class is only ever a base of the driver
            name,
            key_serde or self.config["default.key.serde"],
            value_serde or self.config["default.value.serde"],
            start,
            auto_advance_ms,
        )

    @overload
    def create_output_topic(self, name: str, key_serde: Serde[K], value_serde: Serde[V]) -> TestOutputTopic[K, V]: ...

    @overload
    def create_output_topic(
        self, name: str, key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None
    ) -> TestOutputTopic[Any, Any]: ...

    def create_output_topic(
        self, name: str, key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None
    ) -> TestOutputTopic[Any, Any]:
        """Reads what the topology produced to `name`; serdes default to the config's."""
        self._check_open()
        return TestOutputTopic(
            cast("TopologyTestDriver", self),  # this class is only ever a base of the driver
            name,
            key_serde or self.config["default.key.serde"],
            value_serde or self.config["default.value.serde"],
        )

    def produced_topic_names(self) -> set[str]:
        """Every topic the topology has produced to so far."""
        return set(self._topics)

    def read_raw_record(self, topic: str) -> FakeRecord | None:
        """Remove and return the oldest unread record of `topic`, or None."""
        queue = self._topics.get(topic)
        return queue.popleft() if queue else None

    def queued_record_count(self, topic: str) -> int:
        return len(self._topics.get(topic, ()))

    def produce(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers) -> None:
        """Append a record from a sink to `topic`; a source that reads it gets it after the current step."""
        record = FakeRecord(topic, 0, self._next_offset(topic), timestamp, key, value, tuple(headers))
        self._topics.setdefault(topic, deque()).append(record)
        if self._reads(topic):
            self._produced.append(record)

    def _reads(self, topic: str) -> bool:
        """Whether a source of a task or of the global stores reads `topic`."""
        reads = self._reads_topic.get(topic)
        if reads is None:
            reads = self._reads_topic[topic] = (
                self._task_for(topic) is not None or topic in self._builder.global_topics
            )
        return reads

    def _task_for(self, topic: str) -> StreamTask | None:
        if topic not in self._task_of_topic:
            subtopology_id = self._builder.subtopology_for_topic(topic)
            self._task_of_topic[topic] = None if subtopology_id is None else self._tasks[subtopology_id]
        return self._task_of_topic[topic]

    def _next_offset(self, topic: str) -> int:
        offset = self._next_offsets.get(topic, 0)
        self._next_offsets[topic] = offset + 1
        return offset
