"""AbstractStoreBuilder: the flags every store builder carries (caching, logging and its config).

`build()` stacks the layers as Kafka Streams' builders do:
    Metered( Caching( ChangeLogging( bytes store from the supplier ) ) )
each builder's `_wrap_logging` / `_wrap_caching` adds a layer when its flag is on.
"""

from __future__ import annotations

import logging
from typing import Any, Generic, TypeVar

from streams_core.common.store import StateStore
from streams_core.serde import Serde
from streams_core.state.internals.store_names import validate_store_name

S = TypeVar("S", bound=StateStore)
B = TypeVar("B", bound="AbstractStoreBuilder[Any]")

__all__ = ["AbstractStoreBuilder"]

log = logging.getLogger(__name__)


class AbstractStoreBuilder(Generic[S]):
    """Name, serdes and layer flags; logging on and caching off by default, as in Kafka Streams."""

    def __init__(self, name: str, key_serde: Serde[Any] | None, value_serde: Serde[Any] | None) -> None:
        self._name = validate_store_name(name)
        for what, serde in (("key", key_serde), ("value", value_serde)):
            if serde is not None and not isinstance(serde, Serde):
                raise TypeError(f"store {name!r}: the {what} serde must be a Serde or None, got {serde!r}")
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._caching_enabled = False
        self._logging_enabled = True
        self._log_config: dict[str, str] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def key_serde(self) -> Serde[Any] | None:
        return self._key_serde

    @property
    def value_serde(self) -> Serde[Any] | None:
        return self._value_serde

    @property
    def caching_enabled(self) -> bool:
        return self._caching_enabled

    @property
    def logging_enabled(self) -> bool:
        return self._logging_enabled

    def log_config(self) -> dict[str, str]:
        """Topic configs for the changelog (e.g. {"min.insync.replicas": "2"}); a copy."""
        return dict(self._log_config)

    def with_caching_enabled(self: B) -> B:
        self._caching_enabled = True
        return self

    def with_caching_disabled(self: B) -> B:
        self._caching_enabled = False
        return self

    def with_logging_enabled(self: B, config: dict[str, str] | None = None) -> B:
        """Back the store with a changelog topic created with `config` topic settings."""
        if config is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in config.items()):
            raise TypeError(f"store {self._name!r}: changelog config keys and values must be strings, got {config!r}")
        self._logging_enabled = True
        self._log_config = dict(config or {})
        return self

    def with_logging_disabled(self: B) -> B:
        """No changelog: the store is not restored after a failure or a move to another instance."""
        self._logging_enabled = False
        self._log_config = {}
        return self

    def build(self) -> S:
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._name!r}, caching={self._caching_enabled}, logging={self._logging_enabled})"
        )
