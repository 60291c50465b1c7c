"""EmitStrategy (KIP-825): when a windowed aggregation forwards its results.

`on_window_update()` (the default) forwards every update of a window, as the aggregation has
always done; `on_window_close()` forwards each window once, when stream time passes its end
plus the grace period, and nothing before. Set with `TimeWindowedKStream.emit_strategy(...)`
or `SessionWindowedKStream.emit_strategy(...)`.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, TypeVar

__all__ = ["EmitStrategy", "StrategyType", "with_emit_strategy"]

W = TypeVar("W")


class StrategyType(Enum):
    """Java's `EmitStrategy.StrategyType`."""

    ON_WINDOW_UPDATE = 0
    ON_WINDOW_CLOSE = 1


class EmitStrategy:
    """An immutable choice of `StrategyType`; build it with the two static methods."""

    __slots__ = ("_type",)

    def __init__(self, strategy_type: StrategyType) -> None:
        self._type = strategy_type

    @staticmethod
    def on_window_update() -> EmitStrategy:
        """Forward every update of a window (the default)."""
        return _ON_UPDATE

    @staticmethod
    def on_window_close() -> EmitStrategy:
        """Forward each window's final result once, when it closes (end + grace <= stream time)."""
        return _ON_CLOSE

    def type(self) -> StrategyType:
        return self._type

    @property
    def emits_on_close(self) -> bool:
        return self._type is StrategyType.ON_WINDOW_CLOSE

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EmitStrategy) and other._type is self._type

    def __hash__(self) -> int:
        return hash(self._type)

    def __repr__(self) -> str:
        return f"EmitStrategy.{self._type.name.lower()}()"


_ON_UPDATE = EmitStrategy(StrategyType.ON_WINDOW_UPDATE)
_ON_CLOSE = EmitStrategy(StrategyType.ON_WINDOW_CLOSE)


def with_emit_strategy(windowed: W, emit_strategy: EmitStrategy) -> W:
    """A copy of a windowed stream (time or session) that aggregates with `emit_strategy`."""
    if not isinstance(emit_strategy, EmitStrategy):
        raise TypeError(f"emit_strategy takes an EmitStrategy, got {emit_strategy!r}")
    source: Any = windowed
    kind: Any = type(windowed)
    copy: Any = kind(source._grouped, source.windows)
    copy._emit_strategy = emit_strategy
    return copy  # type: ignore[no-any-return]
