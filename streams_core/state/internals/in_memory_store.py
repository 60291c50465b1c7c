"""InMemoryStore: the life the in-memory stores (key-value, window, session) share.

Not persistent (the changelog rebuilds them when the task starts), open from `init` to `close`,
entries in a dict `_map` beside sorted indexes that `close` clears. Iterators snapshot the index
entries of their range when they start and read values as they go (`_live`): writes during
iteration are safe, an entry removed before it is reached is skipped, one added is not seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from streams_core.common.store import StateStore, StateStoreContext
from streams_core.errors import InvalidStateStoreError
from streams_core.state.internals.not_open import refuse_reinit
from streams_core.state.internals.sorted_index import SortedIndex

__all__ = ["InMemoryStore"]

E = TypeVar("E")


class InMemoryStore:
    """Mixin (first among the bases) of the in-memory stores; subclasses set `_name`, `_map`,
    `_indexes` (the sorted indexes over `_map`'s keys) and `_open = False` in `__init__`."""

    _name: str
    _map: dict[Any, bytes]
    _indexes: tuple[SortedIndex[Any], ...]
    _open: bool

    if TYPE_CHECKING:

        @property
        def name(self) -> str: ...

        def restore_batch(self, records: Iterable[tuple[bytes, bytes | None]]) -> None: ...

    @property
    def persistent(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        return self._open

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        """Open the store and register it with the task, restoring through `restore_batch`."""
        refuse_reinit(self)
        self._open = True
        context.register(root, self.restore_batch)

    def _live(self, snapshot: list[E]) -> Iterator[tuple[E, bytes]]:
        """(entry, value) for the entries of `snapshot` still held, failing if the store closes meanwhile."""
        values = self._map
        for entry in snapshot:
            if not self._open:
                raise InvalidStateStoreError(f"store {self._name!r} was closed during iteration")
            value = values.get(entry)
            if value is not None:
                yield entry, value

    def flush(self) -> None:
        """Nothing to write: the content lives in memory only."""

    def close(self) -> None:
        self._map = {}
        for index in self._indexes:
            index.clear()
        self._open = False
