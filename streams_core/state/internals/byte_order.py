"""Byte-order helpers shared by the bytes stores: keys compare as unsigned bytes, shorter first."""

from __future__ import annotations

import logging

__all__ = ["is_inverted_range", "prefix_upper_bound"]

log = logging.getLogger(__name__)


def prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest key above every key that starts with `prefix`; None when there is none.

    Keys with the prefix are exactly `prefix <= key < bound`. A prefix of only 0xff bytes (or
    an empty one) has no upper bound: every key from `prefix` on matches.
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))


def is_inverted_range(store_name: str, lower: object, upper: object) -> bool:
    """True (and a warning, as Kafka Streams logs) when `lower > upper`: the range is empty."""
    if lower is None or upper is None or lower <= upper:  # type: ignore[operator]
        return False
    log.warning(
        "store %s: returning an empty iterator for an invalid range: from %r > to %r "
        "(serialized keys compare as unsigned bytes)",
        store_name,
        lower,
        upper,
    )
    return True
