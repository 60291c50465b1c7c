"""The native stages as types: one class per kind of native query, with its plan text and its query.

`find_native_count` (native_count.py) decides what a sub-topology's aggregation compiles to and
names it by `NativeCount.kind`; `NATIVE_STAGES[kind]` is the stage that describes it in `plan()`
(`label`, `operators`), names its checkpoint and builds its streaming DataFrame (`query`). The
functions that run in Python inside those queries live beside their kind's plan:
native_count.py (`CountKeys`), native_window_count.py, native_reduce.py, native_combine.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from streams_core.spark.native_count import NativeCount

if TYPE_CHECKING:
    from streams_core.spark.spark_plan import QueryPlan
    from streams_core.spark.spark_runner import SparkRunner

__all__ = ["NATIVE_STAGES", "NativeStage"]

_UPDATE_MODE = "native: Spark's update mode, one record per changed key and micro-batch"


def _output(native: NativeCount, frame: Any) -> Any:
    """The Kafka sink's columns of a per-key query (topic, key bytes, value)."""
    from pyspark.sql import functions as F

    key = F.col("key").cast("binary") if native.string_keys else F.col("key")
    return frame.select(F.lit(native.output_topic).alias("topic"), key.alias("key"), "value")


def _long_bytes(column: str) -> Any:
    """A bigint column as the Long serde's 8 big-endian bytes, by Spark expressions."""
    from pyspark.sql import functions as F

    return F.unhex(F.lpad(F.hex(column), 16, "0")).alias("value")


def _key_type(native: NativeCount) -> str:
    return "string" if native.string_keys else "binary"


class NativeStage:
    """One kind of native query."""

    kind: ClassVar[str]
    #: Its checkpoint directory's prefix (never a Python stage's: the state differs).
    checkpoint: ClassVar[str]
    #: The plan's `run` line.
    label: ClassVar[str]
    #: How the fused stateless operators before the aggregation run.
    fused: ClassVar[str] = "python: fused stateless chain in mapInArrow, once per Arrow batch"
    #: Its tasks are the partitions of the repartition topic it replaces (the runner sizes that topic).
    tasks_of_bypassed: ClassVar[bool] = False

    def operators(self, native: NativeCount) -> list[tuple[str, str]]:
        """(node, how it runs) for the aggregation and the nodes after it."""
        raise NotImplementedError

    def query(self, runner: SparkRunner, query: QueryPlan, rows: Any) -> Any:
        """The streaming DataFrame from the Kafka rows to the Kafka sink's columns."""
        raise NotImplementedError

    @staticmethod
    def _mapped(runner: SparkRunner, query: QueryPlan, stage: Any, rows: Any) -> Any:
        """`rows` through the `mapInArrow` function `stage` (its skips counted by the query's accumulator)."""
        stage.skipped = runner._skipped[query.subtopology_id]
        return rows.select(*stage.columns(query.source_topics)).mapInArrow(stage, stage.schema)


class CountStage(NativeStage):
    kind, checkpoint = "count", "native-count"
    label = "mapInArrow (fused stateless chain, partial counts) -> groupBy(key).sum() (Spark's streaming aggregation)"

    def operators(self, native: NativeCount) -> list[tuple[str, str]]:
        count, *rest = native.native
        return [(count, "native: groupBy(key).sum() of the chain's partial counts per Spark partition, "
                        "Spark's streaming aggregation (state: key, count)"),
                *((name, "native: value = unhex(lpad(hex(count), 16, '0')), the Long serde's bytes") for name in rest)]

    def query(self, runner: SparkRunner, query: QueryPlan, rows: Any) -> Any:

        from streams_core.spark.native_count import CountKeys

        native = _native(query)
        return _counted(native, self._mapped(runner, query, CountKeys(query.spec.topology, query.spec.props, native), rows))


def _counted(native: NativeCount, partial: Any) -> Any:
    """Partial counts (key, n) summed per key by Spark's streaming aggregation, the Long serde's bytes out."""
    from pyspark.sql import functions as F

    return _output(native, partial.groupBy("key").agg(F.sum("n").alias("count")).select("key", _long_bytes("count")))


