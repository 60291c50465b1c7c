"""InternalStreamsBuilder: the state behind a StreamsBuilder and its KStreams and KTables.

It translates the DSL straight into `InternalTopologyBuilder` calls (no intermediate graph):
each operator adds its processors, stores and topics when it is called. It generates names
(one counter for nodes and stores, as Java's), registers the serdes completed at build time
(`BoundSerde`) and builds repartition sub-graphs.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

from streams_core.config import (
    MERGE_REPARTITION_TOPICS,
    OPTIMIZATION,
    REUSE_KTABLE_SOURCE_TOPICS,
    SINGLE_STORE_SELF_JOIN,
    topology_optimizations,
)
from streams_core.errors import TopologyError
from streams_core.kstream.consumed import Consumed
from streams_core.kstream.internals import names
from streams_core.kstream.internals.dsl_serde import BoundSerde, infer
from streams_core.kstream.internals.repartition_optimizer import OptimizableRepartition, merge_repartition_topics
from streams_core.kstream.internals.self_join_optimizer import SelfJoinCandidate, rewrite_single_store_self_joins
from streams_core.kstream.named import Named, name_of
from streams_core.processor.internals.stateless_processors import KStreamFilter
from streams_core.processor.timestamp_extractor import FailOnInvalidTimestamp
from streams_core.processor.topology import Topology
from streams_core.processor.topology_description import SinkDescription, SourceDescription
from streams_core.serde import Serde

if TYPE_CHECKING:
    from streams_core.kstream.internals.send_old_values import SendOldValues
    from streams_core.kstream.materialized import Materialized

__all__ = ["InternalStreamsBuilder"]

log = logging.getLogger(__name__)

S = TypeVar("S", bound=Serde[Any] | None)
B = TypeVar("B")

_RECORD_TIMESTAMP = FailOnInvalidTimestamp()


_KEY_CHANGING = frozenset({names.KSTREAM_KEY_SELECT, names.KSTREAM_MAP, names.KSTREAM_FLATMAP})
_VALUE_CHANGING = frozenset({names.KSTREAM_MAPVALUES, names.KSTREAM_FLATMAPVALUES})


def _same(a: object, b: object) -> bool:
    """Whether two serdes (or extractors, policies) are the same: equal, or of one type printing alike."""
    return a is b or a == b or (type(a) is type(b) and repr(a) == repr(b))


def _has_key(key: object, value: object) -> bool:
    return key is not None


def _any_key(key: object, value: object) -> bool:
    return True


@dataclass(slots=True)
class _TableSourceStore:
    """The store of a table read from a topic, and whether it was added and uses the topic as changelog."""

    builder: Any
    topic: str | None
    added: bool = False
    reused: bool = False


class InternalStreamsBuilder:
    """Names, serdes and the topology a StreamsBuilder's operators write into."""

    def __init__(self) -> None:
        self.topology = Topology()
        self.itb = self.topology.internal_topology_builder
        self._index = 0
        self._bound: list[BoundSerde[Any]] = []
        self._dsl_stores: list[Any] = []
        self._relaxed_joins: set[str] = set()
        self._caching: list[bool] = []
        self._build_checks: list[Callable[[], None]] = []
        self._stream_sources: dict[object, Consumed[Any, Any]] = {}
        self._declared_partitions: dict[str, tuple[str, int]] = {}
        self._copartitioned: list[frozenset[str]] = []
        self._table_sources: list[_TableSourceStore] = []
        self.key_changing_nodes: dict[str, None] = {}
        """Nodes that change keys (`select_key`, `map`, `flat_map`), in the order they were added."""
        self.value_changing_nodes: set[str] = set()
        self.merge_nodes: list[str] = []
        self.optimizable_repartitions: list[OptimizableRepartition] = []
        self.self_join_candidates: list[SelfJoinCandidate] = []
        """Inner joins of a node with itself, for `single.store.self.join`."""
        self.record_timestamp = _RECORD_TIMESTAMP
        self._reuse_source_topics = False
        self._optimized = False
        self._warned = False
        self.itb.on_build(self._bind)

    def at_build(self, check: Callable[[], None]) -> None:
        """Run `check` in `StreamsBuilder.build()`: what Java checks while writing the topology
        (when the whole topology is known), not when the operator is called."""
        self._build_checks.append(check)

    def run_build_checks(self) -> None:
        self._check_declared_partitions()
        for check in self._build_checks:
            check()

    def _check_declared_partitions(self) -> None:
        """Joined repartition topics declared with different partition counts cannot be co-partitioned
        (Java's CopartitionedTopicsEnforcer refuses them when the application starts; they are known now)."""
        for group in self._copartitioned:
            declared = dict(self._declared_partitions[source] for source in group if source in self._declared_partitions)
            if len(set(declared.values())) > 1:
                listed = ", ".join(f"{topic}={count}" for topic, count in sorted(declared.items()))
                raise TopologyError(f"Following topics do not have the same number of partitions: [{{{listed}}}]")

    def _bind(self, config: Any) -> None:
        for serde in self._bound:
            serde.bind(config)
        self._strip_caching(config)
        self._warn_unapplied_optimization(config)

    def _warn_unapplied_optimization(self, config: Any) -> None:
        """Kafka applies `topology.optimization` in `StreamsBuilder.build(props)` only; say so once when
        an application's config asks for it but its topology was built without it."""
        try:
            asked = topology_optimizations(config[OPTIMIZATION])
        except (KeyError, TypeError):
            return
        if asked and not self._optimized and not self._warned:
            self._warned = True
            log.warning(
                "topology.optimization=%s is in the config, but the topology was built without it: pass the "
                "properties to StreamsBuilder.build(props) to optimize it (as in Kafka Streams)", config[OPTIMIZATION],
            )

    def dsl_store(self, store_builder: B) -> B:
        """Register a store builder of a DSL operator (its caching layer goes when the cache size is 0)."""
        self._dsl_stores.append(store_builder)
        self._caching.append(bool(cast(Any, store_builder).caching_enabled))
        return store_builder

    def _strip_caching(self, config: Any) -> None:
        """As Java's `rewriteTopology`: `statestore.cache.max.bytes=0` builds the DSL's stores without a cache."""
        try:
            no_cache = config["statestore.cache.max.bytes"] == 0
        except (KeyError, TypeError):
            no_cache = False
        for store_builder, caching in zip(self._dsl_stores, self._caching, strict=True):
            if caching and not no_cache:
                store_builder.with_caching_enabled()
            else:
                store_builder.with_caching_disabled()

    # -- names --------------------------------------------------------------------------------

    def new_processor_name(self, prefix: str) -> str:
        name = f"{prefix}{self._index:010d}"
        self._index += 1
        return name

    def new_store_name(self, prefix: str) -> str:
        name = f"{prefix}{names.STATE_STORE}{self._index:010d}"
        self._index += 1
        return name

    def burn_count_store_name(self, materialized: Materialized | None) -> None:
        """Java's `count(Materialized)` generates a store name it never uses when the Materialized
        names none (kept there for compatibility), so the numbers after it are one higher."""
        if materialized is not None and materialized.store_name is None:
            self.new_store_name(names.KSTREAM_AGGREGATE)

    def processor_name(self, named: Named | str | None, prefix: str) -> str:
        """The user's name, else a generated one; an index is used either way (Java's
        `orElseGenerateWithPrefix` burns it for a given name, so later numbers match)."""
        generated = self.new_processor_name(prefix)
        return name_of(named) or generated

    def suffixed_name(self, name: str | None, suffix: str, prefix: str) -> str:
        """`<name><suffix>`, else a generated name; an index is used either way (Java's `suffixWithOrElseGet`)."""
        generated = self.new_processor_name(prefix)
        return generated if name is None else name + suffix

    # -- serdes -------------------------------------------------------------------------------

    def bound(self, serde: S) -> S:
        """Register a serde completed from the config at build time (others pass through)."""
        if isinstance(serde, BoundSerde) and serde not in self._bound:
            self._bound.append(serde)
        return serde

    def infer(self, serde: Serde[Any] | None, role: str) -> Serde[Any] | None:
        """The serde kept as a guess by an operator that may change the type (see dsl_serde)."""
        return self.bound(infer(serde, role))

    # -- nodes --------------------------------------------------------------------------------

    def add_processor(
        self,
        name: str,
        factory: object,
        parents: Iterable[str],
        stores: Iterable[Any] = (),
        connected: Iterable[str] = (),
    ) -> None:
        """A processor; `stores` are store builders added with it, `connected` names of existing stores."""
        self.itb.add_processor(name, factory, tuple(parents))
        for store_builder in stores:
            self.itb.add_state_store(store_builder, (name,))
        connected = tuple(dict.fromkeys(connected))
        if connected:
            self.itb.connect_processor_and_state_stores(name, connected)

    def add_source(
        self,
        name: str,
        topics: tuple[str, ...],
        pattern: Any,
        key_serde: Serde[Any] | None,
        value_serde: Serde[Any] | None,
        timestamp_extractor: Any,
    ) -> None:
        self.itb.add_source(name, topics, pattern, key_serde, value_serde, timestamp_extractor)

    def stream_source(self, topics: tuple[str, ...], pattern: re.Pattern[str] | None, consumed: Consumed[Any, Any]) -> Consumed[Any, Any]:
        """The source of `StreamsBuilder.stream`: a new one, or the one an earlier `stream()` of the same
        topics (in any order) or pattern made, as Java's `mergeDuplicateSourceNodes` merges them; what
        the returned Consumed says (its name is the node's) is what the stream reads with.

        A name index is used either way, as Java's. Overlapping but unequal topic sets raise Java's
        TopologyError; so do differing reset policies (Java's), serdes or timestamp extractors (Java
        would read both streams with the first's).
        """
        name = self.processor_name(consumed.name, names.KSTREAM_SOURCE)
        key: object = ("pattern", pattern.pattern, pattern.flags) if pattern is not None else frozenset(topics)
        existing = self._stream_sources.get(key)
        if existing is None:
            if pattern is None:
                for other in self._stream_sources:
                    if isinstance(other, frozenset) and other & frozenset(topics):
                        raise TopologyError(
                            f"Two source nodes are subscribed to overlapping but not equal input topics: "
                            f"{sorted(other)} and {sorted(topics)}"
                        )
            self.add_source(name, topics, pattern, consumed.key_serde, consumed.value_serde, consumed.timestamp_extractor)
            merged = replace(consumed, name=name)
            self._stream_sources[key] = merged
            return merged
        for what, mine, theirs in (
            ("reset policy", consumed.offset_reset, existing.offset_reset),
            ("key serde", consumed.key_serde, existing.key_serde),
            ("value serde", consumed.value_serde, existing.value_serde),
            ("timestamp extractor", consumed.timestamp_extractor, existing.timestamp_extractor),
        ):
            if not _same(mine, theirs) and (what == "reset policy" or mine is not None):
                raise TopologyError(
                    f"source {existing.name!r} already reads {sorted(topics) if pattern is None else pattern.pattern!r} "
                    f"with {what} {theirs!r}; another stream() of it asks for {mine!r} (one source node reads a "
                    "topic: give both the same options)"
                )
        log.debug("stream() of %s merged into source %s", key, existing.name)
        return existing

    def repartition(
        self,
        parent: str,
        prefix: str,
        key_serde: Serde[Any] | None,
        value_serde: Serde[Any] | None,
        *,
        number_of_partitions: int | None = None,
        partitioner: Any = None,
        null_key_filter: bool = True,
        optimizable: bool = True,
    ) -> str:
        """Send `parent`'s records through the internal topic `<prefix>-repartition`; the new source's name.

        A filter before the sink drops records with a None key (they cannot be partitioned by
        key), unless a left or outer join downstream wants them (KIP-962): decided when the
        topology is complete, as Java's `rewriteRepartitionNodes`. The nodes are named
        `<topic>-filter`, `<topic>-sink` and `<topic>-source`, or get generated names when the
        prefix was generated (as Kafka Streams does). `KTable.group_by` has no filter.
        `optimizable`: `merge.repartition.topics` may merge it (not `KStream.repartition()`'s).
        """
        topic = prefix if prefix.endswith(names.REPARTITION_TOPIC_SUFFIX) else prefix + names.REPARTITION_TOPIC_SUFFIX
        sink = self.new_processor_name(names.KSTREAM_SINK)
        null_filter = self.new_processor_name(names.KSTREAM_FILTER)
        source = self.new_processor_name(names.KSTREAM_SOURCE)
        if not names.GENERATED_NAME.fullmatch(prefix):
            sink, null_filter, source = f"{topic}-sink", f"{topic}-filter", f"{topic}-source"
        self.itb.add_internal_topic(topic, number_of_partitions)
        upstream = parent
        if null_key_filter:
            self.itb.add_processor(null_filter, lambda: KStreamFilter(self.null_key_predicate(null_filter), False),
                                   (parent,))  # fmt: skip
            upstream = null_filter
        self.itb.add_sink(sink, topic, (upstream,), key_serde, value_serde, partitioner)
        self.itb.add_source(source, (topic,), None, key_serde, value_serde, _RECORD_TIMESTAMP)
        if number_of_partitions is not None:
            self._declared_partitions[source] = (topic, number_of_partitions)
        if optimizable:
            self.optimizable_repartitions.append(OptimizableRepartition(
                parent, null_filter if null_key_filter else None, sink, source, topic, key_serde, value_serde
            ))  # fmt: skip
        log.debug("repartition topic %s: %s -> %s", topic, parent, source)
        return source

    def burn_repartition_names(self) -> None:
        """Java generates a repartition's three node names even when it reuses an existing one."""
        for prefix in (names.KSTREAM_SINK, names.KSTREAM_FILTER, names.KSTREAM_SOURCE):
            self.new_processor_name(prefix)

    def table_repartition(
        self, parent: str, topic: str, sink: str, source: str, key_serde: Serde[Any] | None, value_serde: Serde[Any]
    ) -> str:
        """`KTable.group_by`'s repartition topic: a sink and a source, no null-key filter (Java's
        GroupedTableOperationRepartitionNode)."""
        self.itb.add_internal_topic(topic, None)
        self.itb.add_sink(sink, topic, (parent,), key_serde, value_serde, None)
        self.itb.add_source(source, (topic,), None, key_serde, value_serde, _RECORD_TIMESTAMP)
        return source

    def deferred_store(
        self, processor_name: str, store_builder: Any, old_values: SendOldValues, source_topic: str | None = None
    ) -> None:
        """A source table's store, added to the topology once the table is materialised (named,
        or needed by a join, `group_by`, ...: as Java decides); never for a table nobody needs.

        `source_topic`: the table reads it directly (`StreamsBuilder.table`, not versioned), so under
        `reuse.ktable.source.topics` it is the store's changelog (Java's TableSourceNode).
        """
        source = _TableSourceStore(store_builder, source_topic)
        if source_topic is not None:
            self._table_sources.append(source)

        def add() -> None:
            self.itb.add_state_store(store_builder, (processor_name,))
            source.added = True
            if self._reuse_source_topics:
                self._reuse_source_topic(source)

        old_values.when_materialized(add)

    def optimize(self, optimizations: frozenset[str]) -> None:
        """Apply `topology.optimization` (Java's `buildAndOptimizeTopology`), once: later calls change nothing."""
        if self._optimized:
            return
        self._optimized = True
        if REUSE_KTABLE_SOURCE_TOPICS in optimizations:
            self._reuse_source_topics = True
            for source in self._table_sources:
                if source.added:
                    self._reuse_source_topic(source)
        if MERGE_REPARTITION_TOPICS in optimizations:
            merge_repartition_topics(self)
        if SINGLE_STORE_SELF_JOIN in optimizations:
            rewrite_single_store_self_joins(self.itb, self.self_join_candidates)
        log.debug("topology optimized: %s", sorted(optimizations))

    def _reuse_source_topic(self, source: _TableSourceStore) -> None:
        """The table's topic is its store's changelog: no `-changelog` topic; restores read the topic."""
        if source.reused or source.topic is None:
            return
        source.reused = True
        source.builder.with_logging_disabled()
        self.itb.connect_source_store_and_topic(source.builder.name, source.topic)

    def note_operation(self, name: str, prefix: str) -> None:
        """Remember what the node `name`, added by the operator of `prefix`, means to the optimizer."""
        if prefix in _KEY_CHANGING:
            self.key_changing_nodes[name] = None
        elif prefix in _VALUE_CHANGING:
            self.value_changing_nodes.add(name)
        elif prefix == names.KSTREAM_MERGE:
            self.merge_nodes.append(name)

    def replaced_source(self, old: str, new: str) -> None:
        """An optimization replaced the source `old` by `new`: co-partitioning checks follow it."""
        self._copartitioned = [frozenset(new if n == old else n for n in group) for group in self._copartitioned]
        if old in self._declared_partitions:
            self._declared_partitions[new] = self._declared_partitions.pop(old)

    def relaxed_null_key_join(self, name: str) -> None:
        """`name` is a left or outer join node: repartition topics upstream of it keep None keys (KIP-962)."""
        self._relaxed_joins.add(name)

    def null_key_predicate(self, filter_name: str) -> Callable[[object, object], bool]:
        """Keep every record when a relaxed join is downstream of `filter_name`, else only keyed ones."""
        if self._relaxed_joins and self._reaches_relaxed_join(filter_name):
            return _any_key
        return _has_key

    def _reaches_relaxed_join(self, start: str) -> bool:
        """Whether a relaxed join is downstream of `start`, following sinks to the sources of their topics."""
        children: dict[str, list[str]] = {}
        readers: dict[str, list[str]] = {}
        sink_topics: dict[str, str] = {}
        for subtopology in self.itb.describe().subtopologies:
            for node in subtopology.nodes:
                children[node.name] = [child.name for child in node.successors]
                if isinstance(node, SourceDescription):
                    for topic in node.topics:
                        readers.setdefault(topic, []).append(node.name)
                elif isinstance(node, SinkDescription) and node.topic is not None:
                    sink_topics[node.name] = node.topic
        seen: set[str] = set()
        pending = [start]
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in self._relaxed_joins:
                return True
            pending.extend(children.get(name, ()))
            sink_topic = sink_topics.get(name)
            if sink_topic is not None:
                pending.extend(readers.get(sink_topic, ()))
        return False

    def copartition(self, source_nodes: Iterable[str]) -> None:
        """The topics of these sources are joined: they must be co-partitioned."""
        source_nodes = tuple(source_nodes)
        self.itb.copartition_sources(source_nodes)
        self._copartitioned.append(frozenset(source_nodes))
