"""Serdes the DSL completes from the application config when the topology is built.

The DSL often knows a serde only partly when an operator is written: an internal topic or
store of values whose serde was lost by `map_values`, or a composite serde (value and
timestamp, Change, windowed key) around a serde left to the defaults. Those are `BoundSerde`s:
the `StreamsBuilder` registers them and binds them to the config each time a sub-topology is
built (`InternalTopologyBuilder.on_build`), before any record flows.

`InferredSerde` implements the rule documented in docs/dsl.md: where an operator may change
the type of keys or values and no serde is given, the upstream serde is kept as a guess, unless
the application sets `default.key.serde` / `default.value.serde` explicitly, in which case the
default applies (Kafka Streams' rule). The README's word count needs the guess: its words
are strings read with `Serdes.String()`, and no default serde is configured.
"""

from __future__ import annotations

from typing import Any, TypeVar

from streams_core.errors import StreamsError
from streams_core.serde import Serde

__all__ = ["BoundSerde", "InferredSerde", "WrappingSerde", "complete", "infer"]

T = TypeVar("T")


class BoundSerde(Serde[T]):
    """A serde with parts taken from the config by `bind(config)` before use."""

    def bind(self, config: Any) -> None:
        raise NotImplementedError


def complete(serde: Serde[Any] | None, config: Any, role: str) -> Serde[Any]:
    """`serde` bound to the config, or the config's default `role` ("key"/"value") serde for None."""
    if serde is None:
        return config[f"default.{role}.serde"]  # type: ignore[no-any-return]
    if isinstance(serde, BoundSerde):
        serde.bind(config)
    return serde


class InferredSerde(BoundSerde[Any]):
    """The upstream serde kept as a guess, or the explicitly configured default (see the module doc)."""

    name = "Inferred"

    def __init__(self, guess: Serde[Any], role: str) -> None:
        self.guess = guess
        self.role = role
        self._target: Serde[Any] | None = None

    def bind(self, config: Any) -> None:
        key = f"default.{self.role}.serde"
        is_set = getattr(config, "is_set", None)
        if is_set is not None and is_set(key):
            self._target = config[key]
        else:
            self._target = complete(self.guess, config, self.role)
        target = self._target  # bound: calls per record go straight to the target's methods
        self.serialize = target.serialize  # type: ignore[method-assign]
        self.deserialize = target.deserialize  # type: ignore[method-assign]
        self.exact_type = getattr(target, "exact_type", None)
        self.exact_pair = getattr(target, "exact_pair", None)

    @property
    def target(self) -> Serde[Any]:
        target = self._target
        if target is None:
            if isinstance(self.guess, BoundSerde):
                raise StreamsError(f"{self!r} is used before the topology was built")
            return self.guess
        return target

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        return self.target.serialize(topic, data)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        return self.target.deserialize(topic, data)

    def __repr__(self) -> str:
        return f"{self._target or self.guess!r} (inferred from upstream)"


class WrappingSerde(BoundSerde[T]):
    """A serde around another (`inner`), completed from the config's default for `role` at build time."""

    role = "value"

    def __init__(self, inner: Serde[Any] | None) -> None:
        self._given = inner
        self.inner: Any = inner

    def bind(self, config: Any) -> None:
        self.inner = complete(self._given, config, self.role)


def infer(serde: Serde[Any] | None, role: str) -> Serde[Any] | None:
    """The serde an operator that may change the type keeps: a guess from `serde` (None stays None)."""
    if serde is None:
        return None
    if isinstance(serde, InferredSerde):
        return serde
    return InferredSerde(serde, role)
