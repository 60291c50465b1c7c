"""KGroupedTable: a table re-grouped by `KTable.group_by`, ready to be aggregated.

Aggregations receive each source-table update as a retraction of the old value from its old
group and an addition of the new value to its new group (through the repartition topic
`<application.id>-<name>-repartition`), hence the adder / subtractor pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from streams_core.kstream.internals import names
from streams_core.kstream.internals.change import ChangeSerde
from streams_core.kstream.internals.functions import check_callable, count_add, zero
from streams_core.kstream.internals.grouped_aggregation import GroupedAggregation
from streams_core.kstream.internals.ktable_aggregate import KTableAggregate, KTableReduce
from streams_core.kstream.materialized import Materialized
from streams_core.kstream.named import Named, name_of
from streams_core.processor.type_vars import VR, K, V
from streams_core.serde import Serdes

if TYPE_CHECKING:
    from streams_core.kstream.ktable import KTable

__all__ = ["KGroupedTable"]

Named_ = Named | str | None


def _subtract_one(key: object, value: object, count: int) -> int:
    return count - 1


class KGroupedTable(GroupedAggregation[K, V]):
    """A re-grouped table: the repartition-map node, serdes of the group key and values."""

    __slots__ = ()

    def count(self, materialized: Materialized | None = None, named: Named_ = None) -> KTable[K, int]:
        """The number of entries per group."""
        return self._aggregate(names.KTABLE_AGGREGATE, named, materialized, Serdes.Long(),
                               lambda store: KTableAggregate(store, zero, count_add, _subtract_one))  # fmt: skip

    def reduce(
        self,
        adder: Callable[[V, V], V],
        subtractor: Callable[[V, V], V],
        materialized: Materialized | None = None,
        named: Named_ = None,
    ) -> KTable[K, V]:
        """`adder(aggregate, value)` for values joining a group, `subtractor(aggregate, value)` for leaving ones."""
        check_callable(adder, "reduce's adder")
        check_callable(subtractor, "reduce's subtractor")
        return self._aggregate(names.KTABLE_REDUCE, named, materialized, self.value_serde,
                               lambda store: KTableReduce(store, adder, subtractor))  # fmt: skip

    def aggregate(
        self,
        initializer: Callable[[], VR],
        adder: Callable[[K, V, VR], VR],
        subtractor: Callable[[K, V, VR], VR],
        materialized: Materialized | None = None,
        named: Named_ = None,
    ) -> KTable[K, VR]:
        """`adder(key, value, agg)` / `subtractor(key, value, agg)` per group, from `initializer()`."""
        for function, what in ((initializer, "initializer"), (adder, "adder"), (subtractor, "subtractor")):
            check_callable(function, f"aggregate's {what}")
        return self._aggregate(names.KTABLE_AGGREGATE, named, materialized,
                               self._builder.infer(self.value_serde, "value"),
                               lambda store: KTableAggregate(store, initializer, adder, subtractor))  # fmt: skip

    def _upstream(self, store: str, named: Named_, prefix: str) -> tuple[str, str, frozenset[str]]:
        b = self._builder
        given = name_of(named)
        # Java's KGroupedTableImpl: sink and source names from `named` or generated, then the
        # aggregation's name; a named grouping's topic is made once and shared by its aggregations
        sink = b.suffixed_name(given, "-sink", names.KSTREAM_SINK)
        source = b.suffixed_name(given, "-source", names.KSTREAM_SOURCE)
        name = b.processor_name(given, prefix)
        if self._repartition_source is None or self.grouped_name is None:
            topic = (self.grouped_name or store) + names.REPARTITION_TOPIC_SUFFIX
            change_serde = b.bound(ChangeSerde(self.value_serde))
            self._repartition_source = b.table_repartition(self.name, topic, sink, source, self.key_serde, change_serde)
        return name, self._repartition_source, frozenset({self._repartition_source})
