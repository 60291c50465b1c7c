"""SparkRunner: a DSL topology run as Spark Structured Streaming queries over Kafka.

`plan()` compiles (or refuses) the topology; `run("available_now")` runs the queries one after
the other in dependency order, each with `trigger(availableNow=True)` (KIP-95's incremental
batch in Spark form: what is in the topics at start, then stop; offsets and state live in the
checkpoint directory, so the next run takes only new records; a foreign-key join's queries, whose
topics form a cycle, then run again round by round until no new record reaches the cycle);
`run("continuous")` starts them all together and blocks until `stop()` or a failure.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import tempfile
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from streams_core.clients.admin import InternalTopicManager, NewTopicSpec
from streams_core.clients.client_config import java_client_properties
from streams_core.clients.kafka_clients import create_admin, create_restore_consumer, to_aiokafka
from streams_core.common.topic_partition import TopicPartition
from streams_core.config import StreamsConfig
from streams_core.errors import StreamsError
from streams_core.processor.topology import Topology
from streams_core.runtime.assignment.copartitioning import ensure_copartitioning
from streams_core.runtime.topology_metadata import TopologyMetadata
from streams_core.spark.carried_punctuations import timers_caught_up
from streams_core.spark.errors import UnsupportedOnSparkError
from streams_core.spark.native_stages import NATIVE_STAGES
from streams_core.spark.progress_reporter import ProgressReporter
from streams_core.spark.spark_plan import QueryPlan, SparkPlan, plan_topology
from streams_core.spark.spark_session import QUIET_SPARK_CONF, build_session, quiet_session
from streams_core.spark.subtopology_executor import InputRow

__all__ = ["Mode", "SparkRunner"]

log = logging.getLogger(__name__)

Mode = Literal["available_now", "continuous"]

#: The longest trigger interval of a continuous query with wall-clock punctuations (its records wait
#: at most this long); shorter when its shortest punctuation interval is.
MAX_TIMER_TRIGGER_MS = 1000
T = TypeVar("T")

#: In the checkpoint directory: where each internal topic stood when this checkpoint lineage began.
START_OFFSETS_FILE = "internal-topics-start.json"

#: How the Python stateful stages lay out their Spark state, written beside each such query's
#: checkpoint (`<checkpoint>.state-format`); a checkpoint without the mark was written by the
#: stage's first layout (the second of each pair): refused, never misread. The keyed stage's
#: first layout pickled a dict of Python objects per key; the task stage's first layout was
#: the Row API's `transformWithState`, whose checkpoint Spark will not run as
#: `transformWithStateInPandas`.
STATE_FORMATS: Mapping[str, tuple[str, str]] = {
    "keyed": ("changelog-bytes-v2", "pickled-v1"),
    "task": ("pandas-changelog-v2", "row-changelog-v1"),
}

#: Options of Spark's Kafka source: everything from the earliest offset on the first run, headers
#: included (processors see them; the runner's timestamp header rides in them).
_SOURCE_OPTIONS: Mapping[str, str] = {"startingOffsets": "earliest", "includeHeaders": "true", "failOnDataLoss": "true"}


class SparkRunner:
    """Runs `topology` on Spark: `config` holds Kafka Streams properties plus `spark.*` settings.

    Without `spark`, a session is built (`local[*]`, UI off, bound to 127.0.0.1, the Kafka
    connector jars from `make setup`); `spark.*` keys of `config` configure it. `source_options`
    are extra options of Spark's Kafka source (e.g. `maxOffsetsPerTrigger`). `associative_reducers`:
    the user vouches that every `reduce()`'s reducer is associative, so a stateless chain into
    one reduces partially per Spark partition first (docs/spark.md). `progress`: `run()` reports
    each query's micro-batches, records and rate (a line on a terminal, else INFO logs);
    `progress[sub-topology id]` holds its query's Spark progress reports (rows read per micro-batch).
    `worker_output`: let Spark's and the Python workers' own log output reach the terminal (off:
    a session the runner builds logs at ERROR only, docs/spark.md).
    """

    def __init__(
        self,
        topology: Topology,
        config: Mapping[str, Any],
        spark: Any = None,
        *,
        source_options: Mapping[str, str] | None = None,
        associative_reducers: bool = False,
        progress: bool = True,
        worker_output: bool = False,
    ) -> None:
        split = sorted(set(source_options or {}) & {"minPartitions", "maxRecordsPerPartition"})
        if split:
            raise ValueError(
                f"source option(s) {split} split a Kafka partition over several Spark tasks: its records would "
                "no longer be processed in offset order as in Kafka Streams"
            )
        self._source_options = {**_SOURCE_OPTIONS, **(source_options or {})}
        self._associative_reducers = associative_reducers
        self._reporter = ProgressReporter(enabled=progress)
        self._worker_output = worker_output
        self.progress: dict[int, list[dict[str, Any]]] = {}
        self._spark_conf = {k: v for k, v in config.items() if k.startswith("spark.")}
        if not worker_output:
            self._spark_conf = {**QUIET_SPARK_CONF, **self._spark_conf}
        self._props = {k: v for k, v in config.items() if not k.startswith("spark.")}
        self.config = StreamsConfig(self._props, required=("application.id", "bootstrap.servers"))
        self.topology = topology
        self._spark = spark
        self._plan: SparkPlan | None = None
        self._queries: list[Any] = []
        self._stopped = False
        self._starts: dict[str, dict[str, int]] = {}
        self._counts: dict[str, int] = {}
        self._matched: dict[int, frozenset[str]] = {}
        self._global_rows: tuple[InputRow, ...] = ()
        self._waits: dict[int, dict[tuple[str, int], int]] = {}
        self._skipped: dict[int, Any] = {}

    @property
    def skipped_records(self) -> dict[int, int]:
        """Per sub-topology, the records the deserialization handler skipped (or dead-lettered) in
        this runner's runs (Kafka Streams counts them in the `dropped-records` metric)."""
        return {sid: int(accumulator.value) for sid, accumulator in self._skipped.items()}

    @property
    def stopped(self) -> bool:
        """True once `stop()` was called (a query failing after it is the stop, not an error)."""
        return self._stopped

    @property
    def spark(self) -> Any:
        """The SparkSession (built on first use when none was given)."""
        if self._spark is None:
            self._spark = build_session(self._spark_conf, app_name=self.config["application.id"])
            if not self._worker_output:
                quiet_session(self._spark)
        return self._spark

    def plan(self) -> SparkPlan:
        """The queries `run` will start; raises UnsupportedOnSparkError for what cannot run faithfully."""
        if self._plan is None:
            self._plan = plan_topology(self.topology, self._props, associative_reducers=self._associative_reducers)
        return self._plan

    def run(self, mode: Mode = "available_now", checkpoint_dir: str | os.PathLike[str] | None = None) -> None:
        """Run the plan; `checkpoint_dir` (default `<state.dir>/<application.id>/spark`) keeps offsets and state."""
        if mode not in ("available_now", "continuous"):
            raise ValueError(f"mode must be 'available_now' or 'continuous', got {mode!r}")
        plan = self.plan()
        global_topics = sorted(self.topology.internal_topology_builder.global_topics)
        if global_topics and mode == "continuous":
            raise UnsupportedOnSparkError(
                "GlobalKTable / global store in run('continuous')", ", ".join(global_topics),
                "the global stores are filled once, when a run starts; run available_now instead",
            )
        checkpoints = Path(checkpoint_dir) if checkpoint_dir is not None else self._default_checkpoints()
        counts = self._ensure_internal_topics(plan)
        self._global_rows = self._read_global_topics(global_topics, counts) if global_topics else ()
        self._starts = self._internal_start_offsets(plan, checkpoints, counts)
        self._waits = self._wait_offsets(plan, counts)
        self._stopped = False
        queries = [q for q in plan.queries if self._topics_of(q)]
        for query in queries:
            if query.stage in STATE_FORMATS:
                _check_state_format(checkpoints / _checkpoint_name(query), query.stage)
        for query in (q for q in plan.queries if not self._topics_of(q)):
            log.warning("Query %s skipped: its patterns %s match no topic", query.subtopology_id, query.source_patterns)
        if mode == "available_now":
            read = {query.subtopology_id: self._run_available_now(query, checkpoints, first=True) for query in queries}
            # A foreign-key join's responses come back to a query that ran before their writer: run
            # the queries from there on again, round by round, until its writers read nothing new.
            rounds = [q for q in plan.rounds if q in queries]
            writers = {sid for q in rounds for sid in q.feedback}
            while rounds and any(read.get(sid) for sid in writers) and not self._stopped:
                log.info("Queries %s again: the feedback topics have new records", [q.subtopology_id for q in rounds])
                read.update({q.subtopology_id: self._run_available_now(q, checkpoints) for q in rounds})
            return
        handles = [self._start(query, checkpoints, available_now=False) for query in queries]
        running = [(self._reporter.start(handle.name, self._skipped_of(query.subtopology_id)), handle)
                   for query, handle in zip(queries, handles, strict=True)]  # fmt: skip
        for query, (totals, _) in zip(queries, running, strict=True):
            self.progress[query.subtopology_id] = totals.reports
        try:
            while not self._stopped:
                for _, handle in running:
                    # Raises the query's error if it failed; True once it has terminated.
                    if handle.awaitTermination(0.5) and not self._stopped:
                        log.warning("Query %s terminated; stopping the others", handle.name)
                        return
                self._reporter.poll(running)
        finally:
            self.stop()
            for totals, handle in running:
                self._reporter.finish(totals, handle)

    def stop(self) -> None:
        """Stop the running queries (from another thread or a signal handler)."""
        self._stopped = True
        for handle in self._queries:
            if handle.isActive:
                handle.stop()
        self._queries.clear()

    # -- internals ----------------------------------------------------------------------------

    def _run_available_now(self, query: QueryPlan, checkpoints: Path, *, first: bool = False) -> int:
        """Run `query` with `availableNow` to its end; the records it read (0 once stopped). `progress`
        holds its reports, those of its later rounds in this run appended."""
        if self._stopped:
            return 0
        handle = self._start(query, checkpoints, available_now=True)
        totals = self._reporter.start(handle.name, self._skipped_of(query.subtopology_id))
        earlier = [] if first else self.progress.get(query.subtopology_id, [])
        self.progress[query.subtopology_id] = totals.reports
        while not handle.awaitTermination(0.5):  # raises the query's error if it failed
            self._reporter.poll([(totals, handle)])
            if query.wall_clock_ms is not None and timers_caught_up(totals.reports):
                handle.stop()  # Spark would run timer batches for ever
        self._reporter.finish(totals, handle)
        totals.reports[:0] = earlier
        return totals.records

    def _skipped_of(self, subtopology_id: int) -> Callable[[], int]:
        return lambda: self.skipped_records.get(subtopology_id, 0)

    def _default_checkpoints(self) -> Path:
        state_dir = str(self.config["state.dir"] or tempfile.gettempdir())
        return Path(state_dir, str(self.config["application.id"]), "spark")

    def _kafka_options(self, client: Literal["consumer", "producer"]) -> dict[str, str]:
        """Spark's `kafka.*` options of its Kafka source (`consumer`) or sink (`producer`): the
        bootstrap servers and the same security settings as the runtime's clients
        (`kafka.security.protocol`, `kafka.sasl.jaas.config`, PEM stores; docs/security.md)."""
        return {f"kafka.{key}": value for key, value in java_client_properties(self.config, client).items()}

    def explain(self, mode: str = "formatted") -> str:
        """Spark's plan of each query (`DataFrame.explain` modes: simple, extended, codegen, cost, formatted)."""
        parts = []
        for query in self.plan().queries:
            frame = self._frame(query)
            text = self.spark._jvm.PythonSQLUtils.explainString(frame._jdf.queryExecution(), mode)
            parts.append(f"== Query {query.subtopology_id} ({query.stage}) ==\n{text}")
        return "\n".join(parts)

    def _frame(self, query: QueryPlan) -> Any:
        """The query's streaming DataFrame: Kafka rows in, the Kafka sink's columns out."""
        from pyspark.sql import functions as F

        from streams_core.spark.spark_stages import OUTPUT_SCHEMA, KeyedStage, StatelessStage, TaskStage

        reader = self.spark.readStream.format("kafka").options(**self._kafka_options("consumer"))
        for key, value in self._source_options.items():
            reader = reader.option(key, value)
        starts = {t: self._starts[t] for t in query.source_topics if t in self._starts}
        if starts:
            # Internal topics from where this checkpoint lineage began (others from the earliest);
            # Spark uses it only when the query has no checkpoint yet.
            offsets = {t: starts.get(t) or {str(p): -2 for p in range(self._counts[t])} for t in query.source_topics}
            reader = reader.option("startingOffsets", json.dumps(offsets))
        if query.subtopology_id not in self._skipped:
            self._skipped[query.subtopology_id] = self.spark.sparkContext.accumulator(0)
        skipped = self._skipped[query.subtopology_id]
        rows = reader.option("subscribe", ",".join(self._topics_of(query))).load().select(
            "topic", "partition", "offset", F.unix_millis("timestamp").alias("timestamp"), "key", "value", "headers"
        )
        if query.native is not None:
            return NATIVE_STAGES[query.native.kind].query(self, query, rows)
        spec = replace(query.spec, sink_partitions={t: self._counts.get(t, 0) for t in query.partitioned_sinks},
                       global_records=self._global_rows, wait_offsets=self._waits.get(query.subtopology_id, {}),
                       skipped=skipped)
        if query.stage == "stateless":
            return rows.mapInArrow(StatelessStage(spec), OUTPUT_SCHEMA)
        if query.stage == "keyed":
            return rows.groupBy("key").transformWithState(KeyedStage(spec), OUTPUT_SCHEMA, "Update", "None")
        timers = query.wall_clock_ms is not None  # wall-clock punctuations: processing-time timers
        return rows.groupBy("partition").transformWithStateInPandas(
            TaskStage(spec, wall_clock=timers), OUTPUT_SCHEMA, "Update", "ProcessingTime" if timers else "None"
        )

    def _start(self, query: QueryPlan, checkpoints: Path, *, available_now: bool) -> Any:
        out = self._frame(query)
        name = f"{self.config['application.id']}-subtopology-{query.subtopology_id}"
        writer = (
            out.writeStream.format("kafka")
            .queryName(name)
            .options(**self._kafka_options("producer"))
            .option("checkpointLocation", str(checkpoints / _checkpoint_name(query)))
            .outputMode("update")
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:  # with processing-time timers Spark runs a batch per trigger, records or not: not back to back
            interval = 0 if query.wall_clock_ms is None else min(query.wall_clock_ms, MAX_TIMER_TRIGGER_MS)
            writer = writer.trigger(processingTime=f"{interval} milliseconds")
        handle = writer.start()
        self._queries.append(handle)
        log.info("Started query %s (%s)", name, "availableNow" if available_now else "continuous")
        return handle

    def _read_global_topics(self, topics: Iterable[str], counts: Mapping[str, int]) -> tuple[InputRow, ...]:
        """Every record of the global topics up to their end now, in offset order per partition."""
        tps = [to_aiokafka(TopicPartition(t, p)) for t in topics for p in range(counts[t])]

        async def read() -> tuple[InputRow, ...]:
            consumer = create_restore_consumer(self.config, client_id=f"{self.config['application.id']}-spark-global")
            await consumer.start()
            try:
                consumer.assign(tps)
                await consumer.seek_to_beginning(*tps)
                ends = await consumer.end_offsets(tps)
                rows: list[InputRow] = []
                remaining = {tp for tp in tps if ends[tp] > 0}
                while remaining:
                    batch = await consumer.getmany(timeout_ms=200, max_records=10_000)
                    for tp, records in batch.items():
                        rows.extend(
                            InputRow(tp.topic, tp.partition, r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                            for r in records if r.offset < ends[tp]
                        )  # fmt: skip
                    for tp in list(remaining):
                        if await consumer.position(tp) >= ends[tp]:
                            remaining.discard(tp)
                return tuple(rows)
            finally:
                await consumer.stop()

        rows = _run_coroutine(read())
        log.info("Read %d records of the global topics %s", len(rows), sorted(set(t.topic for t in tps)))
        return rows

    def _wait_offsets(self, plan: SparkPlan, counts: Mapping[str, int]) -> dict[int, dict[tuple[str, int], int]]:
        """Per task-stage query reading several topics: the offset of each source partition's last
        record now, from where the query reads (what Kafka Streams' consumer knows as fetch lag). Its
        tasks wait for a partition read below it (`partition_group.take_ready`); none with
        `max.task.idle.ms` -1, as in Kafka Streams."""
        if int(self.config["max.task.idle.ms"]) < 0:
            return {}
        topics = {q.subtopology_id: self._topics_of(q) for q in plan.queries if q.task_grouped}
        topics = {sid: ts for sid, ts in topics.items() if len(ts) > 1}
        if not topics:
            return {}
        tps = sorted({TopicPartition(t, p) for ts in topics.values() for t in ts for p in range(counts[t])})
        config = self.config
        if self._source_options.get("kafka.isolation.level") == "read_committed":  # Spark skips aborted records
            config = config.with_overrides({"restore.consumer.isolation.level": "read_committed"})
        last = _run_coroutine(_last_record_offsets(config, tps))
        waits: dict[int, dict[tuple[str, int], int]] = {}
        for sid, ts in topics.items():
            waits[sid] = {
                (tp.topic, tp.partition): offset for tp, offset in last.items()
                if tp.topic in ts and offset >= self._starts.get(tp.topic, {}).get(str(tp.partition), 0)
            }  # fmt: skip
        log.info("Task stages wait for partitions read below their last records: %s", waits)
        return waits

    def _topics_of(self, query: QueryPlan) -> list[str]:
        """The topics `query` reads: its named ones and those its patterns matched when the run started."""
        return sorted(set(query.source_topics) | self._matched.get(query.subtopology_id, frozenset()))

    def _ensure_internal_topics(self, plan: SparkPlan) -> dict[str, int]:
        """Check co-partitioning and create the repartition topics, sized as our runtime sizes them,
        before any query reads them (CopartitioningError, as KafkaStreams raises at start-up).

        Returns every source topic's partition count.
        """
        builder = self.topology.internal_topology_builder
        partitioned = {t for q in plan.queries for t in q.partitioned_sinks}
        patterns = any(q.source_patterns for q in plan.queries)
        global_topics = builder.global_topics
        # A native windowed or session count's tasks are the partitions of the repartition topic it replaces.
        replaced = {q.native.bypassed_topic for q in plan.queries
                    if q.native is not None and q.native.bypassed_topic and NATIVE_STAGES[q.native.kind].tasks_of_bypassed}  # fmt: skip
        several = any(q.task_grouped and len(q.source_topics) > 1 for q in plan.queries)  # _wait_offsets
        if not (plan.internal_topics or builder.copartition_groups() or partitioned or patterns or global_topics or replaced
                or several):
            return {}
        internal = set(plan.internal_topics)
        named = sorted(({t for q in plan.queries for t in q.source_topics} | global_topics) - internal)

        async def ensure() -> dict[str, int]:
            admin = create_admin(self.config)
            await admin.start()
            try:
                if patterns:
                    self._matched = self._match_patterns(plan, await admin.list_topics())
                external = sorted(set(named).union(*self._matched.values()))
                outputs = sorted(partitioned - internal - set(external))  # custom partitioners need their counts
                manager = InternalTopicManager(admin)
                counts = await manager.partition_counts(external + outputs)
                missing = [t for t, n in counts.items() if n is None]
                if missing:
                    raise FileNotFoundError(f"source or custom-partitioned sink topic(s) {missing} do not exist")
                known = {t: n for t, n in counts.items() if n is not None}
                # A task stage groups by partition number: joined topics must agree on their count.
                ensure_copartitioning(builder.copartition_groups(), known, internal)
                sizes = builder.internal_topic_partition_counts(known)
                if internal:
                    await manager.ensure_topics([NewTopicSpec(t, sizes[t]) for t in sorted(internal)])
                return {**known, **{t: sizes[t] for t in internal | replaced}}
            finally:
                await admin.close()

        self._counts = _run_coroutine(ensure())
        return self._counts

    def _match_patterns(self, plan: SparkPlan, topics: Iterable[str]) -> dict[int, frozenset[str]]:
        """The topics each query's patterns match now (as KafkaStreams matches at start: never this
        application's internal topics, nor the broker's own)."""
        metadata = TopologyMetadata(self.topology.internal_topology_builder, str(self.config["application.id"]))
        metadata.match_patterns(topics)
        matched = {q.subtopology_id: metadata.subtopologies[q.subtopology_id] - set(q.source_topics) for q in plan.queries}
        log.info("Pattern subscriptions match %s", {sid: sorted(t) for sid, t in matched.items() if t})
        return matched

    def _internal_start_offsets(self, plan: SparkPlan, checkpoints: Path, counts: Mapping[str, int]) -> dict[str, dict[str, int]]:
        """Where each internal topic stood when this checkpoint lineage began.

        A query without a checkpoint must not read what earlier lineages of the application wrote
        to its repartition topics (a deleted checkpoint directory would count it twice), but must
        read what this lineage wrote (a run killed before its later queries started). So the
        first run of a fresh checkpoint directory records the internal topics' end offsets, and
        every later run reads them back. Without the file but with checkpoints (older runs), the
        lineage is taken to have begun with the topics.
        """
        if not plan.internal_topics:
            return {}
        path = checkpoints / START_OFFSETS_FILE
        if path.exists():
            loaded: dict[str, dict[str, int]] = json.loads(path.read_text())
            return loaded
        if checkpoints.exists() and any(checkpoints.glob("subtopology-*")):
            return {}
        tps = [TopicPartition(t, p) for t in plan.internal_topics for p in range(counts[t])]

        async def ends() -> dict[str, dict[str, int]]:
            consumer = create_restore_consumer(self.config, client_id=f"{self.config['application.id']}-spark-runner")
            await consumer.start()
            try:
                found = await consumer.end_offsets([to_aiokafka(tp) for tp in tps])
            finally:
                await consumer.stop()
            result: dict[str, dict[str, int]] = {}
            for tp, offset in found.items():
                result.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
            return result

        starts = _run_coroutine(ends())
        checkpoints.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(starts, sort_keys=True))
        log.info("Checkpoint lineage %s begins at internal topic offsets %s", checkpoints, starts)
        return starts


def _checkpoint_name(query: QueryPlan) -> str:
    """A native query keeps Spark's aggregation state: never the checkpoint of a Python stage of the same id."""
    native = query.native
    prefix = "subtopology" if native is None else NATIVE_STAGES[native.kind].checkpoint
    return f"{prefix}-{query.subtopology_id}"


def _check_state_format(checkpoint: Path, stage: str) -> None:
    """Refuse a stateful query's checkpoint whose state another layout wrote; mark a new one as ours."""
    expected, first = STATE_FORMATS[stage]
    marker = checkpoint.with_name(checkpoint.name + ".state-format")
    found = marker.read_text().strip() if marker.exists() else None
    if found == expected:
        return
    if found is not None or any(checkpoint.glob("offsets/*")):
        raise StreamsError(
            f"checkpoint {checkpoint} holds the {stage} stage's state in format {found or first!r}, and this "
            f"version reads {expected!r} only: delete the checkpoint directory to reset the job (docs/spark.md, "
            "'State as bytes')"
        )
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(expected + "\n")


async def _last_record_offsets(config: StreamsConfig, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """The offset of each partition's last record (end offsets can point past transaction markers):
    read back from the end, 1 then 16, 256... offsets, until a record shows."""
    consumer = create_restore_consumer(config, client_id=f"{config['application.id']}-spark-last-offsets")
    await consumer.start()
    try:
        parts = {to_aiokafka(tp): tp for tp in tps}
        consumer.assign(list(parts))
        begins = await consumer.beginning_offsets(list(parts))
        ends = await consumer.end_offsets(list(parts))
        found: dict[TopicPartition, int] = {}
        pending = {tp for tp in parts if ends[tp] > begins[tp]}
        back = 1
        deadline = asyncio.get_running_loop().time() + 120
        while pending:
            for tp in pending:
                consumer.seek(tp, max(begins[tp], ends[tp] - back))
            reading = set(pending)
            while reading:
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError(f"reading the last records of {sorted(map(str, reading))} took over 120 s")
                batch = await consumer.getmany(*reading, timeout_ms=200)
                for tp, records in batch.items():
                    for record in records:
                        if record.offset < ends[tp]:
                            found[parts[tp]] = max(found.get(parts[tp], -1), record.offset)
                reading = {tp for tp in reading if await consumer.position(tp) < ends[tp]}
            pending = {tp for tp in pending if parts[tp] not in found and ends[tp] - back > begins[tp]}
            back *= 16
        return found
    finally:
        await consumer.stop()


def _run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` to completion, in a thread of its own when this thread has a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
