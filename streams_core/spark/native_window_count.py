"""A stateless chain into a windowed `count()`, compiled to Spark's own aggregation.

`stream(...)` → fused stateless operators → `group_by`/`group_by_key` →
`windowed_by(TimeWindows)` → `count()` (caching on, emit per update) → `to_stream()` → fused
stateless operators → `to(topic)` becomes one query:

    Kafka source → mapInArrow(WindowKeys: the chain per record; per Kafka Streams task, the running
                   largest timestamp; records on time counted per (task, key, window start);
                   each task's largest timestamp)
                 → groupBy(task).transformWithStateInPandas(StreamTimeFilter: the task's stream
                   time before the micro-batch drops the windows closed by then; its state: one long)
                 → groupBy(key, window start).sum(n) (Spark's streaming aggregation: key, start, count)
                 → mapInArrow(WindowOutput: Windowed(key, window) and count through the tail and
                   the sinks' serdes) → Kafka sink, update mode

Lateness is Kafka Streams' rule, per task and per record: a window closes once the task's stream
time (the largest timestamp its count has received) reaches window end + grace. A record's
stream time is the task's stream time before the micro-batch, or, if larger, the largest
timestamp among the records of the same task from the same Kafka partition up to it (the
records of a repartition topic's partition arriving in the order of their writers' running
largest timestamps, one interleaving Kafka Streams allows: docs/spark.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from streams_core.common.partitioner import default_partition
from streams_core.errors import StreamsError
from streams_core.processor.internals.processor_node import ProcessorNode, SinkNode
from streams_core.processor.internals.stateless_chain import Emit, compose
from streams_core.spark.native_count import CountKeys, NativeCount, WindowCount, built_shipped, key_column
from streams_core.state.windowed import TimeWindow, Windowed

__all__ = ["StreamTimeFilter", "WindowKeys", "WindowOutput"]

log = logging.getLogger(__name__)

#: Rows (task, key, window start) on time held before they are grouped and handed to Spark.
_MAX_HELD_ROWS = 2_000_000


def _window(native: NativeCount) -> WindowCount:
    if native.window is None:
        raise StreamsError(f"{native} is not a windowed count")
    return native.window


class WindowKeys(CountKeys):
    """`mapInArrow` function: Kafka rows (partition, timestamp, key, value) of one topic in; out
    partial counts (task, key, window start, n, time -1) of the records the count keeps, and per
    task a row (task, null, 0, 0, largest timestamp of its records) for its stream time.

    The task of a record is the repartition topic's partition its key bytes go to (murmur2 over
    `partitions`), or the source partition when the count reads the source topic itself.
    """

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount, partitions: int) -> None:
        super().__init__(topology, props, native)
        self.schema = f"task int, key {'string' if native.string_keys else 'binary'}, start bigint, n bigint, time bigint"
        self.partitions = partitions

    def columns(self, source_topics: tuple[str, ...]) -> list[str]:
        """The source columns it reads: the partition is the task when no repartition topic is replaced."""
        return ["partition", *(c for c in super().columns(source_topics) if c != "partition")]

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        keys: list[Any] = []
        times: list[int] = []

        def counted(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if key is not None and value is not None:  # the aggregate drops these before its stream time
                keys.append(key)
                times.append(timestamp)

        chains = self._chains(counted)
        highest: dict[int, int] = {}
        tasks_of: dict[Any, int] = {}
        held: list[Any] = []
        rows = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            self._run_batch(chains, batch)
            if keys:
                partition = batch.column("partition")[0].as_py()
                on_time = self._on_time(keys, times, highest, tasks_of, partition)
                held.extend(on_time)
                rows += sum(b.num_rows for b in on_time)
                keys.clear()
                times.clear()
            if rows >= _MAX_HELD_ROWS:
                yield self._grouped(held)
                held.clear()
                rows = 0
        if held:
            yield self._grouped(held)
        if highest:
            yield self._stream_times(highest)

    def _task(self, key: Any, tasks_of: dict[Any, int]) -> int:
        task = tasks_of.get(key)
        if task is None:
            if self.partitions <= 0:
                raise StreamsError(f"the partition count of {_window(self.native).partitions_of!r} is unknown")
            data = key.encode("utf-8") if isinstance(key, str) else key
            task = tasks_of[key] = default_partition(data, self.partitions)
        return task

    def _on_time(self, keys: list[Any], times: list[int], highest: dict[int, int], tasks_of: dict[Any, int],
                 partition: int) -> list[Any]:  # fmt: skip
        """(task, key, start) of each window each record counts in, unless closed by its stream time."""
        import numpy as np
        import pyarrow as pa

        window = _window(self.native)
        if not self.native.string_keys:
            serialized = self._serialized(keys)
            kept = [i for i, k in enumerate(serialized) if k is not None]  # a None key: the aggregate drops it
            keys = [serialized[i] for i in kept]
            times = [times[i] for i in kept]
        column = key_column(keys, self.native.string_keys, self.native.output_topic)
        stamps = np.asarray(times, dtype=np.int64)
        if window.partitions_of is None:
            tasks = np.full(len(stamps), partition, dtype=np.int32)
        else:
            encoded = column.dictionary_encode()
            of_key = np.asarray([self._task(k, tasks_of) for k in encoded.dictionary.to_pylist()], dtype=np.int32)
            tasks = of_key[encoded.indices.to_numpy(zero_copy_only=False)]
        running = np.empty_like(stamps)
        for task in np.unique(tasks).tolist():
            at = np.flatnonzero(tasks == task)
            run = np.maximum.accumulate(stamps[at])
            if task in highest:
                np.maximum(run, highest[task], out=run)
            running[at] = run
            highest[task] = int(run[-1])
        close = running - window.grace
        first = (np.maximum(0, stamps - window.size + window.advance) // window.advance) * window.advance
        out = []
        for step in range(-(-window.size // window.advance)):
            start = first + step * window.advance
            at = np.flatnonzero((start <= stamps) & (start + window.size > close))
            if at.size:
                out.append(pa.RecordBatch.from_arrays(
                    [pa.array(tasks[at]), column.take(pa.array(at)), pa.array(start[at])], names=["task", "key", "start"]))  # fmt: skip
        return out

    def _grouped(self, held: list[Any]) -> Any:
        """The held rows counted per (task, key, start)."""
        import numpy as np
        import pyarrow as pa

        grouped = pa.Table.from_batches(held).group_by(["task", "key", "start"]).aggregate([("start", "count")])
        n = grouped.num_rows
        return pa.RecordBatch.from_arrays(
            [grouped["task"].combine_chunks(), grouped["key"].combine_chunks(), grouped["start"].combine_chunks(),
             grouped["start_count"].combine_chunks().cast(pa.int64()), pa.array(np.full(n, -1, dtype=np.int64))],
            names=["task", "key", "start", "n", "time"],
        )  # fmt: skip

    def _stream_times(self, highest: Mapping[int, int]) -> Any:
        import pyarrow as pa

        tasks = list(highest)
        key_type = pa.string() if self.native.string_keys else pa.binary()
        return pa.RecordBatch.from_arrays(
            [pa.array(tasks, pa.int32()), pa.nulls(len(tasks), key_type), pa.array([0] * len(tasks), pa.int64()),
             pa.array([0] * len(tasks), pa.int64()), pa.array([highest[t] for t in tasks], pa.int64())],
            names=["task", "key", "start", "n", "time"],
        )  # fmt: skip


class StreamTimeFilter(StatefulProcessor):
    """Per task: drops the partial counts of windows its stream time had closed before the
    micro-batch (window end + grace <= stream time), then takes the batch's largest timestamp.

    Its Spark state is the task's stream time (one long), so a checkpoint holds no Python object.
    """

    def __init__(self, size_and_grace: int) -> None:
        self.size_and_grace = size_and_grace

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._time = handle.getValueState("stream_time", "time long")

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        import pandas as pd  # type: ignore[import-untyped]  # no stubs in the venv

        frame = pd.concat(list(rows), ignore_index=True)
        stored = self._time.get() if self._time.exists() else None
        before = None if stored is None else int(stored[0])
        counts = frame[frame["key"].notna()]
        if before is not None:
            counts = counts[counts["start"] + self.size_and_grace > before]
        latest = int(frame["time"].max())
        if before is None or latest > before:
            self._time.update((latest,))
        yield counts[["key", "start", "n"]]

    def close(self) -> None:
        """Nothing to release."""


class _Rows:
    """The sinks' RecordCollector: serialized records as Kafka sink columns."""

    def __init__(self) -> None:
        self.topics: list[str] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Any,
             partition: int | None) -> None:  # fmt: skip
        self.topics.append(topic)
        self.keys.append(key)
        self.values.append(value)