class JoinCountStage(NativeStage):
    kind, checkpoint = "join-count", "native-join-count"
    label = ("mapInArrow (the rows packed per task) -> groupBy(partition).transformWithStateInPandas (the stream-table "
             "join per task in Kafka Streams' order, the table in Spark state, partial counts) -> groupBy(key).sum() "
             "(Spark's streaming aggregation)")
    fused = "python: fused stateless chain in the join's transformWithStateInPandas, once per record"

    def operators(self, native: NativeCount) -> list[tuple[str, str]]:
        join = native.join
        assert join is not None
        return [(join.table, "python: per task in the join's transformWithStateInPandas, the table's latest value "
                             "per key kept as Spark state (its compacted changelog: key bytes, the store's value bytes)"),
                (join.join, "python: per task in groupBy(partition).transformWithStateInPandas, each stream record "
                            "joined with the table as of it (PartitionGroup's order; records wait for a partition "
                            "with unread data)"),
                *self._aggregation(native)]  # fmt: skip

    def _aggregation(self, native: NativeCount) -> list[tuple[str, str]]:
        return [(name, note.replace("per Spark partition", "per task and micro-batch"))
                for name, note in CountStage().operators(native)]  # fmt: skip

    def _aggregated(self, native: NativeCount, partial: Any) -> Any:
        return _counted(native, partial)

    def query(self, runner: SparkRunner, query: QueryPlan, rows: Any) -> Any:
        from streams_core.spark.native_count import CountKeys
        from streams_core.spark.native_join import JoinCountTask
        from streams_core.spark.packed_rows import PACKED_SCHEMA, ROW_COLUMNS, PackRows

        native, spec = _native(query), query.spec
        count = CountKeys(spec.topology, spec.props, native)
        count.skipped = runner._skipped[query.subtopology_id]
        task = JoinCountTask(count, getattr(runner, "_waits", {}).get(query.subtopology_id, {}))
        schema = f"key {_key_type(native)}, n bigint"
        # No headers: the join and the count do not read them, and the topics are external (no runner headers).
        # Packed: one row per task and Arrow batch crosses the shuffle, not one per record (packed_rows.py).
        packed = rows.select(*ROW_COLUMNS).mapInArrow(PackRows(), PACKED_SCHEMA)
        return self._aggregated(native, packed.groupBy("partition").transformWithStateInPandas(task, schema, "Update", "None"))


class JoinReduceStage(JoinCountStage):
    kind, checkpoint = "join-spark-reduce", "native-join-spark-reduce"
    label = ("mapInArrow (the rows packed per task) -> groupBy(partition).transformWithStateInPandas (the stream-table "
             "join per task in Kafka Streams' order, the table in Spark state, values combined per key) -> "
             "groupBy(key).agg(sum|max|min) (Spark's streaming aggregation)")

    def _aggregated(self, native: NativeCount, partial: Any) -> Any:
        return _combined(native, partial, "n")

    def _aggregation(self, native: NativeCount) -> list[tuple[str, str]]:
        return [(name, note.replace("per Spark partition in mapInArrow", "per task and micro-batch after the join"))
                for name, note in SparkReduceStage().operators(native)]  # fmt: skip


class StreamJoinStage(NativeStage):
    kind, checkpoint = "stream-join", "native-stream-join"
    label = ("groupBy(partition).transformWithStateInPandas (the stream-stream join per task over columns in Kafka "
             "Streams' order, both sides' window stores in Spark state)")
    fused = "python: fused stateless chain in the join's transformWithStateInPandas, once per record"

    def operators(self, native: NativeCount) -> list[tuple[str, str]]:
        from streams_core.spark.native_stream_join import stream_join_operators

        return stream_join_operators(native)

    def query(self, runner: SparkRunner, query: QueryPlan, rows: Any) -> Any:
        from streams_core.spark.native_stream_join import stream_join_query

        return stream_join_query(runner, query, rows)


class SparkReduceStage(NativeStage):
    kind, checkpoint = "spark-reduce", "native-spark-reduce"
    label = ("mapInArrow (fused stateless chain, values combined per key and Spark partition) -> groupBy(key)"
             ".agg(sum|max|min) (Spark's streaming aggregation)")

    def operators(self, native: NativeCount) -> list[tuple[str, str]]:
        reduce, *rest = native.native
        return [(reduce, f"native: the reducer (the built-in or a function recognised as it) as Spark's {native.combine}(): per Spark partition in mapInArrow, "
                         f"then groupBy(key).agg({native.combine}) (Spark's streaming aggregation, state: key, long)"),
                *((name, f"{_UPDATE_MODE}; value = unhex(lpad(hex(v), 16, '0')), the Long serde's bytes")
                  for name in rest)]  # fmt: skip

    def query(self, runner: SparkRunner, query: QueryPlan, rows: Any) -> Any:

        from streams_core.spark.native_combine import CombineKeys

        native = _native(query)
        return _combined(native, self._mapped(runner, query, CombineKeys(query.spec.topology, query.spec.props, native), rows), "v")


def _combined(native: NativeCount, partial: Any, column: str) -> Any:
    """Partials (key, `column`) combined per key by Spark's sum, max or min, the Long serde's bytes out."""
    from pyspark.sql import functions as F

    combined = partial.groupBy("key").agg(getattr(F, native.combine)(column).alias("total"))
    return _output(native, combined.select("key", _long_bytes("total")))


