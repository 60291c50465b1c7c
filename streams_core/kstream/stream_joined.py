"""StreamJoined: serdes, names and stores of a KStream-KStream join."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from streams_core.kstream.internals.names import check_topic_name
from streams_core.serde import Serde

__all__ = ["StreamJoined"]


@dataclass(frozen=True, slots=True)
class StreamJoined:
    """`StreamJoined.with_(key_serde, value_serde, other_value_serde)`.

    The serdes are those of the two window stores (and of the repartition topics when a side
    must be repartitioned). `with_store_name("s")` names the stores `s-this-join-store` and
    `s-other-join-store` (generated otherwise); `with_name("j")` names the processors
    (`j-this-join`, ...). Logging of the join stores is on unless `with_logging_disabled()`.
    `with_this_store_supplier` / `with_other_store_supplier` give a side's window store
    (`Stores.persistent_window_store(name, retention, window_size, True)`: it must keep
    duplicates, its window size must be the join's `before + after` and its retention exactly
    that plus the grace period, as Java's check demands).
    """

    key_serde: Serde[Any] | None = None
    value_serde: Serde[Any] | None = None
    other_value_serde: Serde[Any] | None = None
    name: str | None = None
    store_name: str | None = None
    logging_enabled: bool = True
    log_config: dict[str, str] = field(default_factory=dict)
    in_memory: bool = False
    this_store_supplier: Any = None
    other_store_supplier: Any = None

    def __post_init__(self) -> None:
        for what, value in (("StreamJoined name", self.name), ("StreamJoined store name", self.store_name)):
            if value is not None:
                check_topic_name(value, what)

    @staticmethod
    def with_(
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        other_value_serde: Serde[Any] | None = None,
    ) -> StreamJoined:
        return StreamJoined(key_serde, value_serde, other_value_serde)

    @staticmethod
    def as_(store_name: str) -> StreamJoined:
        return StreamJoined(store_name=store_name)

    def with_key_serde(self, serde: Serde[Any] | None) -> StreamJoined:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde[Any] | None) -> StreamJoined:
        return replace(self, value_serde=serde)

    def with_other_value_serde(self, serde: Serde[Any] | None) -> StreamJoined:
        return replace(self, other_value_serde=serde)

    def with_name(self, name: str) -> StreamJoined:
        return replace(self, name=name)

    def with_store_name(self, store_name: str) -> StreamJoined:
        return replace(self, store_name=store_name)

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> StreamJoined:
        return replace(self, logging_enabled=True, log_config=dict(config or {}))

    def with_logging_disabled(self) -> StreamJoined:
        return replace(self, logging_enabled=False, log_config={})

    def with_this_store_supplier(self, supplier: Any) -> StreamJoined:
        """The window store supplier of this (the left) side."""
        return replace(self, this_store_supplier=supplier)

    def with_other_store_supplier(self, supplier: Any) -> StreamJoined:
        """The window store supplier of the other (the right) side."""
        return replace(self, other_store_supplier=supplier)

    def with_in_memory_stores(self) -> StreamJoined:
        """Keep the join's window stores in memory (rebuilt from their changelogs on start)."""
        return replace(self, in_memory=True)
