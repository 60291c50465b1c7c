"""BranchedKStream: the branches of `KStream.split()`.

    branches = (stream.split(Named.as_("route-"))
                .branch(lambda k, v: v.startswith("a"), Branched.as_("a"))
                .branch(lambda k, v: v.startswith("b"), Branched.with_consumer(lambda s: s.to("b")))
                .default_branch(Branched.as_("other")))
    branches["route-a"], branches["route-other"]

A record goes to the first branch whose predicate accepts it, else to the default branch (if
any), else nowhere. Branch names are the split's name followed by the branch's name, or by its
position (1, 2, ...; 0 for an unnamed default branch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic

from streams_core.errors import TopologyError
from streams_core.kstream.branched import Branched
from streams_core.kstream.internals.functions import check_callable
from streams_core.processor.internals.stateless_processors import KStreamBranch, KStreamPassThrough
from streams_core.processor.type_vars import K, V

if TYPE_CHECKING:
    from streams_core.kstream.kstream import KStream

__all__ = ["BranchedKStream"]


class BranchedKStream(Generic[K, V]):
    """Collects branches until `default_branch()` or `no_default_branch()` returns them by name."""

    def __init__(self, stream: KStream[K, V], name: str) -> None:
        self._stream = stream
        self.name = name
        self._predicates: list[Callable[[K, V], object]] = []
        self._children: list[str] = []
        self._default: list[str] = []
        self._branches: dict[str, KStream[Any, Any]] = {}
        self._done = False
        predicates, children, default = self._predicates, self._children, self._default
        stream._builder.add_processor(name, lambda: KStreamBranch(predicates, children, default), (stream.name,))

    def __repr__(self) -> str:
        return f"BranchedKStream({self.name!r}, branches={self._children})"

    def branch(
        self, predicate: Callable[[K, V], object], branched: Branched[K, V] | None = None
    ) -> BranchedKStream[K, V]:
        """Add a branch for the records `predicate(key, value)` accepts (not taken by earlier branches)."""
        self._check_open()
        check_callable(predicate, "a branch predicate")
        child = self._add(branched or Branched(), len(self._children) + 1)
        self._predicates.append(predicate)
        self._children.append(child)
        return self

    def default_branch(self, branched: Branched[K, V] | None = None) -> dict[str, KStream[Any, Any]]:
        """Add the branch of the records no predicate accepted; the branches by name."""
        self._check_open()
        self._default.append(self._add(branched or Branched(), 0))
        self._done = True
        return dict(self._branches)

    def no_default_branch(self) -> dict[str, KStream[Any, Any]]:
        """Drop the records no predicate accepted; the branches by name."""
        self._check_open()
        self._done = True
        return dict(self._branches)

    def _add(self, branched: Branched[K, V], index: int) -> str:
        stream = self._stream
        child = self.name + (branched.name if branched.name is not None else str(index))
        stream._builder.new_processor_name(child)  # Java's createBranch uses an index per branch
        stream._builder.add_processor(child, KStreamPassThrough, (self.name,))
        from streams_core.kstream.kstream import KStream

        branch: KStream[K, V] = KStream(stream._builder, child, stream.key_serde, stream.value_serde, stream.source_nodes,
                         stream.repartition_required)  # fmt: skip
        if branched.consumer is not None:
            branched.consumer(branch)
            return child
        if branched.function is not None:
            result = branched.function(branch)
            if result is not None:
                self._branches[child] = result
            return child
        self._branches[child] = branch
        return child

    def _check_open(self) -> None:
        if self._done:
            raise TopologyError(f"split {self.name!r} is complete: no branch can be added after default_branch()")