class WindowCountStage(NativeStage):
    kind, checkpoint = "window-count", "native-window-count"
    tasks_of_bypassed = True
    label = ("mapInArrow (fused stateless chain, partial counts per task and window) -> groupBy(task)"
             ".transformWithStateInPandas (stream time) -> groupBy(key, window start).sum() -> mapInArrow (tail)")

    def operators(self, native: NativeCount) -> list[tuple[str, str]]:
        window = native.window
        assert window is not None
        count, to_stream, *tail = native.native
        tasks = f"partitions of {window.partitions_of}" if window.partitions_of else "source partitions"
        return [(count, "native: windows on time per task (" + tasks + ") in mapInArrow, closed windows dropped "
                        "by the task's stream time in groupBy(task).transformWithStateInPandas (state: one long), "
                        "groupBy(key, window start).sum() (Spark's streaming aggregation: key, start, count)"),
                (to_stream, "native: Spark's update mode, one record per changed window and micro-batch"),
                *((name, "python: fused stateless chain in mapInArrow over the updated windows") for name in tail)]

    def query(self, runner: SparkRunner, query: QueryPlan, rows: Any) -> Any:
        from pyspark.sql import functions as F

        from streams_core.spark.native_window_count import StreamTimeFilter, WindowKeys, WindowOutput

        native = _native(query)
        window = native.window
        assert window is not None
        spec = query.spec
        partitions = runner._counts.get(window.partitions_of, 0) if window.partitions_of else 0
        keys = WindowKeys(spec.topology, spec.props, native, partitions)
        on_time = self._mapped(runner, query, keys, rows).groupBy("task")
        counts = on_time.transformWithStateInPandas(
            StreamTimeFilter(window.size + window.grace), f"key {_key_type(native)}, start bigint, n bigint", "Update",
            "None",
        ).groupBy("key", "start").agg(F.sum("n").alias("count"))
        output = WindowOutput(spec.topology, spec.props, native, window.partitions_of or query.source_topics[0])
        return counts.mapInArrow(output, output.schema)


class SessionCountStage(NativeStage):
    kind, checkpoint = "session-count", "native-session-count"
    tasks_of_bypassed = True
    label = ("mapInArrow (fused stateless chain, each record's task and key) -> groupBy(task)"
             ".transformWithStateInPandas (sessions per key by the task's stream time, then the tail)")
    #: What the aggregation does per record and what its state holds, in the plan.
    merges: ClassVar[str] = "merged into each key's sessions"
    holds: ClassVar[str] = "count"

    def operators(self, native: NativeCount) -> list[tuple[str, str]]:
        aggregation, to_stream, *tail = native.native
        tasks = f"partitions of {native.bypassed_topic}" if native.bypassed_topic else "source partitions"
        return [(aggregation, f"vectorized: per task ({tasks}) in groupBy(task).transformWithStateInPandas, the "
                              f"records in Kafka Streams' order {self.merges} by the task's stream time "
                              f"(state: the session store's changelog rows, key, start, end, {self.holds}; the stream time)"),
                (to_stream, "vectorized: the record cache's flush per micro-batch, one record per changed session "
                            "(a merged-away session: a tombstone)"),
                *((name, "python: fused stateless chain over the changed sessions, in the same "
                         "transformWithStateInPandas") for name in tail)]  # fmt: skip

    def query(self, runner: SparkRunner, query: QueryPlan, rows: Any) -> Any:
        from streams_core.spark.native_session_count import SessionKeys, SessionOutput, SessionTask, _session

        native, spec = _native(query), query.spec
        session = _session(native)
        partitions = runner._counts.get(session.partitions_of, 0) if session.partitions_of else 0
        keys = self._mapped(runner, query, SessionKeys(spec.topology, spec.props, native, partitions), rows)
        output = SessionOutput(spec.topology, spec.props, native, session.partitions_of or query.source_topics[0])
        task = SessionTask(session, _key_type(native), output)
        return keys.groupBy("task").transformWithStateInPandas(task, output.schema, "Update", "None")


class SessionAggregateStage(SessionCountStage):
    """A session `aggregate()` or `reduce()`: the count's query, the user's functions per record."""

    kind, checkpoint = "session-aggregate", "native-session-aggregate"
    label = ("mapInArrow (fused stateless chain, each record's task, key and value bytes) -> groupBy(task)"
             ".transformWithStateInPandas (the user's functions over sessions per key by the task's stream time, "
             "then the tail)")
    merges = ("through the user's initializer, session merger and aggregator (a reduce's reducer), merged into "
              "each key's sessions")
    holds = "the store's value bytes"


