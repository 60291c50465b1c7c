"""Change: a table's new and old value, as the DSL forwards it and the suppression buffer keeps it."""

from __future__ import annotations

from typing import Generic, NamedTuple, TypeVar

__all__ = ["Change"]


V = TypeVar("V")


class Change(NamedTuple, Generic[V]):
    """`new_value` replaces `old_value` (None: no value, i.e. an insert or a delete)."""

    new_value: V | None
    old_value: V | None

    def __repr__(self) -> str:
        return f"({self.new_value!r}<-{self.old_value!r})"
