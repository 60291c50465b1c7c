"""NotOpen: a stand-in for what a store holds only while open (its connection, its serdes).

Any attribute use raises InvalidStateStoreError, so operations on a store that is not
initialised or already closed fail clearly without an "is it open?" test on every call.
"""

from __future__ import annotations

from typing import NoReturn, Protocol

from streams_core.errors import InvalidStateStoreError, ProcessorStateError

__all__ = ["NotOpen", "refuse_reinit"]


class NotOpen:
    """Raises InvalidStateStoreError on any attribute access."""

    __slots__ = ("_store_name",)

    def __init__(self, store_name: str) -> None:
        self._store_name = store_name

    def __getattr__(self, attribute: str) -> NoReturn:
        raise InvalidStateStoreError(f"store {self._store_name!r} is not open")

    def __repr__(self) -> str:
        return f"NotOpen({self._store_name!r})"


class _Openable(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def is_open(self) -> bool: ...


def refuse_reinit(store: _Openable) -> None:
    """Raise ProcessorStateError if `store` is open already: a second `init` would leak the first."""
    if store.is_open:
        raise ProcessorStateError(f"store {store.name!r} is already initialised and open")
