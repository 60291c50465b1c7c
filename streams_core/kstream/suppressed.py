"""Suppressed: hold back a KTable's updates, to emit only final window results or rate-limit.

    counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    table.suppress(Suppressed.until_time_limit(60_000, BufferConfig.max_records(1000).emit_early_when_full()))

`until_window_closes` (windowed tables only) emits one result per window, when stream time
passes the window's end plus its grace period. `until_time_limit` emits the latest value of
a key once `limit` of stream time has passed since its first update. The buffer lives in
memory; a bounded buffer either stops the application when full (`shut_down_when_full`,
the only choice for `until_window_closes`) or emits the oldest entries early.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from streams_core.kstream.internals.durations import Millis, millis

__all__ = ["BufferConfig", "Suppressed"]


@dataclass(frozen=True, slots=True)
class BufferConfig:
    """Bounds of a suppression buffer: records and/or bytes (None: unbounded), and what to do when full."""

    record_limit: int | None = None
    byte_limit: int | None = None
    fail_when_full: bool = True

    @staticmethod
    def unbounded() -> BufferConfig:
        return BufferConfig()

    @staticmethod
    def max_records(count: int) -> BufferConfig:
        """At most `count` records (then fail; `.emit_early_when_full()` to emit instead)."""
        return BufferConfig().with_max_records(count)

    @staticmethod
    def max_bytes(count: int) -> BufferConfig:
        """At most `count` bytes of serialized keys and values."""
        return BufferConfig().with_max_bytes(count)

    def with_max_records(self, count: int) -> BufferConfig:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"the buffer's record limit must be an int >= 1, got {count!r}")
        return replace(self, record_limit=count)

    def with_max_bytes(self, count: int) -> BufferConfig:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"the buffer's byte limit must be an int >= 1, got {count!r}")
        return replace(self, byte_limit=count)

    def with_no_bound(self) -> BufferConfig:
        return replace(self, record_limit=None, byte_limit=None)

    def shut_down_when_full(self) -> BufferConfig:
        """Fail the application when the buffer is full (results stay exact)."""
        return replace(self, fail_when_full=True)

    def emit_early_when_full(self) -> BufferConfig:
        """Emit the oldest entries early when the buffer is full (results may be intermediate)."""
        return replace(self, fail_when_full=False)

    @property
    def is_strict(self) -> bool:
        """Unbounded, or failing rather than emitting early."""
        return self.fail_when_full or (self.record_limit is None and self.byte_limit is None)


@dataclass(frozen=True, slots=True)
class Suppressed:
    """A suppression: until the window closes, or until a time limit; with a buffer and a name."""

    final_results: bool
    time_limit_ms: int | None
    buffer_config: BufferConfig
    name: str | None = None

    @staticmethod
    def until_window_closes(buffer_config: BufferConfig) -> Suppressed:
        """One final result per window, at `window end + grace`; the buffer must be strict."""
        if not buffer_config.is_strict:
            raise ValueError(
                "until_window_closes needs a strict buffer (BufferConfig.unbounded() or .shut_down_when_full()): "
                "emitting early would not give final results"
            )
        return Suppressed(True, None, buffer_config)

    @staticmethod
    def until_time_limit(limit: Millis, buffer_config: BufferConfig) -> Suppressed:
        """The latest value of a key, `limit` ms of stream time after its first buffered update."""
        return Suppressed(False, millis(limit, "the suppression time limit"), buffer_config)

    def with_name(self, name: str) -> Suppressed:
        return replace(self, name=name)

