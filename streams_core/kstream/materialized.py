"""Materialized: the store a stateful DSL operator keeps its results in, and how.

    counts = grouped.count(Materialized.as_("word-count"))            # queryable as "word-count"
    Materialized.as_("sums").with_value_serde(Serdes.Long()).with_caching_disabled()
    Materialized.as_(Stores.in_memory_key_value_store("sums"))        # a given store supplier
    Materialized.with_(Serdes.String(), Serdes.Long())                # serdes, generated name

Caching and logging are on by default, as in Kafka Streams; `with_retention` sets how long a
window or session store keeps windows (at least the window size plus its grace period).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from streams_core.kstream.internals.durations import Millis, millis
from streams_core.serde import Serde
from streams_core.state.internals.store_names import validate_store_name

__all__ = ["Materialized", "named_and_materialized"]


@dataclass(frozen=True, slots=True)
class Materialized:
    """Store name (or bytes store supplier), serdes, caching, logging and retention of a DSL store."""

    store_name: str | None = None
    supplier: Any = None
    key_serde: Serde[Any] | None = None
    value_serde: Serde[Any] | None = None
    caching_enabled: bool = True
    logging_enabled: bool = True
    log_config: dict[str, str] = field(default_factory=dict)
    retention_ms: int | None = None
    in_memory: bool = False

    @staticmethod
    def as_(store: Any) -> Materialized:
        """A store named `store`, or built from the store supplier `store` (its name is the store's)."""
        if isinstance(store, str):
            return Materialized(store_name=validate_store_name(store))
        name = getattr(store, "name", None)
        if not isinstance(name, str) or not callable(getattr(store, "get", None)):
            raise TypeError(f"Materialized.as_ takes a store name or a store supplier (Stores.*), got {store!r}")
        return Materialized(store_name=validate_store_name(name), supplier=store)

    @staticmethod
    def with_(key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None) -> Materialized:
        """Serdes only; the store gets a generated name."""
        return Materialized(key_serde=key_serde, value_serde=value_serde)

    def with_key_serde(self, serde: Serde[Any] | None) -> Materialized:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde[Any] | None) -> Materialized:
        return replace(self, value_serde=serde)

    def with_caching_enabled(self) -> Materialized:
        return replace(self, caching_enabled=True)

    def with_caching_disabled(self) -> Materialized:
        return replace(self, caching_enabled=False)

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> Materialized:
        return replace(self, logging_enabled=True, log_config=dict(config or {}))

    def with_logging_disabled(self) -> Materialized:
        return replace(self, logging_enabled=False, log_config={})

    def with_retention(self, retention: Millis) -> Materialized:
        """How long a window or session store keeps windows (ms or timedelta)."""
        return replace(self, retention_ms=millis(retention, "the retention"))

    def with_in_memory_store(self) -> Materialized:
        """Keep the store in memory instead of SQLite (rebuilt from its changelog on start)."""
        return replace(self, in_memory=True)

    def merged_serdes(self, key_serde: Serde[Any] | None, value_serde: Serde[Any] | None) -> Materialized:
        """A copy whose missing serdes are `key_serde` / `value_serde`."""
        return replace(self, key_serde=self.key_serde or key_serde, value_serde=self.value_serde or value_serde)


def named_and_materialized(
    options: tuple[Any, ...], named: Any, materialized: Materialized | None, what: str
) -> tuple[Any, Materialized | None]:
    """Java's overloads taking a `Named` and/or a `Materialized` positionally: sort them out."""
    from streams_core.kstream.named import Named

    for option in options:
        if isinstance(option, Materialized):
            materialized = option
        elif isinstance(option, (Named, str)):
            named = option
        elif option is not None:
            raise TypeError(f"{what} takes a Named and a Materialized, got {option!r}")
    return named, materialized
