"""WindowedSerdes: serdes of windowed keys, to write windowed results to topics (Java's layout).

    counts.to_stream().to("counts-by-minute",
        key_serde=WindowedSerdes.time_windowed_serde_from(Serdes.String(), 60_000),
        value_serde=Serdes.Long())

A time-windowed key is the key's bytes followed by the window start (8 bytes, big-endian);
reading needs the window size to know the end. A session-windowed key is the key's bytes, the
session end, then its start (8 bytes each), as Kafka Streams' `SessionKeySchema`.
"""

from __future__ import annotations

from typing import Any

from streams_core.errors import DeserializationError, SerializationError
from streams_core.kstream.internals.dsl_serde import BoundSerde, complete
from streams_core.serde import Serde
from streams_core.state.windowed import SessionWindow, TimeWindow, Windowed

__all__ = ["SessionWindowedSerde", "TimeWindowedSerde", "WindowedSerdes"]


class TimeWindowedSerde(BoundSerde[Windowed[Any]]):
    """`Windowed(key, TimeWindow)` as key bytes + start; the end is start + `window_size_ms`."""

    name = "TimeWindowed"

    def __init__(self, inner: Serde[Any] | None, window_size_ms: int) -> None:
        if isinstance(window_size_ms, bool) or not isinstance(window_size_ms, int) or window_size_ms < 0:
            raise ValueError(f"the window size must be an int >= 0 (ms), got {window_size_ms!r}")
        self._given = inner
        self.inner = inner
        self.window_size_ms = window_size_ms

    def bind(self, config: Any) -> None:
        self.inner = complete(self._given, config, "key")

    def serialize(self, topic: str | None, data: Windowed[Any] | None) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, Windowed):
            raise SerializationError(
                f"TimeWindowed serde expects a Windowed key, got {type(data).__name__}", topic=topic
            )
        raw = self.inner.serialize(topic, data.key)  # type: ignore[union-attr]
        return (raw or b"") + data.window.start.to_bytes(8, "big", signed=True)

    def deserialize(self, topic: str | None, data: bytes | None) -> Windowed[Any] | None:
        if data is None:
            return None
        if len(data) < 8:
            raise DeserializationError(f"TimeWindowed serde expects at least 8 bytes, got {len(data)}")
        start = int.from_bytes(data[-8:], "big", signed=True)
        return Windowed(self.inner.deserialize(topic, data[:-8]), TimeWindow(start, start + self.window_size_ms))  # type: ignore[union-attr]

    def __repr__(self) -> str:
        return f"WindowedSerdes.time_windowed_serde_from({self.inner!r}, {self.window_size_ms})"


class SessionWindowedSerde(BoundSerde[Windowed[Any]]):
    """`Windowed(key, SessionWindow)` as key bytes + end + start."""

    name = "SessionWindowed"

    def __init__(self, inner: Serde[Any] | None) -> None:
        self._given = inner
        self.inner = inner

    def bind(self, config: Any) -> None:
        self.inner = complete(self._given, config, "key")

    def serialize(self, topic: str | None, data: Windowed[Any] | None) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, Windowed):
            raise SerializationError(
                f"SessionWindowed serde expects a Windowed key, got {type(data).__name__}", topic=topic
            )
        raw = self.inner.serialize(topic, data.key)  # type: ignore[union-attr]
        window = data.window
        return (raw or b"") + window.end.to_bytes(8, "big", signed=True) + window.start.to_bytes(8, "big", signed=True)

    def deserialize(self, topic: str | None, data: bytes | None) -> Windowed[Any] | None:
        if data is None:
            return None
        if len(data) < 16:
            raise DeserializationError(f"SessionWindowed serde expects at least 16 bytes, got {len(data)}")
        end = int.from_bytes(data[-16:-8], "big", signed=True)
        start = int.from_bytes(data[-8:], "big", signed=True)
        return Windowed(self.inner.deserialize(topic, data[:-16]), SessionWindow(start, end))  # type: ignore[union-attr]

    def __repr__(self) -> str:
        return f"WindowedSerdes.session_windowed_serde_from({self.inner!r})"


class WindowedSerdes:
    """Factories of windowed-key serdes, as Java's `WindowedSerdes`."""

    @staticmethod
    def time_windowed_serde_from(inner: Serde[Any], window_size_ms: int) -> TimeWindowedSerde:
        """Keys of tumbling, hopping or sliding windows of `window_size_ms`."""
        if not isinstance(inner, Serde):
            raise TypeError(f"expected the key's Serde, got {inner!r}")
        return TimeWindowedSerde(inner, window_size_ms)

    @staticmethod
    def session_windowed_serde_from(inner: Serde[Any]) -> SessionWindowedSerde:
        """Keys of session windows."""
        if not isinstance(inner, Serde):
            raise TypeError(f"expected the key's Serde, got {inner!r}")
        return SessionWindowedSerde(inner)
