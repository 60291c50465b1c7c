"""The two Python stages a sub-topology compiles to, as Spark ships them to executors.

- `StatelessStage` (for `mapInArrow`): a sub-topology without stores, fused into one pass over
  each Arrow batch of Kafka rows; Spark's Kafka source gives one topic-partition per Spark
  partition, in offset order, which is the order our runtime processes a partition in.
- `KeyedStage` (for `groupBy("key").transformWithState`, RocksDB state): a sub-topology with
  key-value stores; each key's rows of a micro-batch run in Kafka Streams' order (`kafka_order`)
  with the key's store entries loaded from, and saved back to, a map state holding them as their
  changelog (serde bytes, no Python objects, so a checkpoint outlives a change of code).
- `TaskStage` (for `groupBy("partition").transformWithStateInPandas`, RocksDB state): a sub-topology
  whose operators need the whole task (windowed aggregations, stream-stream joins): each Kafka
  Streams task (the partition number of its co-partitioned sources) runs a micro-batch's rows in
  Kafka Streams' order through the sub-topology's own stores, restored from the changelog the
  stage keeps in a map state; the processors' stream time rides in a value state; wall-clock
  punctuations fire on processing-time timers.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from streams_core.errors import StreamsError
from streams_core.spark.errors import UnsupportedOnSparkError
from streams_core.spark.keyed_state_store import KeyedStateStore
from streams_core.spark.subtopology_executor import (
    InputRow,
    OutputRow,
    SubtopologyExecutor,
    SubtopologySpec,
    iter_rows,
    kafka_order,
)
from streams_core.spark.task_batch import run_task_batch
from streams_core.state.internals.store_names import store_changelog_topic

__all__ = ["OUTPUT_SCHEMA", "KeyedStage", "StatelessStage", "TaskStage"]

log = logging.getLogger(__name__)

#: The columns Spark's Kafka sink reads; no `partition` column, so the producer's murmur2 partitions.
OUTPUT_SCHEMA = "topic string, key binary, value binary, headers array<struct<key: string, value: binary>>, partition int"
_CHANGELOG_KEY_SCHEMA = "topic string, key binary"
_CHANGELOG_VALUE_SCHEMA = "value binary"
_APPLIED_KEY_SCHEMA = "topic string, partition int"
_APPLIED_VALUE_SCHEMA = "offset bigint, index int"
_TASK_SCHEMA = "task binary"


def _partition_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def _arrow_batch(rows: list[OutputRow]) -> Any:
    """The rows as one Arrow batch; headers built as flat arrays plus offsets (no dict per header)."""
    import pyarrow as pa

    offsets = [0]
    header_keys: list[str] = []
    header_values: list[bytes] = []
    for r in rows:
        for k, v in r.headers:
            header_keys.append(k)
            header_values.append(v)
        offsets.append(len(header_keys))
    headers = pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()),
        pa.StructArray.from_arrays([pa.array(header_keys, pa.string()), pa.array(header_values, pa.binary())],
                                   names=["key", "value"]),
    )
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r.topic for r in rows], pa.string()),
            pa.array([r.key for r in rows], pa.binary()),
            pa.array([r.value for r in rows], pa.binary()),
            headers,
            pa.array([r.partition for r in rows], pa.int32()),
        ],
        names=["topic", "key", "value", "headers", "partition"],
    )


class StatelessStage:
    """`mapInArrow` function: Kafka rows in, sink rows out, through the fused stateless sub-topology."""

    def __init__(self, spec: SubtopologySpec) -> None:
        self.spec = spec

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        executor = SubtopologyExecutor(self.spec, _partition_id())
        try:
            for batch in batches:
                yield _arrow_batch(executor.process(iter_rows(batch.to_pylist())))
        finally:
            self.spec.count_skipped(executor.skipped_records)
            executor.close()


class KeyedStage(StatefulProcessor):
    """`transformWithState` processor: one key's rows per call. Its stores' entries are kept as their
    changelog, (changelog topic, key bytes) -> value bytes, in a map state; the origins it applied
    (to skip records an upstream query wrote twice), origin partition -> position, in another."""

    def __init__(self, spec: SubtopologySpec) -> None:
        self.spec = spec
        self._executor: SubtopologyExecutor | None = None
        self._stores: dict[str, KeyedStateStore] = {}

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._changelog = handle.getMapState("changelog", _CHANGELOG_KEY_SCHEMA, _CHANGELOG_VALUE_SCHEMA)
        self._applied = handle.getMapState("applied", _APPLIED_KEY_SCHEMA, _APPLIED_VALUE_SCHEMA)
        self._executor = SubtopologyExecutor(self.spec, _partition_id())
        application_id = str(self.spec.props["application.id"])
        self._stores = {store_changelog_topic(application_id, name): store for name, store in self._executor.stores.items()}

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Row]:
        executor = self._executor
        assert executor is not None, "init() runs first"
        saved: dict[str, dict[bytes, bytes]] = {topic: {} for topic in self._stores}
        for (topic, store_key), (value,) in self._changelog.iterator():
            if topic not in saved:
                raise StreamsError(f"the Spark state of key {key!r} holds changelog {topic!r}, which no store of "
                                   f"sub-topology {self.spec.subtopology_id} writes: was the topology changed?")
            saved[topic][bytes(store_key)] = bytes(value)
        for topic, store in self._stores.items():
            store.load(dict(saved[topic]))
        applied = {(topic, partition): (offset, index) for (topic, partition), (offset, index) in self._applied.iterator()}
        before, skipped = dict(applied), executor.skipped_records
        out = executor.process(kafka_order(iter_rows(rows)), applied)
        self.spec.count_skipped(executor.skipped_records - skipped)
        out.extend(executor.commit())  # the caches' updates: one per key and micro-batch
        for topic, store in self._stores.items():
            entries, old = store.dump(), saved[topic]
            for store_key, value in entries.items():
                if old.get(store_key) != value:
                    self._changelog.updateValue((topic, store_key), (value,))
            for store_key in old.keys() - entries.keys():
                self._changelog.removeKey((topic, store_key))
        for source, position in applied.items():
            if before.get(source) != position:
                self._applied.updateValue(source, position)
        yield from _output_rows(out)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.close()
            self._executor = None


def _output_rows(rows: list[OutputRow]) -> Iterator[Row]:
    for r in rows:
        yield Row(
            topic=r.topic, key=r.key, value=r.value, headers=[Row(key=k, value=v) for k, v in r.headers],
            partition=r.partition,
        )


def frame_rows(frames: Iterable[Any]) -> Iterator[InputRow]:
    """InputRows from pandas frames of the source's columns, a column at a time (headers empty
    when the frames have no `headers` column)."""
    for frame in frames:
        columns = [frame[name].tolist() for name in ("topic", "partition", "offset", "timestamp", "key", "value")]
        all_headers = frame["headers"] if "headers" in frame else itertools.repeat(None, len(frame))
        for (topic, partition, offset, timestamp, key, value), headers in zip(zip(*columns, strict=True), all_headers, strict=True):
            yield InputRow(
                topic, partition, offset, timestamp, key, value,
                () if headers is None else tuple((h["key"], h["value"]) for h in headers),
            )  # fmt: skip


def _output_frame(rows: list[OutputRow]) -> Any:
    """The rows as one pandas frame of the sink's columns (headers as lists of dicts)."""
    import pandas as pd  # type: ignore[import-untyped]  # no stubs in the venv

    return pd.DataFrame({
        "topic": [r.topic for r in rows],
        "key": [r.key for r in rows],
        "value": [r.value for r in rows],
        "headers": [[{"key": k, "value": v} for k, v in r.headers] for r in rows],
        "partition": pd.array([r.partition for r in rows], dtype="Int32"),
    })  # fmt: skip


