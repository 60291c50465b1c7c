"""The reliability scenarios of issue 15: what runs, how big, which faults.

`SMALL` are the integration tests' sizes (tests/chaos/test_chaos_scenarios.py, a few seconds of
input each); `FULL` the sizes of the issue, run by bench/chaos/run.py. A scenario is data only:
tests/chaos/harness.py runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["EXACTLY_ONCE", "FULL", "SMALL", "Scenario"]

EXACTLY_ONCE = "exactly_once_v2"


@dataclass(frozen=True, slots=True)
class Scenario:
    """One chaos run: word-count instances, seeded input, seeded faults, and what the checker expects."""

    name: str
    guarantee: str = EXACTLY_ONCE
    instances: int = 3
    lines: int = 2_000
    """Input records (lines of text) with a known word count."""
    words: int = 150
    """Distinct words of the input."""
    produce_seconds: float = 8.0
    """The input is spread over this long; the faults fall inside it."""
    kills: int = 0
    """kill -9 of a random live instance, each restarted after `restart_delay` seconds."""
    terms: int = 0
    """SIGTERM (clean shutdown) of a random live instance, restarted likewise."""
    threads: int = 1
    """Stream threads per instance: two or more run as worker processes (stream.threads.mode=auto)."""
    worker_kills: int = 0
    """kill -9 of a random worker process of a random live instance (threads >= 2); the instance
    replaces it (the service's handler: REPLACE_THREAD for a dead worker) and is not restarted."""
    stall_seconds: float = 0.0
    """SIGSTOP of the broker for this long (then SIGCONT), once, in the middle of the input."""
    autostop: bool = False
    """`autostop.at=eol`: input produced before the start, more after it; kills during the run."""
    fault_seconds: float | None = None
    """The window the faults fall in (default `produce_seconds`; a batch run has no input window)."""
    restart_delay: tuple[float, float] = (0.3, 2.0)
    settle_timeout: float = 60.0
    """How long the checker waits for outputs and stores to reach the truth after the last fault."""

    @property
    def exact(self) -> bool:
        """Exactly-once: counts equal the truth and every key's committed output is 1, 2, ..., N."""
        return self.guarantee.startswith("exactly_once")

    @property
    def window(self) -> float:
        return self.produce_seconds if self.fault_seconds is None else self.fault_seconds

    def scaled(self, **changes: object) -> Scenario:
        return replace(self, **changes)  # type: ignore[arg-type]


SMALL: dict[str, Scenario] = {
    "eos": Scenario("eos", lines=1_500, produce_seconds=6.0, kills=3),
    "alos": Scenario("alos", guarantee="at_least_once", lines=1_500, produce_seconds=6.0, kills=2, terms=1),
    "stall": Scenario("stall", lines=1_000, produce_seconds=6.0, stall_seconds=3.0),
    "workers": Scenario("workers", instances=2, lines=1_500, produce_seconds=8.0, threads=2, kills=1, worker_kills=2),
    "autostop": Scenario(
        "autostop", lines=3_000, produce_seconds=0.0, kills=3, autostop=True, fault_seconds=3.0, restart_delay=(0.2, 1.0)
    ),
}

FULL: dict[str, Scenario] = {
    "eos": Scenario("eos", lines=1_000_000, words=5_000, produce_seconds=240.0, kills=20, settle_timeout=900.0),
    "alos": Scenario(
        "alos",
        guarantee="at_least_once",
        lines=1_000_000,
        words=5_000,
        produce_seconds=240.0,
        kills=20,
        settle_timeout=900.0,
    ),
    "stall": Scenario("stall", lines=200_000, words=5_000, produce_seconds=90.0, stall_seconds=20.0, settle_timeout=600.0),
    "workers": Scenario(
        "workers", instances=2, lines=300_000, words=5_000, produce_seconds=120.0, threads=2, kills=4, worker_kills=10,
        settle_timeout=900.0,
    ),
    "autostop": Scenario(
        "autostop",
        lines=300_000,
        words=5_000,
        produce_seconds=0.0,
        kills=10,
        autostop=True,
        fault_seconds=120.0,
        settle_timeout=900.0,
    ),
}
