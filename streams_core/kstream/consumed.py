"""Consumed: how `StreamsBuilder.stream/table/global_table` read a topic (serdes, timestamps, name)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Generic

from streams_core.processor.timestamp_extractor import ExtractFunction, TimestampExtractor
from streams_core.processor.type_vars import KR, VR, K, V
from streams_core.serde import Serde

__all__ = ["Consumed", "Extractor"]

Extractor = TimestampExtractor | ExtractFunction
"""A `TimestampExtractor`, or a function `(record, partition_time) -> timestamp`."""


@dataclass(frozen=True, slots=True)
class Consumed(Generic[K, V]):
    """Key and value serdes, a timestamp extractor and the source's name; None means the default.

    `Consumed.with_(Serdes.String(), Serdes.Long())`; the same can be given as keyword
    arguments: `builder.stream("t", key_serde=Serdes.String(), value_serde=Serdes.Long())`.
    `offset_reset` ("earliest" / "latest") is recorded for the runtime.
    """

    key_serde: Serde[K] | None = None
    value_serde: Serde[V] | None = None
    timestamp_extractor: Extractor | None = None
    offset_reset: str | None = None
    name: str | None = None

    @staticmethod
    def with_(
        key_serde: Serde[K] | None = None,
        value_serde: Serde[V] | None = None,
        timestamp_extractor: Extractor | None = None,
    ) -> Consumed[K, V]:
        return Consumed(key_serde, value_serde, timestamp_extractor)

    @staticmethod
    def as_(name: str) -> Consumed[Any, Any]:
        return Consumed(name=name)

    def with_key_serde(self, serde: Serde[KR] | None) -> Consumed[KR, V]:
        return Consumed(serde, self.value_serde, self.timestamp_extractor, self.offset_reset, self.name)

    def with_value_serde(self, serde: Serde[VR] | None) -> Consumed[K, VR]:
        return Consumed(self.key_serde, serde, self.timestamp_extractor, self.offset_reset, self.name)

    def with_timestamp_extractor(self, extractor: Extractor | None) -> Consumed[K, V]:
        return replace(self, timestamp_extractor=extractor)

    def with_offset_reset_policy(self, policy: str) -> Consumed[K, V]:
        if policy not in ("earliest", "latest"):
            raise ValueError(f"offset reset policy must be 'earliest' or 'latest', got {policy!r}")
        return replace(self, offset_reset=policy)

    def with_name(self, name: str) -> Consumed[K, V]:
        return replace(self, name=name)

    def merged(
        self,
        *,
        key_serde: Serde[K] | None = None,
        value_serde: Serde[V] | None = None,
        timestamp_extractor: Extractor | None = None,
    ) -> Consumed[K, V]:
        """A copy with the keyword arguments that are not None applied."""
        if key_serde is None and value_serde is None and timestamp_extractor is None:
            return self
        return Consumed(
            key_serde if key_serde is not None else self.key_serde,
            value_serde if value_serde is not None else self.value_serde,
            timestamp_extractor if timestamp_extractor is not None else self.timestamp_extractor,
            self.offset_reset,
            self.name,
        )