class WindowAggregateStage(SessionCountStage):
    """A tumbling or hopping `aggregate()` or `reduce()`: the session stage's query, `TaskWindows` per task."""

    kind, checkpoint = "window-aggregate", "native-window-aggregate"
    label = ("mapInArrow (fused stateless chain, each record's task, key and value bytes) -> groupBy(task)"
             ".transformWithStateInPandas (the user's functions over windows per key by the task's stream time, "
             "then the tail)")

    def operators(self, native: NativeCount) -> list[tuple[str, str]]:
        aggregation, to_stream, *tail = native.native
        tasks = f"partitions of {native.bypassed_topic}" if native.bypassed_topic else "source partitions"
        return [(aggregation, f"vectorized: per task ({tasks}) in groupBy(task).transformWithStateInPandas, the "
                              "records in Kafka Streams' order through the user's initializer and aggregator (a "
                              "reduce's reducer) per window, closed windows dropped by the task's stream time "
                              "(state: the window store's changelog rows, key, start, timestamp, the store's value "
                              "bytes; the stream time)"),
                (to_stream, "vectorized: the record cache's flush per micro-batch, one record per changed window"),
                *((name, "python: fused stateless chain over the changed windows, in the same "
                         "transformWithStateInPandas") for name in tail)]  # fmt: skip


def _folded(native: NativeCount, spec: Any, values: Any) -> Any:
    """`FoldStage.fold` per key over the grouped `values` on applyInPandasWithState (the key's state,
    its value's bytes, travels with its rows: the fastest stateful API measured for it, bench/LOG.md)."""
    from streams_core.spark.native_reduce import FoldGroups, FoldStage

    stage = FoldGroups(FoldStage(spec.topology, spec.props, native))
    return _output(native, values.applyInPandasWithState(stage, f"key {_key_type(native)}, value binary",
                                                         "value binary", "Update", "NoTimeout"))  # fmt: skip


class PartialReduceStage(NativeStage):
    # "native-reduce-<id>" held the same step on transformWithStateInPandas, whose state this one cannot read.
    kind, checkpoint = "partial-reduce", "native-partial-reduce"
    label = ("mapInArrow (fused stateless chain, partial reductions per Spark partition) -> groupBy(key)"
             ".applyInPandasWithState (the reducer over stored value and partials)")

    def operators(self, native: NativeCount) -> list[tuple[str, str]]:
        fold, *rest = native.native
        return [(fold, "python: the reducer per Spark partition in mapInArrow (partial reductions), then over the "
                       "stored value and the partials in groupBy(key).applyInPandasWithState (state: value bytes)"),
                *((name, _UPDATE_MODE) for name in rest)]

    def query(self, runner: SparkRunner, query: QueryPlan, rows: Any) -> Any:
        from streams_core.spark.native_reduce import ReduceKeys

        native, spec = _native(query), query.spec
        values = self._mapped(runner, query, ReduceKeys(spec.topology, spec.props, native), rows).groupBy("key")
        return _folded(native, spec, values)


class OrderedFoldStage(NativeStage):
    kind, checkpoint = "ordered-fold", "native-fold"
    label = ("mapInArrow (fused stateless chain, every value as bytes) -> groupBy(key)"
             ".applyInPandasWithState (the reducer or aggregator per key in Kafka Streams' order)")

    def operators(self, native: NativeCount) -> list[tuple[str, str]]:
        fold, *rest = native.native
        return [(fold, "vectorized: the user's function over each key's stored value and values, Arrow in and out "
                       "per key in groupBy(key).applyInPandasWithState, in Kafka Streams' order (per Kafka "
                       "partition offset order; across partitions the lowest timestamp first) (state: value bytes)"),
                *((name, _UPDATE_MODE) for name in rest)]

    def query(self, runner: SparkRunner, query: QueryPlan, rows: Any) -> Any:
        from streams_core.spark.native_reduce import FoldValues

        native, spec = _native(query), query.spec
        values = self._mapped(runner, query, FoldValues(spec.topology, spec.props, native), rows).groupBy("key")
        return _folded(native, spec, values)


def _native(query: QueryPlan) -> NativeCount:
    assert query.native is not None
    return query.native


#: The native stage of each `NativeCount.kind`.
NATIVE_STAGES: Mapping[str, NativeStage] = {
    stage.kind: stage
    for stage in (CountStage(), SparkReduceStage(), WindowCountStage(), PartialReduceStage(), OrderedFoldStage(),
                  JoinCountStage(), JoinReduceStage(), StreamJoinStage(), SessionCountStage(),
                  SessionAggregateStage(), WindowAggregateStage())
}
