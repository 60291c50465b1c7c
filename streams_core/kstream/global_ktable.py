"""GlobalKTable: a table with the whole of its topic on every application instance.

Made by `StreamsBuilder.global_table`; streams join it with `join(global_table, key_selector,
joiner)` on any key (`key_selector(key, value)` gives the table key), with no co-partitioning
or repartitioning. Its store is queryable by name.
"""

from __future__ import annotations

from typing import Generic

from streams_core.processor.type_vars import K, V

__all__ = ["GlobalKTable"]


class GlobalKTable(Generic[K, V]):
    """A global table: the name of its store (queryable)."""

    __slots__ = ("_builder", "store_name")

    def __init__(self, builder: object, store_name: str) -> None:
        self._builder = builder
        self.store_name = store_name

    @property
    def queryable_store_name(self) -> str:
        return self.store_name

    def __repr__(self) -> str:
        return f"GlobalKTable({self.store_name!r})"
