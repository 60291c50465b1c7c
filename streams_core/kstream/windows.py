"""Windows of the DSL: TimeWindows (tumbling, hopping), SlidingWindows, SessionWindows, JoinWindows.

Times are milliseconds (an int or a `datetime.timedelta`). Every window kind has a grace
period: how long after a window ends records may still arrive out of order and update it.
A record later than that is dropped (and counted in the `dropped_records` metric).

    TimeWindows.of_size_with_no_grace(60_000)                          # tumbling minutes
    TimeWindows.of_size_and_grace(60_000, 10_000).advance_by(30_000)   # hopping
    SlidingWindows.of_time_difference_and_grace(10_000, 5_000)
    SessionWindows.with_inactivity_gap(5 * 60_000).grace(60_000)
    JoinWindows.of_time_difference_and_grace(5_000, 1_000).after(0)    # only earlier records
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from streams_core.kstream.internals.durations import Millis, millis
from streams_core.state.windowed import TimeWindow

__all__ = ["JoinWindows", "SessionWindows", "SlidingWindows", "TimeWindows", "Windows"]


class Windows:
    """What windowed aggregations ask of a window specification."""

    size_ms: int
    grace_period_ms: int

    def windows_for(self, timestamp: int) -> dict[int, TimeWindow]:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class TimeWindows(Windows):
    """Fixed-size windows `[start, start + size)`, aligned to the epoch.

    Tumbling when `advance == size` (each record in one window), hopping when smaller (a
    record in `size / advance` windows).
    """

    size_ms: int
    advance_ms: int
    grace_period_ms: int

    @staticmethod
    def of_size_with_no_grace(size: Millis) -> TimeWindows:
        """Tumbling windows of `size`; a record after its window's end is dropped."""
        ms = millis(size, "the window size", minimum=1)
        return TimeWindows(ms, ms, 0)

    @staticmethod
    def of_size_and_grace(size: Millis, grace: Millis) -> TimeWindows:
        """Tumbling windows of `size` accepting records up to `grace` after a window's end."""
        ms = millis(size, "the window size", minimum=1)
        return TimeWindows(ms, ms, millis(grace, "the grace period"))

    def advance_by(self, advance: Millis) -> TimeWindows:
        """Hopping windows: a new window starts every `advance` (1 ms to the size)."""
        ms = millis(advance, "the window advance", minimum=1)
        if ms > self.size_ms:
            raise ValueError(f"the window advance ({ms} ms) cannot be larger than the window size ({self.size_ms} ms)")
        return replace(self, advance_ms=ms)

    def windows_for(self, timestamp: int) -> dict[int, TimeWindow]:
        """The windows containing `timestamp`, by start (as Java's `TimeWindows.windowsFor`)."""
        size, advance = self.size_ms, self.advance_ms
        start = (max(0, timestamp - size + advance) // advance) * advance
        found: dict[int, TimeWindow] = {}
        while start <= timestamp:
            found[start] = TimeWindow(start, start + size)
            start += advance
        return found


@dataclass(frozen=True, slots=True)
class SlidingWindows(Windows):
    """Windows of a fixed time difference that slide with the records: `[t - difference, t]`.

    A window exists for every distinct set of records within `time_difference` of each other
    (both ends inclusive), so each record updates the windows that contain it, as Java's
    sliding windows do.
    """

    time_difference_ms: int
    grace_period_ms: int

    @property
    def size_ms(self) -> int:  # type: ignore[override]
        return self.time_difference_ms

    @staticmethod
    def of_time_difference_with_no_grace(time_difference: Millis) -> SlidingWindows:
        return SlidingWindows(millis(time_difference, "the time difference", minimum=1), 0)

    @staticmethod
    def of_time_difference_and_grace(time_difference: Millis, grace: Millis) -> SlidingWindows:
        difference = millis(time_difference, "the time difference", minimum=1)
        return SlidingWindows(difference, millis(grace, "the grace period"))


@dataclass(frozen=True, slots=True)
class SessionWindows:
    """Sessions: records of a key closer than `inactivity_gap` to each other share one window.

    A session `[first, last]` grows with each record and merges with neighbours a new record
    bridges. The grace period (0 unless set with `grace`) is counted after `end + gap`.
    """

    inactivity_gap_ms: int
    grace_period_ms: int = 0

    @staticmethod
    def with_inactivity_gap(gap: Millis) -> SessionWindows:
        """Sessions with this gap and no grace period (add one with `.grace(ms)`)."""
        return SessionWindows(millis(gap, "the inactivity gap", minimum=1), 0)

    @staticmethod
    def of_inactivity_gap_with_no_grace(gap: Millis) -> SessionWindows:
        return SessionWindows.with_inactivity_gap(gap)

    @staticmethod
    def of_inactivity_gap_and_grace(gap: Millis, grace: Millis) -> SessionWindows:
        return SessionWindows(millis(gap, "the inactivity gap", minimum=1), millis(grace, "the grace period"))

    def grace(self, grace: Millis) -> SessionWindows:
        return replace(self, grace_period_ms=millis(grace, "the grace period"))


@dataclass(frozen=True, slots=True)
class JoinWindows:
    """How far apart in time two records may be to join: `before` ms earlier to `after` ms later.

    A left record at `t` joins right records in `[t - before, t + after]`, a right record at
    `t` left records in `[t - after, t + before]`. Records wait for partners until `grace`
    after their window closes; left and outer joins emit unmatched records then.
    """

    before_ms: int
    after_ms: int
    grace_period_ms: int

    @property
    def size_ms(self) -> int:
        return self.before_ms + self.after_ms

    @staticmethod
    def of_time_difference_with_no_grace(time_difference: Millis) -> JoinWindows:
        ms = millis(time_difference, "the time difference")
        return JoinWindows(ms, ms, 0)

    of_time_difference_without_grace = of_time_difference_with_no_grace

    @staticmethod
    def of_time_difference_and_grace(time_difference: Millis, grace: Millis) -> JoinWindows:
        ms = millis(time_difference, "the time difference")
        return JoinWindows(ms, ms, millis(grace, "the grace period"))

    def before(self, time_difference: Millis) -> JoinWindows:
        """Join with records of the other stream up to `time_difference` earlier."""
        ms = millis(time_difference, "the time before", minimum=-self.after_ms)
        return replace(self, before_ms=ms)

    def after(self, time_difference: Millis) -> JoinWindows:
        """Join with records of the other stream up to `time_difference` later."""
        ms = millis(time_difference, "the time after", minimum=-self.before_ms)
        return replace(self, after_ms=ms)