class WindowOutput:
    """`mapInArrow` function: Spark's updated counts (key, start, count) in; each as
    `Windowed(key, TimeWindow(start, start + size))` and count through `to_stream()`'s fused
    operators and the sinks (their serdes), Kafka sink rows (topic, key, value) out."""

    schema = "topic string, key binary, value binary"

    def __init__(self, topology: bytes, props: Mapping[str, Any], native: NativeCount, key_topic: str) -> None:
        self.topology = topology
        self.props = dict(props)
        self.native = native
        self.key_topic = key_topic

    def _tail(self) -> Any:
        """What follows the windowed table (`to_stream`, `sinks`): the windowed count's."""
        return _window(self.native)

    def _runs(self, rows: _Rows) -> list[Emit]:
        built = built_shipped(self.topology, self.props, self.native.count_subtopology)
        window = self._tail()
        (to_stream,) = [n for n in built.processors if n.name == window.to_stream]
        context: Any = SimpleNamespace(record_collector=rows)

        def terminal(node: ProcessorNode) -> Emit:
            if not isinstance(node, SinkNode) or node.name not in window.sinks:
                raise StreamsError(f"the windowed count's tail reached {node.name!r}, not one of {window.sinks}")
            node.init(context)
            return node.send

        return [terminal(child) if isinstance(child, SinkNode) else compose(child, terminal) for child in to_stream.children]

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        rows = _Rows()
        runs = self._runs(rows)
        size = _window(self.native).size
        key_serde, topic = self.native.key_serde, self.key_topic
        for batch in batches:
            keys = batch.column("key").to_pylist()
            if not self.native.string_keys:
                keys = [key_serde.deserialize(topic, k) for k in keys]
            for key, start, count in zip(keys, batch.column("start").to_pylist(), batch.column("count").to_pylist(),
                                         strict=True):  # fmt: skip
                windowed = Windowed(key, TimeWindow(start, start + size))
                for run in runs:
                    run(windowed, count, start, ())
            yield pa.RecordBatch.from_arrays(
                [pa.array(rows.topics, pa.string()), pa.array(rows.keys, pa.binary()), pa.array(rows.values, pa.binary())],
                names=["topic", "key", "value"],
            )  # fmt: skip
            rows.topics.clear()
            rows.keys.clear()
            rows.values.clear()
