"""StreamsBuilder: where a DSL application starts; `build()` gives the Topology to run.

    builder = StreamsBuilder()
    counts = (builder.stream("TextLinesTopic", key_serde=Serdes.String(), value_serde=Serdes.String())
              .flat_map_values(lambda line: line.lower().split())
              .group_by(lambda key, word: word)
              .count(Materialized.as_("word-count")))
    counts.to_stream().to("WordsWithCountsTopic", value_serde=Serdes.Long())
    topology = builder.build()

Sources are named `KSTREAM-SOURCE-<n>` (or by `Consumed.as_`); a table's store is its
`Materialized` name, else `<topic>-STATE-STORE-<n>`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, overload

from streams_core.config import OPTIMIZATION, optimization, topology_optimizations
from streams_core.errors import TopologyError
from streams_core.kstream.consumed import Consumed, Extractor
from streams_core.kstream.global_ktable import GlobalKTable
from streams_core.kstream.internals import names
from streams_core.kstream.internals.internal_streams_builder import InternalStreamsBuilder
from streams_core.kstream.internals.ktable_processors import KTableSource
from streams_core.kstream.internals.ktable_value_getters import StoreValueGetterSupplier
from streams_core.kstream.internals.materialize import is_versioned, key_value_store, store_name
from streams_core.kstream.internals.send_old_values import SendOldValues
from streams_core.kstream.kstream import KStream
from streams_core.kstream.ktable import KTable
from streams_core.kstream.materialized import Materialized
from streams_core.processor.topology import Topology
from streams_core.processor.type_vars import K, V
from streams_core.serde import Serde

__all__ = ["StreamsBuilder"]

Topics = str | Iterable[str] | re.Pattern[str]


class StreamsBuilder:
    """Creates streams and tables from topics and collects the operators applied to them."""

    def __init__(self) -> None:
        self._internal = InternalStreamsBuilder()

    def __repr__(self) -> str:
        return f"StreamsBuilder(nodes={len(self._internal.itb.node_names)})"

    @overload
    def stream(self, topics: Topics, consumed: Consumed[K, V], *, key_serde: Serde[K] | None = None,
               value_serde: Serde[V] | None = None, timestamp_extractor: Extractor | None = None) -> KStream[K, V]: ...  # fmt: skip

    @overload
    def stream(self, topics: Topics, consumed: None = None, *, key_serde: Serde[K], value_serde: Serde[V],
               timestamp_extractor: Extractor | None = None) -> KStream[K, V]: ...  # fmt: skip

    @overload
    def stream(self, topics: Topics, consumed: None = None, *, key_serde: Serde[K], value_serde: None = None,
               timestamp_extractor: Extractor | None = None) -> KStream[K, Any]: ...  # fmt: skip

    @overload
    def stream(self, topics: Topics, consumed: None = None, *, key_serde: None = None, value_serde: Serde[V],
               timestamp_extractor: Extractor | None = None) -> KStream[Any, V]: ...  # fmt: skip

    @overload
    def stream(self, topics: Topics, consumed: None = None, *, key_serde: None = None, value_serde: None = None,
               timestamp_extractor: Extractor | None = None) -> KStream[Any, Any]: ...  # fmt: skip

    def stream(
        self,
        topics: Topics,
        consumed: Consumed[K, V] | None = None,
        *,
        key_serde: Serde[K] | None = None,
        value_serde: Serde[V] | None = None,
        timestamp_extractor: Extractor | None = None,
    ) -> KStream[K, V]:
        """A stream of the records of `topics` (a name, several names, or a compiled pattern).

        Streaming the same topics (or pattern) again gives a stream of the same source node, as
        Kafka Streams merges such sources (so a stream can be joined with itself).
        """
        c = (consumed or Consumed()).merged(key_serde=key_serde, value_serde=value_serde,
                                            timestamp_extractor=timestamp_extractor)  # fmt: skip
        b = self._internal
        if isinstance(topics, re.Pattern):
            source = b.stream_source((), topics, c)
        else:
            source = b.stream_source((topics,) if isinstance(topics, str) else tuple(topics), None, c)
        name = source.name
        assert name is not None
        return KStream(b, name, source.key_serde, source.value_serde, frozenset({name}))

    @overload
    def table(self, topic: str, *options: Materialized | Consumed[K, V] | None, consumed: Consumed[K, V] | None = None,
              materialized: Materialized | None = None, key_serde: Serde[K], value_serde: Serde[V],
              timestamp_extractor: Extractor | None = None) -> KTable[K, V]: ...  # fmt: skip

    @overload
    def table(self, topic: str, *options: Materialized | Consumed[K, V] | None, consumed: Consumed[K, V],
              materialized: Materialized | None = None, key_serde: Serde[K] | None = None,
              value_serde: Serde[V] | None = None, timestamp_extractor: Extractor | None = None) -> KTable[K, V]: ...  # fmt: skip

    @overload
    def table(self, topic: str, consumed_: Consumed[K, V], /, *options: Materialized | None,
              materialized: Materialized | None = None, key_serde: Serde[K] | None = None,
              value_serde: Serde[V] | None = None, timestamp_extractor: Extractor | None = None) -> KTable[K, V]: ...  # fmt: skip

    @overload
    def table(self, topic: str, *options: Materialized | Consumed[Any, Any] | None,
              consumed: Consumed[Any, Any] | None = None, materialized: Materialized | None = None,
              key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None,
              timestamp_extractor: Extractor | None = None) -> KTable[Any, Any]: ...  # fmt: skip

    def table(
        self,
        topic: str,
        *options: Materialized | Consumed[K, V] | None,
        consumed: Consumed[K, V] | None = None,
        materialized: Materialized | None = None,
        key_serde: Serde[K] | None = None,
        value_serde: Serde[V] | None = None,
        timestamp_extractor: Extractor | None = None,
    ) -> KTable[K, V]:
        """A table of `topic` read as a changelog (latest value per key; None deletes); in a store when
        materialised: named, or needed downstream (joins, `group_by`), as Kafka Streams decides."""
        m, c = self._table_options(options, consumed, materialized, key_serde, value_serde, timestamp_extractor)
        b = self._internal
        store = store_name(b, m, f"{topic}-")
        source, name = self._source_names(c)
        b.add_source(source, (topic,), None, m.key_serde, m.value_serde, c.timestamp_extractor)
        builder = key_value_store(b, store, m, m.key_serde, m.value_serde)
        old_values = SendOldValues("source", m.store_name is not None)
        b.add_processor(name, lambda: KTableSource(store if old_values.materialized else None), (source,))
        b.deferred_store(name, builder, old_values, None if is_versioned(m) else topic)
        return KTable(b, name, m.key_serde, m.value_serde, frozenset({source}), StoreValueGetterSupplier(store), store,
                      queryable=m.store_name, old_values=old_values, versioned=is_versioned(m))  # fmt: skip

    @overload
    def global_table(self, topic: str, *options: Materialized | Consumed[K, V] | None, consumed: Consumed[K, V] | None = None,
                     materialized: Materialized | None = None, key_serde: Serde[K], value_serde: Serde[V],
                     timestamp_extractor: Extractor | None = None) -> GlobalKTable[K, V]: ...  # fmt: skip

    @overload
    def global_table(self, topic: str, *options: Materialized | Consumed[Any, Any] | None,
                     consumed: Consumed[Any, Any] | None = None, materialized: Materialized | None = None,
                     key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None,
                     timestamp_extractor: Extractor | None = None) -> GlobalKTable[Any, Any]: ...  # fmt: skip

    def global_table(
        self,
        topic: str,
        *options: Materialized | Consumed[K, V] | None,
        consumed: Consumed[K, V] | None = None,
        materialized: Materialized | None = None,
        key_serde: Serde[K] | None = None,
        value_serde: Serde[V] | None = None,
        timestamp_extractor: Extractor | None = None,
    ) -> GlobalKTable[K, V]:
        """A table of all of `topic` on every instance; its store needs no changelog (the topic is one)."""
        m, c = self._table_options(options, consumed, materialized, key_serde, value_serde, timestamp_extractor)
        if is_versioned(m):
            raise TopologyError("GlobalTables cannot be versioned.")
        b = self._internal
        store = store_name(b, m, f"{topic}-")
        source, name = self._source_names(c)
        builder = key_value_store(b, store, m.with_logging_disabled(), m.key_serde, m.value_serde)
        b.itb.add_global_store(builder, source, topic, name, lambda: KTableSource(store), m.key_serde, m.value_serde,
                               c.timestamp_extractor)  # fmt: skip
        return GlobalKTable(b, store)

    def add_state_store(self, store_builder: Any) -> StreamsBuilder:
        """A store for `KStream.process(supplier, "store-name")` processors to use."""
        self._internal.itb.add_state_store(store_builder)
        return self

    def add_global_store(
        self,
        store_builder: Any,
        topic: str,
        state_update_supplier: Any,
        consumed: Consumed[Any, Any] | None = None,
        *,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        timestamp_extractor: Extractor | None = None,
    ) -> StreamsBuilder:
        """A global store filled from `topic` by the processor `state_update_supplier` makes (logging is turned off)."""
        c = (consumed or Consumed()).merged(key_serde=key_serde, value_serde=value_serde,
                                            timestamp_extractor=timestamp_extractor)  # fmt: skip
        b = self._internal
        source, name = self._source_names(c)
        b.itb.add_global_store(store_builder.with_logging_disabled(), source, topic, name, state_update_supplier,
                               c.key_serde, c.value_serde, c.timestamp_extractor)  # fmt: skip
        return self

    def build(self, props: Mapping[str, Any] | None = None) -> Topology:
        """The Topology of everything built so far (the same object on every call).

        `props` (a dict or StreamsConfig) may ask for `topology.optimization` (`all`, or a comma list
        of `reuse.ktable.source.topics`, `merge.repartition.topics`, `single.store.self.join`), applied on the first build that
        asks, as Kafka's `build(Properties)`; without it nothing is optimized (Kafka's default, `none`).
        Raises ValueError for what Kafka Streams rejects when it writes the topology (a stream-table
        join's grace period over a table not versioned, or a history retention shorter than it).
        """
        if props is not None and props.get(OPTIMIZATION) is not None:
            value = props[OPTIMIZATION]
            optimization(OPTIMIZATION, value)  # a wrong value raises ConfigError naming the key
            self._internal.optimize(topology_optimizations(value))
        self._internal.run_build_checks()
        return self._internal.topology

    def _source_names(self, consumed: Consumed[Any, Any]) -> tuple[str, str]:
        """A table's or global store's source and processor: `<name>-source` and `<name>` when the
        Consumed is named, else generated; two indexes used either way (Java's `suffixWithOrElseGet`
        and `orElseGenerateWithPrefix`)."""
        b = self._internal
        return (b.suffixed_name(consumed.name, "-source", names.KSTREAM_SOURCE),
                b.processor_name(consumed.name, names.KTABLE_SOURCE))  # fmt: skip

    @staticmethod
    def _table_options(
        options: tuple[Materialized | Consumed[K, V] | None, ...],
        consumed: Consumed[K, V] | None,
        materialized: Materialized | None,
        key_serde: Serde[K] | None,
        value_serde: Serde[V] | None,
        timestamp_extractor: Extractor | None,
    ) -> tuple[Materialized, Consumed[K, V]]:
        """Java's `table(topic)`, `(topic, Consumed)`, `(topic, Materialized)`, `(topic, Consumed, Materialized)`."""
        if len(options) > 2:
            raise TypeError(f"table takes at most a Consumed and a Materialized after the topic, got {options!r}")
        for option in options:
            if isinstance(option, Consumed):
                if consumed is not None:
                    raise TopologyError("pass the Consumed once (positionally or as consumed=)")
                consumed = option
            elif isinstance(option, Materialized):
                if materialized is not None:
                    raise TopologyError("pass the Materialized once (positionally or as materialized=)")
                materialized = option
            elif option is not None:
                raise TypeError(f"expected a Materialized or a Consumed, got {option!r}")
        c = (consumed or Consumed()).merged(key_serde=key_serde, value_serde=value_serde,
                                            timestamp_extractor=timestamp_extractor)  # fmt: skip
        return (materialized or Materialized()).merged_serdes(c.key_serde, c.value_serde), c
