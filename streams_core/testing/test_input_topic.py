"""TestInputTopic: pipes records into a TopologyTestDriver, serialized with the topic's serdes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from streams_core.common.headers import Headers
from streams_core.serde import Serde
from streams_core.testing.test_record import TestRecord

if TYPE_CHECKING:
    from streams_core.testing.topology_test_driver import TopologyTestDriver

__all__ = ["TestInputTopic"]

K = TypeVar("K")
V = TypeVar("V")


class TestInputTopic(Generic[K, V]):
    """One input topic of the driver (always partition 0).

    Each piped record is processed completely, including the records it causes to be fed back
    through topics that sources read, before the pipe call returns. A record piped without a
    timestamp gets the topic's current time, which then advances by `auto_advance_ms`.
    """

    __test__: ClassVar[bool] = False

    def __init__(
        self,
        driver: TopologyTestDriver,
        name: str,
        key_serde: Serde[K],
        value_serde: Serde[V],
        start_timestamp_ms: int,
        auto_advance_ms: int,
    ) -> None:
        if auto_advance_ms < 0:
            raise ValueError(f"auto_advance_ms must be >= 0, got {auto_advance_ms}")
        self._driver = driver
        self.name = name
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._current_time = start_timestamp_ms
        self._auto_advance = auto_advance_ms

    def __repr__(self) -> str:
        return f"TestInputTopic({self.name!r}, current_time={self._current_time})"

    @property
    def current_time_ms(self) -> int:
        """The timestamp the next record piped without one gets."""
        return self._current_time

    def advance_time(self, ms: int) -> None:
        """Move the topic's current time forward."""
        if ms < 0:
            raise ValueError(f"cannot advance time by a negative amount ({ms} ms)")
        self._current_time += ms

    def pipe_input(self, key: K | None, value: V | None, timestamp: int | None = None, headers: Headers = ()) -> None:
        """Pipe one record and process it (and everything it causes) before returning."""
        if timestamp is None:
            timestamp = self._current_time
            self._current_time += self._auto_advance
        topic = self.name
        self._driver.pipe_raw_record(
            topic,
            self._key_serde.serialize(topic, key),
            self._value_serde.serialize(topic, value),
            timestamp,
            tuple(headers),
        )

    def pipe_record(self, record: TestRecord[Any, Any] | tuple[Any, ...]) -> None:
        """Pipe a TestRecord, a (key, value) pair or a (key, value, timestamp) triple."""
        test_record = TestRecord.of(record)
        self.pipe_input(test_record.key, test_record.value, test_record.timestamp, test_record.headers)

    def pipe_record_list(self, records: Iterable[TestRecord[Any, Any] | tuple[Any, ...]]) -> None:
        """Pipe records in order, each as `pipe_record`."""
        for record in records:
            self.pipe_record(record)

    def pipe_key_value_list(self, pairs: Iterable[tuple[K, V]]) -> None:
        """Pipe (key, value) pairs at the topic's current time (advancing as configured)."""
        for key, value in pairs:
            self.pipe_input(key, value)

    def pipe_value_list(self, values: Iterable[V]) -> None:
        """Pipe values with a None key at the topic's current time (advancing as configured)."""
        for value in values:
            self.pipe_input(None, value)
