"""What a grouped stream and a grouped table share: their fields and how an aggregation is added.

Both hold the node to aggregate from, the group's serdes and the `Grouped` name; an aggregation
of either is a processor with a key-value store whose result is a KTable. Where the records come
from (a repartition topic made once per named grouping, the names burnt on the way) differs, and
each says so in `_upstream`, which also names the processor: the order in which names are taken
is Kafka Streams' (KGroupedStreamImpl, KGroupedTableImpl).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Generic

from streams_core.kstream.internals.ktable_value_getters import StoreValueGetterSupplier
from streams_core.kstream.internals.materialize import key_value_store, store_name
from streams_core.kstream.materialized import Materialized
from streams_core.kstream.named import Named
from streams_core.processor.type_vars import VR, K, V
from streams_core.serde import Serde

if TYPE_CHECKING:
    from streams_core.kstream.internals.internal_streams_builder import InternalStreamsBuilder
    from streams_core.kstream.ktable import KTable

__all__ = ["GroupedAggregation"]

Named_ = Named | str | None


class GroupedAggregation(Generic[K, V]):
    """The fields of a grouping and `_aggregate`; subclasses say where records come from (`_upstream`)."""

    __slots__ = ("_builder", "_repartition_source", "grouped_name", "key_serde", "name", "value_serde")

    def __init__(
        self,
        builder: InternalStreamsBuilder,
        name: str,
        key_serde: Serde[K] | None,
        value_serde: Serde[V] | None,
        grouped_name: str | None,
    ) -> None:
        self._builder = builder
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.grouped_name = grouped_name
        self._repartition_source: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def _upstream(self, store: str, named: Named_, prefix: str) -> tuple[str, str, frozenset[str]]:
        """The aggregation's processor name, the node it reads from and that node's sources."""
        raise NotImplementedError

    def _aggregate(
        self,
        prefix: str,
        named: Named_,
        materialized: Materialized | None,
        value_serde: Serde[VR] | None,
        factory: Callable[[str], object],
    ) -> KTable[K, VR]:
        from streams_core.kstream.ktable import KTable

        b = self._builder
        m = (materialized or Materialized()).merged_serdes(self.key_serde, value_serde)
        store = store_name(b, materialized, prefix)
        name, parent, sources = self._upstream(store, named, prefix)
        builder = key_value_store(b, store, m, m.key_serde, m.value_serde)
        b.add_processor(name, lambda: factory(store), (parent,), stores=(builder,))
        return KTable(b, name, m.key_serde, m.value_serde, sources, StoreValueGetterSupplier(store), store,
                      queryable=m.store_name)  # fmt: skip
