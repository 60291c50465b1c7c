"""Branched: one branch of `KStream.split()`: its name and what to do with the branch stream."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic

from streams_core.processor.type_vars import K, V

if TYPE_CHECKING:
    from streams_core.kstream.kstream import KStream

__all__ = ["Branched"]


@dataclass(frozen=True, slots=True)
class Branched(Generic[K, V]):
    """`Branched.as_("name")`, `Branched.with_function(fn)`, `Branched.with_consumer(fn)`.

    The branch is found in the dict `split()` returns under the split's name followed by the
    branch's name (or its position: 1, 2, ... and 0 for the default branch). A function's
    result (a KStream, or None) replaces the branch stream in that dict; a consumer's branch is
    left out of it.
    """

    name: str | None = None
    function: Callable[[KStream[K, V]], KStream[Any, Any] | None] | None = None
    consumer: Callable[[KStream[K, V]], None] | None = None

    @staticmethod
    def as_(name: str) -> Branched[Any, Any]:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a branch name must be a non-empty string, got {name!r}")
        return Branched(name=name)

    @staticmethod
    def with_function(
        function: Callable[[KStream[K, V]], KStream[Any, Any] | None], name: str | None = None
    ) -> Branched[K, V]:
        if not callable(function):
            raise TypeError(f"Branched.with_function needs a callable, got {function!r}")
        return Branched(name=name, function=function)

    @staticmethod
    def with_consumer(consumer: Callable[[KStream[K, V]], None], name: str | None = None) -> Branched[K, V]:
        if not callable(consumer):
            raise TypeError(f"Branched.with_consumer needs a callable, got {consumer!r}")
        return Branched(name=name, consumer=consumer)
