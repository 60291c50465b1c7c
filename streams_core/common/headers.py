"""Headers: a Kafka record's headers, shared by the clients, the processor API and the stores."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Headers"]


Headers = Sequence[tuple[str, bytes]]
"""Kafka record headers: (name, value) pairs, in order, names may repeat."""