class TaskStage(StatefulProcessor):
    """`transformWithStateInPandas` processor grouped by task (source partition): the task's stores
    as a changelog in a map state (changelog topic, key) -> value, its stream times, schedules and
    the origins it applied in a value state. Its rows come and go as pandas frames (Arrow columns
    converted per frame, not a `Row` built cell by cell per record as the Row API does).

    With `wall_clock` (the query runs with `timeMode="ProcessingTime"`), each call fires the task's
    wall-clock punctuations due at the micro-batch's processing time, after its records, and keeps
    one processing-time timer per task at the next one's due time, so that Spark calls the task
    (`handleExpiredTimer`) in a micro-batch without its records once it is due."""

    def __init__(self, spec: SubtopologySpec, wall_clock: bool = False) -> None:
        self.spec = spec
        self.wall_clock = wall_clock

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._changelog = handle.getMapState("changelog", _CHANGELOG_KEY_SCHEMA, _CHANGELOG_VALUE_SCHEMA)
        self._task = handle.getValueState("task", _TASK_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: TimerValues) -> Iterator[Any]:
        return self._run(key, frame_rows(rows), timerValues, None)

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo) -> Iterator[Any]:
        """A wall-clock punctuation is due: the task runs without records (held ones stay held)."""
        return self._run(key, (), timerValues, expiredTimerInfo.getExpiryTimeInMs())

    def _run(self, key: Any, rows: Iterable[InputRow], timer_values: TimerValues, expired: int | None) -> Iterator[Any]:
        (partition,) = key
        saved = self._task.get()
        now = timer_values.getCurrentProcessingTimeInMs() if self.wall_clock else None

        def changelog() -> list[tuple[str, bytes, bytes]]:
            return [(k[0], k[1], v[0]) for k, v in self._changelog.iterator()] if saved else []

        batch = run_task_batch(self.spec, int(partition), rows, saved[0] if saved else None, changelog, now)
        for changelog_key, value in batch.changelog.items():
            if value is None:
                self._changelog.removeKey(changelog_key)
            else:
                self._changelog.updateValue(changelog_key, (value,))
        if now is None and batch.wall_clock_due is not None:
            raise UnsupportedOnSparkError(
                "schedule(WALL_CLOCK_TIME) outside init()", f"sub-topology {self.spec.subtopology_id}",
                "the plan found no wall-clock punctuation in init(), so the query runs without "
                "processing-time timers: schedule in init()",
            )  # fmt: skip
        self._task.update((batch.task,))
        if now is not None:
            self._set_timer(batch.wall_clock_due, expired)
        log.debug("task %s of sub-topology %s: %d rows out", partition, self.spec.subtopology_id, len(batch.rows))
        if batch.rows:
            yield _output_frame(batch.rows)

    def _set_timer(self, due: int | None, expired: int | None) -> None:
        """One timer per task, at `due`. Others are deleted, an expired one too when the task had records
        (Spark then does not call it again), but not the one being handled (Spark deletes it after)."""
        timers = set(self._handle.listTimers())
        for timer in timers - {due, expired}:
            self._handle.deleteTimer(timer)
        if due is not None and due not in timers:
            self._handle.registerTimer(due)

    def close(self) -> None:
        """Each call builds and closes its own executor."""
