"""PollTimer: `max.poll.interval.ms` for a streams group member, Kafka's consumer poll timer.

Java's consumer resets its poll timer at every `poll()`; when it expires, the member leaves the group
(epoch -1) and stays out (STALE) until the application polls again (`AbstractHeartbeatRequestManager`,
`StreamsMembershipManager.onPollTimerExpired`/`maybeRejoinStaleMember`). Kafka Streams restores between
polls, so its restoration never expires the timer. Ours restores inside the assignment callback, so a
restored batch resets the timer as a poll does: only a thread that neither polls nor restores leaves.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["PollTimer"]


class PollTimer:
    """How long since the stream thread last polled or restored a record, against `max.poll.interval.ms`."""

    __slots__ = ("_clock", "_last", "interval_ms")

    def __init__(self, max_poll_interval_ms: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if max_poll_interval_ms <= 0:
            raise ValueError(f"max.poll.interval.ms must be positive, not {max_poll_interval_ms}")
        self.interval_ms = max_poll_interval_ms
        self._clock = clock
        self._last = clock()

    def reset(self) -> None:
        """The thread polled, or restored records: it is alive."""
        self._last = self._clock()

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self._last

    @property
    def remaining_s(self) -> float:
        """Seconds until the timer expires (0 once expired)."""
        return max(0.0, self.interval_ms / 1000 - self.elapsed_s)

    @property
    def expired(self) -> bool:
        return self.elapsed_s >= self.interval_ms / 1000
