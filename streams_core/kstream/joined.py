"""Joined: serdes and name of a KStream-KTable join."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from streams_core.kstream.internals.durations import Millis, millis
from streams_core.kstream.internals.names import check_topic_name
from streams_core.serde import Serde

__all__ = ["Joined"]


@dataclass(frozen=True, slots=True)
class Joined:
    """`Joined.with_(key_serde, value_serde, other_value_serde, name, grace_period)`, `Joined.as_("name")`.

    The serdes are used when the stream must be repartitioned before the join (its key was
    changed); the name names the join processor and that repartition topic. `with_grace_period`
    delays stream records for a versioned table (KIP-923).
    """

    key_serde: Serde[Any] | None = None
    value_serde: Serde[Any] | None = None
    other_value_serde: Serde[Any] | None = None
    name: str | None = None
    grace_period_ms: int | None = None

    def __post_init__(self) -> None:
        if self.name is not None:
            check_topic_name(self.name, "Joined name")
        if self.grace_period_ms is not None and (not isinstance(self.grace_period_ms, int) or self.grace_period_ms < 0):
            raise ValueError(f"the grace period must be a non-negative number of ms, got {self.grace_period_ms!r}")

    @staticmethod
    def with_(
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        other_value_serde: Serde[Any] | None = None,
        name: str | None = None,
        grace_period: Millis | None = None,
    ) -> Joined:
        """Java's `Joined.with`, up to its five-argument form (KIP-923's grace period, see `with_grace_period`)."""
        grace_ms = millis(grace_period, "grace period") if grace_period is not None else None
        return Joined(key_serde, value_serde, other_value_serde, name, grace_ms)

    @staticmethod
    def as_(name: str) -> Joined:
        return Joined(name=name)

    def with_key_serde(self, serde: Serde[Any] | None) -> Joined:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde[Any] | None) -> Joined:
        return replace(self, value_serde=serde)

    def with_other_value_serde(self, serde: Serde[Any] | None) -> Joined:
        return replace(self, other_value_serde=serde)

    def with_name(self, name: str) -> Joined:
        return replace(self, name=name)

    def with_grace_period(self, grace_ms: Millis) -> Joined:
        """Wait up to `grace_ms` of stream time for the table before joining each stream record, in
        timestamp order, with the table's value as of the record's time (KIP-923; the table must be
        versioned: `Stores.persistent_versioned_key_value_store`)."""
        return replace(self, grace_period_ms=millis(grace_ms, "grace period"))
