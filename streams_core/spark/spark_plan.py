"""SparkPlan: how a topology maps onto Structured Streaming queries, decided (and refused) at plan time.

One query per sub-topology, in dependency order (a sub-topology reading a repartition or
`through` topic runs after the one writing it; a foreign-key join's response topic, read back by
the sub-topology that sent the subscriptions, is run round by round: `QueryPlan.feedback`). A
sub-topology without stores is a fused stateless stage (`mapInArrow`); one whose stores are all
key-value stores of the operators in `KEYED_OPERATORS` is a keyed stage (`transformWithState` by
key); one with operators of `TASK_OPERATORS` (windowed aggregations, suppress, stream-stream and
foreign-key joins: they need the task's stream time or stores across keys), a versioned table, or
a custom processor with stores or a stream-time punctuation, is a task stage
(`transformWithStateInPandas` by source partition).
Anything else raises `UnsupportedOnSparkError` naming the operator and its node, before a query
starts.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from streams_core.config import StreamsConfig
from streams_core.kstream.internals.kstream_session_window_aggregate import KStreamSessionWindowAggregate
from streams_core.kstream.internals.kstream_window_aggregate import KStreamWindowAggregate
from streams_core.kstream.internals.timestamped_stores import TimestampedKeyValueStore
from streams_core.processor.internals.processor_node import SinkNode, SourceNode
from streams_core.processor.processor import PunctuationType
from streams_core.processor.topology import Topology
from streams_core.spark.errors import UnsupportedOnSparkError
from streams_core.spark.native_count import AGGREGATIONS, NO_AGGREGATION, NativeCount, find_native_count
from streams_core.spark.native_stages import NATIVE_STAGES
from streams_core.spark.plan_notes import STAGE_LABELS, stage_reason, writes
from streams_core.spark.subtopology_executor import (
    SCHEDULES,
    PunctuationNeedsTask,
    SubtopologyExecutor,
    SubtopologySpec,
    ship_topology,
)
from streams_core.state.versioned_key_value_store import VersionedKeyValueStore

__all__ = ["KEYED_OPERATORS", "STATELESS_DSL_OPERATORS", "TASK_OPERATORS", "QueryPlan", "SparkPlan", "plan_topology"]

log = logging.getLogger(__name__)

#: Processors with key-value stores the keyed stage runs faithfully: every store access is for
#: the record's own key (class name -> the DSL operator).
KEYED_OPERATORS: Mapping[str, str] = {
    "KStreamAggregate": "count/aggregate",
    "KStreamReduce": "reduce",
    "KTableSource": "table/to_table",
    "KTableFilter": "KTable.filter (materialized)",
    "KTableMapValues": "KTable.map_values (materialized)",
    "KStreamKTableJoin": "KStream.join/left_join (stream-table)",
    "KTableKTableJoin": "KTable.join/left_join/outer_join",
    "KTableKTableJoinMerger": "KTable.join/left_join/outer_join",
    "KTableAggregate": "KGroupedTable.aggregate/count",
    "KTableReduce": "KGroupedTable.reduce",
}

#: Processors the task stage runs: they keep stream time per task, or read stores across keys
#: (class name -> the DSL operator).
TASK_OPERATORS: Mapping[str, str] = {
    "KStreamWindowAggregate": "windowed_by(TimeWindows).aggregate/count/reduce",
    "KStreamSlidingWindowAggregate": "windowed_by(SlidingWindows).aggregate/count/reduce",
    "KStreamSessionWindowAggregate": "windowed_by(SessionWindows).aggregate/count/reduce",
    "KStreamJoinWindow": "KStream.join/left_join/outer_join (stream-stream)",
    "KStreamKStreamJoin": "KStream.join/left_join/outer_join (stream-stream)",
    "KTableSuppress": "suppress",
    # A foreign-key join reads its subscription store by prefix (every subscriber of a foreign key)
    # and each table's store for keys other than the record's (docs/spark.md, "Foreign-key joins").
    "SubscriptionSend": "KTable.join/left_join with a foreign-key extractor",
    "SubscriptionReceive": "KTable.join/left_join with a foreign-key extractor",
    "SubscriptionJoin": "KTable.join/left_join with a foreign-key extractor",
    "ForeignTableJoin": "KTable.join/left_join with a foreign-key extractor",
    "ResponseJoin": "KTable.join/left_join with a foreign-key extractor",
}

#: The processor reading a foreign-key join's response topic: the topic its sub-topology reads back
#: from the one it sent subscriptions to, a cycle run round by round (`_dependency_order`).
_FEEDBACK_READERS = frozenset({"ResponseJoin"})

#: DSL processors without stores the fused stage runs as they are. Any other DSL processor class
#: is refused (an allowlist, so operators added to the DSL later are refused until compiled).
STATELESS_DSL_OPERATORS: frozenset[str] = frozenset({
    "KStreamFilter", "KStreamMap", "KStreamMapValues", "KStreamFlatMap", "KStreamFlatMapValues",
    "KStreamSelectKey", "KStreamPeek", "KStreamPassThrough", "KStreamBranch", "KTableToStream",
    "KTableFilter", "KTableMapValues", "KTableSource", "KTableRepartitionMap",
})


_STAGES: Mapping[str, str] = {
    "stateless": "mapInArrow (fused stateless Python stage)",
    "keyed": "groupBy(key).transformWithState (keyed Python stage, RocksDB state)",
    "task": "groupBy(partition).transformWithStateInPandas (task Python stage: stores as changelog in RocksDB state)",
}


@dataclass(frozen=True)
class QueryPlan:
    """One Structured Streaming query: a sub-topology, its topics and the stage it compiles to."""

    subtopology_id: int
    source_topics: tuple[str, ...]
    #: Patterns of `stream(pattern)` sources: the runner reads the topics they match when it starts.
    source_patterns: tuple[str, ...]
    sink_topics: tuple[str, ...]
    stage: str  # "stateless" (mapInArrow), "keyed" or "task" (transformWithState by key or by task)
    processors: tuple[str, ...]
    stores: tuple[str, ...]
    after: tuple[int, ...]
    spec: SubtopologySpec = field(repr=False, compare=False)
    #: Sink topics written through a custom StreamPartitioner: their records carry a partition.
    partitioned_sinks: tuple[str, ...] = ()
    #: For stage "native": the chain and the count Spark runs (two sub-topologies fused when
    #: Spark's shuffle replaces their repartition topic).
    native: NativeCount | None = None
    #: Why the sub-topology runs in its Python stage (`plan_notes.stage_reason`).
    why: str = ""
    #: Why its aggregation is not compiled natively (`find_native_count`'s reason), "" if it is or has none.
    not_native: str = ""
    #: Per processor: how many records it writes per update it receives (`plan_notes.writes`).
    writes: tuple[tuple[str, str], ...] = ()
    #: The stream aggregations among the processors (what the native path would compile).
    aggregations: tuple[str, ...] = ()
    #: The shortest wall-clock punctuation interval its processors schedule in init(), None if none
    #: does: the task stage then runs on processing-time timers (`TaskStage`).
    wall_clock_ms: int | None = None
    #: Topics it reads back from queries that run after it (a foreign-key join's response topic).
    feedback_topics: tuple[str, ...] = ()
    #: The queries writing them: `available_now` runs it again after them, round by round, until a
    #: round brings the cycle no new records (`SparkPlan.rounds`).
    feedback: tuple[int, ...] = ()

    @property
    def task_grouped(self) -> bool:
        """Grouped by Kafka Streams task (source partition): its tasks wait for the topic behind."""
        return self.stage == "task" or (self.native is not None and (self.native.join is not None
                                                                      or self.native.kind == "stream-join"))

    def operators(self) -> tuple[tuple[str, str], ...]:
        """(processor or node name, how it runs): natively in Spark, or in Python and how."""
        native = self.native
        if native is None:
            writes = dict(self.writes)
            how = []
            for name in self.processors:
                text = STAGE_LABELS[self.stage]
                if name in self.aggregations and self.not_native:
                    text += f"; not native: {self.not_native}"
                how.append((name, f"{text}; writes {writes.get(name, '?')}"))
            return tuple(how)
        how = [(name, NATIVE_STAGES[native.kind].fused) for name in native.fused]
        how.extend((name, f"native: Spark's shuffle (groupBy key) replaces topic {native.bypassed_topic}")
                   for name in native.shuffled)  # fmt: skip
        how.extend(NATIVE_STAGES[native.kind].operators(native))
        return tuple(how)

    def describe(self) -> str:
        native = self.native
        how = _STAGES[self.stage] if native is None else NATIVE_STAGES[native.kind].label
        lines = [
            f"Query {self.subtopology_id}: sub-topology {self.subtopology_id}"
            + (f", after {', '.join(map(str, self.after))}" if self.after else "")
            + (f"; again after {', '.join(map(str, self.feedback))} until no new records" if self.feedback else ""),
            f"  read   kafka {', '.join([*self.source_topics, *(f'pattern {p!r}' for p in self.source_patterns)])}",
            f"  run    {how}: {' -> '.join(self.processors) or '(pass-through)'}",
            *([f"  why    {self.why}"] if native is None and self.why else []),
            *(f"    {name}: {where}" for name, where in self.operators()),
        ]
        if self.stores:
            lines.append(f"  state  {', '.join(self.stores)}")
        partitioned = f"; {', '.join(self.partitioned_sinks)} by its custom partitioner" if self.partitioned_sinks else ""
        lines.append(
            f"  write  kafka {', '.join(self.sink_topics) or '(nothing)'} (murmur2 by key{partitioned}, null value = tombstone)"
        )
        return "\n".join(lines)


@dataclass(frozen=True)
class SparkPlan:
    """The queries in the order `available_now` runs them, and the internal topics to create."""

    application_id: str
    queries: tuple[QueryPlan, ...]
    internal_topics: tuple[str, ...]

    @property
    def rounds(self) -> tuple[QueryPlan, ...]:
        """What `available_now` reruns after its first pass, round by round, while the queries writing
        a feedback topic read new records: the queries from the first that reads one on."""
        first = next((i for i, q in enumerate(self.queries) if q.feedback), None)
        return () if first is None else self.queries[first:]

    def describe(self) -> str:
        head = f"Spark plan for {self.application_id!r}: {len(self.queries)} query(ies)"
        if self.internal_topics:
            head += f"; internal topics {', '.join(self.internal_topics)}"
        return "\n".join([head, *(q.describe() for q in self.queries)])

    def __str__(self) -> str:
        return self.describe()


def plan_topology(topology: Topology, props: Mapping[str, Any], *, associative_reducers: bool = False) -> SparkPlan:
    """Check every node of `topology` and lay out its queries; UnsupportedOnSparkError if one cannot run.

    `associative_reducers`: the user vouches that every `reduce()`'s reducer is associative, so a
    stateless chain into one may reduce partially per Spark partition (native_reduce.py).
    """
    config = StreamsConfig(props)
    application_id: str = config["application.id"]
    builder = topology.internal_topology_builder
    builder.set_application_id(application_id)
    builder.validate()
    global_stores = frozenset(builder.global_state_store_names)
    readback = builder.source_topics | builder.internal_topics
    groups = builder.topic_groups()
    # Topics both written and read by the topology: their records carry the runner's headers.
    readback_written = readback & frozenset(t for info in groups.values() for t in info.sink_topics)
    shipped = ship_topology(topology)
    queries: dict[int, QueryPlan] = {}
    natives: list[NativeCount] = []
    caching = {name: builder.store_builder(name).caching_enabled for name in builder.state_store_names}
    with tempfile.TemporaryDirectory(prefix="streams-core-spark-plan-") as state_dir:
        config = config.with_overrides({"state.dir": state_dir})
        for sid, info in groups.items():
            built = builder.build_subtopology(sid, config)
            native = _find_native(sid, built, builder, config, readback_written, associative_reducers)
            if isinstance(native, NativeCount):
                natives.append(native)
            processors: list[str] = []
            partitioned: set[str] = set()
            per_task = False
            task_operator: str | None = None
            feedback: set[str] = set()
            for node in built.nodes:
                if isinstance(node, SinkNode):
                    if node.partitioner is not None:
                        if node.topic is None:
                            raise UnsupportedOnSparkError(
                                "to(topic extractor) with a custom partitioner", node.name,
                                "the partition counts of topics chosen per record are not known when a query starts",
                            )  # fmt: skip
                        partitioned.add(node.topic)
                    continue
                if isinstance(node, SourceNode):
                    if any(type(child.processor).__name__ in _FEEDBACK_READERS for child in node.children):
                        feedback.update(node.topics or ())
                    continue
                processors.append(node.name)
                local = node.store_names - global_stores  # global stores are read, filled by the runner
                operator = _task_operator(node.name, node.processor, local, built.state_stores)
                if operator is not None and not per_task:
                    per_task, task_operator = True, operator
            # A task reading several topics must wait for the one behind (Kafka Streams' PartitionGroup):
            # a rule over the task's partitions, which only the task stage sees together.
            several = len(info.source_topics) + len(info.source_patterns) > 1
            stage = "task" if per_task or (several and info.state_stores) else "keyed" if info.state_stores else "stateless"
            # Only a stateless stage reading external topics writes each origin partition in offset
            # order (one Spark task per Kafka partition), which replay detection relies on.
            stamp_origin = not info.state_stores and not (info.source_topics & readback_written)
            spec = SubtopologySpec(shipped, config.explicit(), sid, readback_written, stamp_origin, stage == "task")
            try:
                wall_clock = _wall_clock_ms(spec)  # runs every init(): punctuations are found now, not later
            except PunctuationNeedsTask as scheduled:  # a punctuation needs the task's stream time and timers
                stage, task_operator = "task", scheduled.operator
                spec = replace(spec, stamp_origin=False, task_stores=True)
                wall_clock = _wall_clock_ms(spec)  # refuses what the task stage cannot run either
            if info.source_patterns and info.source_topics & builder.internal_topics:
                raise UnsupportedOnSparkError(
                    "stream(pattern) beside a repartition topic", info.source_patterns[0].pattern,
                    "a query reading both is not compiled yet",
                )  # fmt: skip
            queries[sid] = QueryPlan(
                subtopology_id=sid,
                source_topics=tuple(sorted(info.source_topics)),
                source_patterns=tuple(p.pattern for p in info.source_patterns),
                sink_topics=tuple(sorted(info.sink_topics)),
                stage=stage,
                processors=tuple(processors),
                stores=info.state_stores,
                after=(),
                spec=spec,
                partitioned_sinks=tuple(sorted(partitioned)),
                why=stage_reason(stage, task_operator, len(info.source_topics) + len(info.source_patterns)),
                not_native="" if isinstance(native, NativeCount) or native == NO_AGGREGATION else native,
                writes=tuple((n.name, writes(n, caching)) for n in built.processors),
                aggregations=tuple(n.name for n in built.processors if isinstance(n.processor, (*AGGREGATIONS, KStreamSessionWindowAggregate))),
                wall_clock_ms=wall_clock,
                feedback_topics=tuple(sorted(feedback)),
            )
    internal = set(builder.internal_topics)
    for native in natives:
        internal.discard(native.bypassed_topic or "")
        queries = _fuse(queries, native)
    ordered = _dependency_order(queries)
    log.info("Spark plan for %s: %d queries", application_id, len(ordered))
    return SparkPlan(application_id, ordered, tuple(sorted(internal)))


def _find_native(sid: int, built: Any, builder: Any, config: StreamsConfig, readback: frozenset[str],
                 associative_reducers: bool) -> NativeCount | str:  # fmt: skip
    """What the sub-topology compiles to natively (a count, fold, join-count, windowed or session
    aggregation, or stream-stream join), or why not (`NO_AGGREGATION` when it has none of them)."""
    if any(isinstance(n.processor, KStreamWindowAggregate) and n.processor.operation != "count" for n in built.processors):
        from streams_core.spark.native_window_aggregate import find_native_window_aggregate  # imports pyspark

        return find_native_window_aggregate(sid, built, builder, config, readback)  # the windowed count: below
    native = find_native_count(sid, built, builder, config, readback, associative_reducers)
    if native == NO_AGGREGATION:
        from streams_core.spark.native_session_count import find_native_session_aggregation  # imports pyspark

        native = find_native_session_aggregation(sid, built, builder, config, readback)
    if native == NO_AGGREGATION:
        from streams_core.spark.native_stream_join import find_stream_join

        joined = find_stream_join(sid, built, config, readback)
        return joined if isinstance(joined, NativeCount) else native
    return native


def _wall_clock_ms(spec: SubtopologySpec) -> int | None:
    """The shortest wall-clock interval the processors' init() schedule (building the sub-topology runs them)."""
    executor = SubtopologyExecutor(spec)
    try:
        schedules = executor.carried_state().get(SCHEDULES, ())
    finally:
        executor.close()
    return min((s[1] for s in schedules if s[2] == PunctuationType.WALL_CLOCK_TIME.name), default=None)


