"""Durations of the DSL: milliseconds as an int, or a `datetime.timedelta`."""

from __future__ import annotations

from datetime import timedelta

__all__ = ["Millis", "millis"]

Millis = int | timedelta


def millis(value: Millis, what: str, *, minimum: int = 0) -> int:
    """`value` in whole milliseconds; TypeError / ValueError naming `what` otherwise."""
    if isinstance(value, timedelta):
        result = value // timedelta(milliseconds=1)
    elif isinstance(value, int) and not isinstance(value, bool):
        result = value
    else:
        raise TypeError(f"{what} must be milliseconds (int) or a timedelta, got {value!r}")
    if result < minimum:
        raise ValueError(f"{what} must be at least {minimum} ms, got {result} ms")
    return result
