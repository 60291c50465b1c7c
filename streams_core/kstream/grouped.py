"""Grouped: serdes and name of a grouping (its repartition topic, when one is needed)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from streams_core.kstream.internals.names import check_topic_name
from streams_core.serde import Serde

__all__ = ["Grouped"]


@dataclass(frozen=True, slots=True)
class Grouped:
    """`Grouped.with_(key_serde, value_serde)`, `Grouped.as_("name")`.

    The serdes write and read the repartition topic and default the aggregate store's key
    serde; the name makes the repartition topic `<application.id>-<name>-repartition`.
    """

    key_serde: Serde[Any] | None = None
    value_serde: Serde[Any] | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.name is not None:
            check_topic_name(self.name, "Grouped name")

    @staticmethod
    def with_(
        key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None, name: str | None = None
    ) -> Grouped:
        return Grouped(key_serde, value_serde, name)

    @staticmethod
    def as_(name: str) -> Grouped:
        return Grouped(name=name)

    def with_key_serde(self, serde: Serde[Any] | None) -> Grouped:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde[Any] | None) -> Grouped:
        return replace(self, value_serde=serde)

    def with_name(self, name: str) -> Grouped:
        return replace(self, name=name)

    def merged(self, **overrides: Any) -> Grouped:
        given = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **given) if given else self
