"""How the DSL calls user functions, decided once when the operator is written.

Java overloads `mapValues(ValueMapper)` and `mapValues(ValueMapperWithKey)`; here one method
takes either: a function with one more required positional parameter than the value-only form
gets the key first. `map_values(lambda v: ...)` or `map_values(lambda k, v: ...)`;
`join(other, lambda left, right: ...)` or `lambda key, left, right: ...`.
"""

from __future__ import annotations

import builtins
import dis
import inspect
import types
from collections.abc import Callable
from typing import Any

__all__ = ["built_in_equivalent", "check_callable", "count_add", "takes_key", "with_key", "zero"]

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


# ---- reducers recognised as built-ins (the Spark runner computes them with Spark's own aggregation)

#: Code flags that change what a call does (`__future__` flags, e.g. annotations, do not).
_CALL_FLAGS = (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS | inspect.CO_GENERATOR | inspect.CO_COROUTINE
               | inspect.CO_ITERABLE_COROUTINE | inspect.CO_ASYNC_GENERATOR)  # fmt: skip
_SKIPPED_OPS = frozenset({"RESUME", "NOP", "CACHE", "EXTENDED_ARG"})


def _shape(code: types.CodeType) -> tuple[tuple[str, object], ...]:
    """`code`'s instructions, parameters by position and everything else by value: two functions of
    the same shape compute the same thing from the same arguments and globals."""
    return tuple((i.opname, i.arg if "FAST" in i.opname else i.argval)
                 for i in dis.get_instructions(code) if i.opname not in _SKIPPED_OPS)  # fmt: skip


def _built_in_shapes() -> dict[tuple[tuple[str, object], ...], str]:
    """The recognised bodies of a reducer `(a, b)`: its sum, or its larger or smaller one."""
    bodies = {"sum": ["a + b", "b + a"], "max": ["max(a, b)", "max(b, a)"], "min": ["min(a, b)", "min(b, a)"]}
    for x, y in (("a", "b"), ("b", "a")):  # x if x > y else y: the larger; equal values are the same int
        for larger, smaller in ((">", "<"), (">=", "<=")):
            bodies["max"] += [f"{x} if {x} {larger} {y} else {y}", f"{x} if {y} {smaller} {x} else {y}"]
            bodies["min"] += [f"{x} if {x} {smaller} {y} else {y}", f"{x} if {y} {larger} {x} else {y}"]
    return {_shape(eval(f"lambda a, b: {body}", {}).__code__): name for name, bodies_ in bodies.items() for body in bodies_}


_BUILT_IN_SHAPES = _built_in_shapes()
_GLOBALS = {"max": builtins.max, "min": builtins.min}


def built_in_equivalent(function: object) -> str | None:
    """The built-in `function` equals over integers, "sum" (`operator.add`), "max" or "min": when it
    is a plain function whose whole body is one of the expressions above of its two positional
    parameters (`lambda a, b: a + b`, `def f(x, y): return max(x, y)`, ...), with no defaults, no
    closure, no `*args`, and `max`/`min` the built-ins where it looks them up; else None."""
    if not isinstance(function, types.FunctionType):
        return None
    code = function.__code__
    if (code.co_argcount != 2 or code.co_kwonlyargcount or code.co_flags & _CALL_FLAGS or code.co_freevars
            or function.__closure__ or function.__defaults__ or function.__kwdefaults__):  # fmt: skip
        return None
    name = _BUILT_IN_SHAPES.get(_shape(code))
    its_builtins: dict[str, Any] = getattr(function, "__builtins__", vars(builtins))  # 3.10+; not in typeshed
    for global_name in set(code.co_names) & _GLOBALS.keys():
        looked_up = function.__globals__.get(global_name, its_builtins.get(global_name))
        if looked_up is not _GLOBALS[global_name]:
            return None
    return name
