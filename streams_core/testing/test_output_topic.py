"""TestOutputTopic: reads what a TopologyTestDriver's sinks produced to one topic."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from streams_core.common.store import KeyValue
from streams_core.serde import Serde
from streams_core.testing.test_record import TestRecord

if TYPE_CHECKING:
    from streams_core.testing.topology_test_driver import TopologyTestDriver

__all__ = ["TestOutputTopic"]

K = TypeVar("K")
V = TypeVar("V")


class TestOutputTopic(Generic[K, V]):
    """Reads (and thereby removes) the records produced to a topic, oldest first.

    Records produced before the topic object was created are readable too. Reading from an
    empty topic raises IndexError; `is_empty()` tells beforehand.
    """

    __test__: ClassVar[bool] = False

    def __init__(self, driver: TopologyTestDriver, name: str, key_serde: Serde[K], value_serde: Serde[V]) -> None:
        self._driver = driver
        self.name = name
        self._key_serde = key_serde
        self._value_serde = value_serde

    def __repr__(self) -> str:
        return f"TestOutputTopic({self.name!r}, queued={self.get_queue_size()})"

    def read_record(self) -> TestRecord[K, V]:
        """The oldest unread record, with its timestamp and headers."""
        raw = self._driver.read_raw_record(self.name)
        if raw is None:
            raise IndexError(f"empty topic: {self.name!r} has no unread records")
        topic = self.name
        return TestRecord(
            self._key_serde.deserialize(topic, raw.key),  # type: ignore[arg-type]
            self._value_serde.deserialize(topic, raw.value),  # type: ignore[arg-type]
            raw.timestamp,
            raw.headers,
        )

    def read_value(self) -> V:
        return self.read_record().value

    def read_key_value(self) -> KeyValue[K, V]:
        record = self.read_record()
        return KeyValue(record.key, record.value)

    def read_records_to_list(self) -> list[TestRecord[K, V]]:
        """Every unread record, oldest first."""
        records = []
        while not self.is_empty():
            records.append(self.read_record())
        return records

    def read_values_to_list(self) -> list[V]:
        return [record.value for record in self.read_records_to_list()]

    def read_key_values_to_list(self) -> list[KeyValue[K, V]]:
        return [KeyValue(record.key, record.value) for record in self.read_records_to_list()]

    def read_key_values_to_map(self) -> dict[K, V]:
        """The latest value per key, as Java's: a tombstone keeps its key with None; a None key is an error."""
        table: dict[Any, Any] = {}
        for record in self.read_records_to_list():
            if record.key is None:
                raise ValueError(f"topic {self.name!r}: read_key_values_to_map() does not allow None keys")
            table[record.key] = record.value
        return table

    def get_queue_size(self) -> int:
        """How many records are unread."""
        return self._driver.queued_record_count(self.name)

    def is_empty(self) -> bool:
        return self.get_queue_size() == 0
