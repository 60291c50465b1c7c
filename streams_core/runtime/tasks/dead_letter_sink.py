"""DeadLetterSink: where the `dead_letter` deserialization handler sends a record it cannot read.

KIP-1034's dead-letter queue: the record's original bytes, key and timestamp go to
`errors.dead.letter.queue.topic.name` with headers naming where it came from and why it
failed, written through the stream thread's producer (its collector), so under at-least-once it
is flushed before the offsets that skip it are committed.
"""

from __future__ import annotations

from typing import Protocol

from streams_core.clients import RawRecord
from streams_core.common.headers import Headers
from streams_core.processor.internals.record_deserializer import dead_letter_headers

__all__ = ["DeadLetterSink", "RecordSender"]


class RecordSender(Protocol):
    """The thread's record collector, as the sink sees it."""

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers, partition: int | None
    ) -> None: ...


class DeadLetterSink:
    """Sends undeserializable records to the dead-letter topic and counts them."""

    __slots__ = ("_sender", "_topic", "sent_records")

    def __init__(self, sender: RecordSender, topic: str) -> None:
        self._sender = sender
        self._topic = topic
        self.sent_records = 0

    def send(self, record: RawRecord) -> None:
        """Forward a record that failed to deserialize, with its original bytes and where it came from."""
        self._sender.send(self._topic, record.key, record.value, record.timestamp, dead_letter_headers(record), None)
        self.sent_records += 1
