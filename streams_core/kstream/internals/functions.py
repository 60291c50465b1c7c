"""How the DSL calls user functions, decided once when the operator is written.

Java overloads `mapValues(ValueMapper)` and `mapValues(ValueMapperWithKey)`; here one method
takes either: a function with one more required positional parameter than the value-only form
gets the key first. `map_values(lambda v: ...)` or `map_values(lambda k, v: ...)`;
`join(other, lambda left, right: ...)` or `lambda key, left, right: ...`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["check_callable", "count_add", "takes_key", "with_key", "zero"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def check_callable(function: Any, what: str) -> None:
    if not callable(function):
        raise TypeError(f"{what} must be callable, got {function!r}")


def takes_key(function: Callable[..., Any], value_arity: int) -> bool:
    """True when `function` requires `value_arity + 1` positional arguments (the key comes first)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return False
    parameters = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return False
    required = [p for p in parameters if p.kind in _POSITIONAL and p.default is inspect.Parameter.empty]
    return len(required) > value_arity


def with_key(function: Callable[..., Any], value_arity: int, what: str) -> Callable[..., Any]:
    """`function` as a function of (key, *values), wrapping a value-only one."""
    check_callable(function, what)
    if takes_key(function, value_arity):
        return function
    if value_arity == 1:
        return lambda key, value: function(value)
    if value_arity == 2:
        return lambda key, left, right: function(left, right)
    return lambda key, *values: function(*values)


def zero() -> int:
    """A count's initializer."""
    return 0


def count_add(key: object, value: object, count: int) -> int:
    """A count's aggregator: one more."""
    return count + 1