def _fuse(queries: dict[int, QueryPlan], native: NativeCount) -> dict[int, QueryPlan]:
    """The chain's and the count's queries as one native query (one query when they are one sub-topology)."""
    chain, count = queries[native.chain_subtopology], queries[native.count_subtopology]
    processors = chain.processors if chain is count else (*chain.processors, *count.processors)
    stores = tuple(dict.fromkeys((*chain.stores, *count.stores))) if chain is not count else count.stores
    fused = replace(chain, sink_topics=count.sink_topics, stage="native", processors=processors, stores=stores,
                    native=native)  # fmt: skip
    out = {sid: q for sid, q in queries.items() if sid != native.count_subtopology}
    out[native.chain_subtopology] = fused
    return out


def _task_operator(name: str, processor: Any, store_names: frozenset[str], stores: Mapping[str, Any]) -> str | None:
    """What makes the processor need the task stage (None: it does not); UnsupportedOnSparkError if no stage runs it."""
    kind = type(processor).__name__
    operation = "process"
    if kind == "KStreamFixedKeyProcessor":  # process_values(): the user's FixedKeyProcessor, adapted
        kind = type(getattr(getattr(processor, "_process", None), "__self__", processor)).__name__
        dsl, operation = False, "process_values"
    else:
        dsl = type(processor).__module__.startswith("streams_core.")
    if dsl and kind not in KEYED_OPERATORS and kind not in TASK_OPERATORS and kind not in STATELESS_DSL_OPERATORS:
        raise UnsupportedOnSparkError(f"DSL operator {kind}", name, "not compiled to Spark yet")
    if kind in TASK_OPERATORS:
        return TASK_OPERATORS[kind]
    if not store_names:
        return None
    if any(isinstance(stores.get(store), VersionedKeyValueStore) for store in store_names):
        # Its versions are keyed by (key, timestamp) in the store below: carried as the task's
        # changelog, and its observed stream time is the task's (docs/spark.md, "Versioned tables").
        return "a versioned table (persistent_versioned_key_value_store)"
    if not dsl:
        # A custom processor may read any key of its stores, and from its punctuations: the task's
        # stores, carried between micro-batches as their changelog like the DSL's (task_batch.py).
        return f"{operation}({kind}) with state stores"
    for store in store_names:
        if not isinstance(stores.get(store), TimestampedKeyValueStore):
            raise UnsupportedOnSparkError(KEYED_OPERATORS[kind], name, f"store {store!r} is not a key-value store")
    return None


