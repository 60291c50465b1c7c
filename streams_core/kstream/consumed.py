"""Consumed: how `StreamsBuilder.stream/table/global_table` read a topic (serdes, timestamps, name)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from streams_core.serde import Serde

__all__ = ["Consumed"]


@dataclass(frozen=True, slots=True)
class Consumed:
    """Key and value serdes, a timestamp extractor and the source's name; None means the default.

    `Consumed.with_(Serdes.String(), Serdes.Long())`; the same can be given as keyword
    arguments: `builder.stream("t", key_serde=Serdes.String(), value_serde=Serdes.Long())`.
    `offset_reset` ("earliest" / "latest") is recorded for the runtime.
    """

    key_serde: Serde[Any] | None = None
    value_serde: Serde[Any] | None = None
    timestamp_extractor: Any = None
    offset_reset: str | None = None
    name: str | None = None

    @staticmethod
    def with_(
        key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None, timestamp_extractor: Any = None
    ) -> Consumed:
        return Consumed(key_serde, value_serde, timestamp_extractor)

    @staticmethod
    def as_(name: str) -> Consumed:
        return Consumed(name=name)

    def with_key_serde(self, serde: Serde[Any] | None) -> Consumed:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde[Any] | None) -> Consumed:
        return replace(self, value_serde=serde)

    def with_timestamp_extractor(self, extractor: Any) -> Consumed:
        return replace(self, timestamp_extractor=extractor)

    def with_offset_reset_policy(self, policy: str) -> Consumed:
        if policy not in ("earliest", "latest"):
            raise ValueError(f"offset reset policy must be 'earliest' or 'latest', got {policy!r}")
        return replace(self, offset_reset=policy)

    def with_name(self, name: str) -> Consumed:
        return replace(self, name=name)

    def merged(self, **overrides: Any) -> Consumed:
        """A copy with the keyword arguments that are not None applied."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **given) if given else self
