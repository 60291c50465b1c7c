"""Named: the name of the processor an operator adds (instead of a generated one)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Named"]


@dataclass(frozen=True, slots=True)
class Named:
    """`Named.as_("filter-bots")`: the operator's processor is called "filter-bots" in `describe()`.

    Operators also take the name as a plain string (`named="filter-bots"`).
    """

    name: str

    @staticmethod
    def as_(name: str) -> Named:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a processor name must be a non-empty string, got {name!r}")
        return Named(name)

    def with_name(self, name: str) -> Named:
        return Named.as_(name)


def name_of(named: Named | str | None) -> str | None:
    """The name given by a `Named`, a string or None."""
    if named is None:
        return None
    if isinstance(named, Named):
        return named.name
    return Named.as_(named).name