def _dependency_order(queries: Mapping[int, QueryPlan]) -> tuple[QueryPlan, ...]:
    """Writers before readers (Kahn's algorithm, lowest id first); a cycle of topics is refused, except
    through a feedback topic (a foreign-key join's responses): its reader runs first, and again after
    its writers (`QueryPlan.feedback`)."""
    writers = {topic: sid for sid, q in queries.items() for topic in q.sink_topics}

    def written(q: QueryPlan, topics: Any) -> set[int]:
        return {writers[t] for t in topics if t in writers and writers[t] != q.subtopology_id}

    after = {sid: tuple(sorted(written(q, set(q.source_topics) - set(q.feedback_topics)))) for sid, q in queries.items()}
    feedback = {sid: tuple(sorted(written(q, q.feedback_topics))) for sid, q in queries.items()}
    done: list[int] = []
    while len(done) < len(queries):
        ready = [sid for sid in sorted(queries) if sid not in done and all(a in done for a in after[sid])]
        if not ready:
            left = sorted(set(queries) - set(done))
            raise UnsupportedOnSparkError("through/repartition cycle", f"sub-topologies {left}", "topics form a cycle")
        done.append(ready[0])
    return tuple(replace(queries[sid], after=after[sid], feedback=feedback[sid]) for sid in done)
