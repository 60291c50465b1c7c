"""Produced: how `KStream.to` and `through` write a topic (serdes, partitioner, name)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from streams_core.processor.stream_partitioner import StreamPartitioner
from streams_core.serde import Serde

__all__ = ["Produced"]


@dataclass(frozen=True, slots=True)
class Produced:
    """Key and value serdes, a `StreamPartitioner` and the sink's name; None means inherited or default.

    Serdes not given are the stream's own (what the operators upstream know), else the
    configured defaults. Keyword arguments work too: `to("t", value_serde=Serdes.Long())`.
    """

    key_serde: Serde[Any] | None = None
    value_serde: Serde[Any] | None = None
    partitioner: StreamPartitioner | None = None
    name: str | None = None

    @staticmethod
    def with_(
        key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None, partitioner: StreamPartitioner | None = None
    ) -> Produced:
        return Produced(key_serde, value_serde, partitioner)

    @staticmethod
    def as_(name: str) -> Produced:
        return Produced(name=name)

    @staticmethod
    def key_serde_of(serde: Serde[Any]) -> Produced:
        return Produced(key_serde=serde)

    @staticmethod
    def value_serde_of(serde: Serde[Any]) -> Produced:
        return Produced(value_serde=serde)

    def with_key_serde(self, serde: Serde[Any] | None) -> Produced:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde[Any] | None) -> Produced:
        return replace(self, value_serde=serde)

    def with_stream_partitioner(self, partitioner: StreamPartitioner | None) -> Produced:
        return replace(self, partitioner=partitioner)

    def with_name(self, name: str) -> Produced:
        return replace(self, name=name)

    def merged(self, **overrides: Any) -> Produced:
        given = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **given) if given else self
