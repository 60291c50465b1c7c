"""The executor Spark calls, without Spark: same bytes as the runtime, Kafka Streams' order, replays skipped."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from app.wordcount import build_topology
from streams_core import Serdes, StreamsBuilder
from streams_core.spark import SparkRunner, task_batch
from streams_core.spark.subtopology_executor import (
    ORIGIN_HEADER,
    TIMESTAMP_HEADER,
    InputRow,
    SubtopologyExecutor,
    kafka_order,
)
from streams_core.spark.task_batch import run_task_batch
from tests.spark import processor_api

CONFIG = {"application.id": "exec", "bootstrap.servers": "127.0.0.1:9"}


def queries() -> Any:
    """The word count's two Python stages (caching off; with caching on it compiles to Spark's count)."""
    config = {**CONFIG, "statestore.cache.max.bytes": 0}
    return SparkRunner(build_topology("lines", "counts", windowed=False), config).plan().queries


def test_the_stateless_stage_writes_what_the_runtime_writes_with_the_runner_headers() -> None:
    first, _ = queries()
    executor = SubtopologyExecutor(first.spec)
    try:
        assert executor._fused is not None, "every processor is a stateless DSL operator: the fused chain runs them"
        out = executor.process([InputRow("lines", 2, 7, 1234, b"k", b"Hello hello", ())])
        with pytest.raises(AttributeError) as failure:
            executor.process([InputRow("lines", 0, 9, 1235, b"k", None, ())])
        assert "topic=lines, partition=0, offset=9" in "".join(failure.value.__notes__)
    finally:
        executor.close()
    assert [(r.topic, r.key, r.value) for r in out] == [("exec-word-count-repartition", b"hello", b"hello")] * 2
    for index, row in enumerate(out):
        headers = dict(row.headers)
        assert int.from_bytes(headers[TIMESTAMP_HEADER], "big") == 1234
        assert headers[ORIGIN_HEADER][:16] == (2).to_bytes(4, "big") + (7).to_bytes(8, "big") + index.to_bytes(4, "big")
        assert headers[ORIGIN_HEADER][16:] == b"lines"


def test_the_keyed_stage_skips_records_written_twice_by_a_rerun_upstream_query() -> None:
    first, second = queries()
    upstream = SubtopologyExecutor(first.spec)
    counter = SubtopologyExecutor(second.spec)
    try:
        written = upstream.process([InputRow("lines", 0, offset, 10 + offset, None, b"a b a", ()) for offset in range(2)])
        as_read = [InputRow(r.topic, 0, i, 99, r.key, r.value, tuple(r.headers)) for i, r in enumerate(written)]
        replayed = as_read + [InputRow(r.topic, r.partition, r.offset + len(as_read), 99, r.key, r.value, r.headers) for r in as_read]
        a_rows = [r for r in replayed if r.key == b"a"]
        applied: dict[Any, Any] = {}
        counter.stores["word-count"].load({})
        out = counter.process(a_rows, applied)
    finally:
        upstream.close()
        counter.close()
    assert [int.from_bytes(r.value or b"", "big") for r in out] == [1, 2, 3, 4], "the replayed copies are skipped"
    assert all(not r.headers for r in out), "no runner headers on the output topic"
    assert applied == {("lines", 0): (1, 2)}


def test_kafka_order_is_offset_order_per_partition_and_timestamp_order_across() -> None:
    rows = [InputRow("t", 0, 2, 50, None, None, ()), InputRow("t", 1, 0, 20, None, None, ()),
            InputRow("t", 0, 1, 30, None, None, ()), InputRow("u", 0, 5, 10, None, None, ())]
    assert [(r.topic, r.partition, r.offset) for r in kafka_order(rows)] == [("u", 0, 5), ("t", 1, 0), ("t", 0, 1), ("t", 0, 2)]


# -- the task stage: windowed operators rebuilt every micro-batch give the driver's output ------

def windowed_topologies() -> dict[str, Any]:
    from streams_core import (
        BufferConfig,
        EmitStrategy,
        JoinWindows,
        Serdes,
        SessionWindows,
        SlidingWindows,
        StreamsBuilder,
        Suppressed,
        TimeWindows,
    )

    def windowed(windows: Any) -> Any:
        builder = StreamsBuilder()
        (builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String())
         .group_by_key().windowed_by(windows).count()
         .to_stream().map(lambda wk, n: (f"{wk.key}@{wk.window.start}-{wk.window.end}", str(n)))
         .to("out", key_serde=Serdes.String(), value_serde=Serdes.String()))
        return builder.build()

    def joined() -> Any:
        builder = StreamsBuilder()
        left = builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String())
        right = builder.stream("other", key_serde=Serdes.String(), value_serde=Serdes.String())
        (left.left_join(right, lambda a, b: f"{a}+{b}", JoinWindows.of_time_difference_and_grace(100, 50))
         .to("out", key_serde=Serdes.String(), value_serde=Serdes.String()))
        return builder.build()

    def suppressed(windowed: bool) -> Any:
        builder = StreamsBuilder()
        grouped = builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String()).group_by_key()
        if windowed:
            table = (grouped.windowed_by(TimeWindows.of_size_and_grace(100, 50)).count()
                     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded())))
        else:
            table = grouped.count().suppress(Suppressed.until_time_limit(120, BufferConfig.max_records(2).emit_early_when_full()))
        (table.to_stream().map(lambda k, n: (str(k), str(n)))
         .to("out", key_serde=Serdes.String(), value_serde=Serdes.String()))
        return builder.build()

    def emit_on_close() -> Any:
        builder = StreamsBuilder()
        (builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String())
         .group_by_key().windowed_by(TimeWindows.of_size_and_grace(100, 50))
         .emit_strategy(EmitStrategy.on_window_close()).count()
         .to_stream().map(lambda wk, n: (f"{wk.key}@{wk.window.start}", str(n)))
         .to("out", key_serde=Serdes.String(), value_serde=Serdes.String()))
        return builder.build()

    return {
        "emit-on-close": emit_on_close(),
        "suppress": suppressed(windowed=True),
        "time-limit": suppressed(windowed=False),
        "tumbling": windowed(TimeWindows.of_size_and_grace(100, 50)),
        "hopping": windowed(TimeWindows.of_size_and_grace(100, 50).advance_by(50)),
        "sliding": windowed(SlidingWindows.of_time_difference_and_grace(100, 50)),
        "session": windowed(SessionWindows.of_inactivity_gap_and_grace(60, 50)),
        "left-join": joined(),
        "processor-api": processor_api.tally_topology("in", "out"),
        "process-values": processor_api.dsl_topology("in", "out"),
        "processor-window-store": processor_api.window_topology("in", "out"),
    }


WINDOWED_INPUT = [  # (topic, key, value, timestamp): out of order, late and very late records
    ("in", "a", "1", 1000), ("in", "b", "2", 1010), ("other", "a", "x", 1020), ("in", "a", "3", 1090),
    ("in", "a", "4", 1150), ("in", "b", "5", 1040), ("other", "b", "y", 1160), ("in", "a", "6", 1300),
    ("in", "b", "late", 1120), ("in", "a", "too-late", 1010), ("in", "b", "7", 1460), ("other", "a", "z", 1470),
    ("in", "a", "8", 1200), ("in", "c", "9", 1900),
]


@pytest.mark.parametrize("worker", ["rebuilt", "live"])
@pytest.mark.parametrize(
    "kind", ["tumbling", "hopping", "sliding", "session", "emit-on-close", "suppress", "time-limit", "left-join",
             "processor-api", "process-values", "processor-window-store"],
)
def test_the_task_stage_over_micro_batches_writes_what_the_driver_writes(kind: str, worker: str) -> None:
    """Micro-batches of three records, the task rebuilt from Spark state for each ("rebuilt": a
    new Python worker every time) or kept by the worker between them ("live")."""
    from streams_core import Serdes, TopologyTestDriver

    topology = windowed_topologies()[kind]
    props = {**CONFIG, "statestore.cache.max.bytes": 0}
    records = [r for r in WINDOWED_INPUT if kind == "left-join" or r[0] == "in"]
    with TopologyTestDriver(topology, props) as driver:
        inputs = {t: driver.create_input_topic(t, Serdes.String(), Serdes.String()) for t in {r[0] for r in records}}
        for topic, key, value, timestamp in records:
            inputs[topic].pipe_input(key, value, timestamp)
        expected = [(r.key, r.value) for r in driver.create_output_topic("out", Serdes.String(), Serdes.String())
                    .read_records_to_list()]
    # a fresh topology: one the driver ran holds process_values' last processor, bound to the driver's task
    (query,) = SparkRunner(windowed_topologies()[kind], props).plan().queries
    # the left join plans as the native stream-join (test_native_stream_join.py); the task stage still
    # runs joins it does not compile (a self-join, a re-keyed join), from the spec the plan built
    assert query.stage == "task" or (kind == "left-join" and query.native is not None)
    assert query.spec.task_stores
    changelog: dict[tuple[str, bytes], bytes] = {}
    task: bytes | None = None
    out = []
    offsets = {"in": 0, "other": 0}
    for start in range(0, len(records), 3):
        if worker == "rebuilt":
            task_batch.drop_live_tasks()
        rows = []
        for topic, key, value, timestamp in records[start:start + 3]:
            rows.append(InputRow(topic, 0, offsets[topic], timestamp, key.encode(), value.encode(), ()))
            offsets[topic] += 1
        batch = run_task_batch(query.spec, 0, rows, task, lambda: [(t, k, v) for (t, k), v in changelog.items()])
        task = batch.task
        for changelog_key, changed in batch.changelog.items():
            if changed is None:
                changelog.pop(changelog_key, None)
            else:
                changelog[changelog_key] = changed
        out.extend((r.key.decode(), r.value.decode()) for r in batch.rows if r.key is not None and r.value is not None)
    assert out == expected
    assert expected, "the topology wrote something"



def test_a_live_task_is_not_reused_when_spark_rolled_its_state_back() -> None:
    """A batch whose state Spark did not commit is run again from the committed state."""
    (query,) = SparkRunner(windowed_topologies()["tumbling"], CONFIG).plan().queries
    rows = [InputRow("in", 0, i, ts, b"a", b"x", ()) for i, ts in enumerate((1000, 1010, 1020, 1200, 1030))]
    first = run_task_batch(query.spec, 0, rows[:3], None, list)
    changelog = [(t, k, v) for (t, k), v in first.changelog.items() if v is not None]
    second = run_task_batch(query.spec, 0, rows[3:], first.task, lambda: changelog)
    again = run_task_batch(query.spec, 0, rows[3:], first.task, lambda: changelog)  # the rolled-back retry
    assert [(r.key, r.value) for r in again.rows] == [(r.key, r.value) for r in second.rows]
    assert again.task == second.task


def test_the_task_stage_keeps_a_timestamped_stores_own_bytes_in_spark_state() -> None:
    """A windowed count's entries are the store's bytes (the timestamp, then the count), not Java's
    changelog format (the count alone, the timestamp as the record's) that its ChangeLogging layer
    sends a Kafka changelog; entries of that layout (as existing checkpoints hold them) restore."""
    props = {**CONFIG, "statestore.cache.max.bytes": 0}
    (query,) = SparkRunner(windowed_topologies()["tumbling"], props).plan().queries
    rows = [InputRow("in", 0, i, ts, b"a", b"x", ()) for i, ts in enumerate((1000, 1010))]
    first = run_task_batch(query.spec, 0, rows, None, list)
    ((topic, key), value), = first.changelog.items()
    assert topic.endswith("-changelog")
    assert value == struct.pack(">qq", 1010, 2), "8-byte timestamp, then the Long count"
    task_batch.drop_live_tasks()  # the next batch restores from the entries given
    saved = [(topic, key, struct.pack(">qq", 1005, 7))]
    second = run_task_batch(query.spec, 0, [InputRow("in", 0, 2, 1020, b"a", b"x", ())], first.task, lambda: saved)
    assert [(r.key, r.value) for r in second.rows] == [(b"a@1000-1100", b"8")]
    assert second.changelog == {(topic, key): struct.pack(">qq", 1020, 8)}


def test_global_records_fill_the_global_store_before_the_first_record() -> None:
    from dataclasses import replace

    from streams_core import Serdes, StreamsBuilder

    builder = StreamsBuilder()
    dims = builder.global_table("dims", key_serde=Serdes.String(), value_serde=Serdes.String())
    (builder.stream("in", key_serde=Serdes.String(), value_serde=Serdes.String())
     .left_join(dims, lambda key, value: value, lambda value, dim: f"{value}:{dim}")
     .to("out", key_serde=Serdes.String(), value_serde=Serdes.String()))
    (query,) = SparkRunner(builder.build(), CONFIG).plan().queries
    dims_rows = (InputRow("dims", 0, 0, 1, b"d1", b"one", ()), InputRow("dims", 0, 1, 2, b"d2", b"two", ()),
                 InputRow("dims", 0, 2, 3, b"d1", b"uno", ()))
    executor = SubtopologyExecutor(replace(query.spec, global_records=dims_rows))
    try:
        out = executor.process([InputRow("in", 0, i, 10, b"k", v, ()) for i, v in enumerate((b"d1", b"d2", b"d3"))])
    finally:
        executor.close()
    assert [r.value for r in out] == [b"d1:uno", b"d2:two", b"d3:None"]


def test_a_global_processor_has_no_stream_time_on_spark_either() -> None:
    """As on our runtime (Kafka's GlobalProcessorContextImpl.currentStreamTimeMs throws)."""
    from dataclasses import replace

    from streams_core import Processor, Stores, StreamsError, Topology

    class ReadsStreamTime(Processor[str, str, None, None]):
        def init(self, context: Any) -> None:
            self.context = context

        def process(self, record: Any) -> None:
            self.context.current_stream_time_ms()

    s = Serdes.String()
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("dims"), s, s).with_logging_disabled()
    topology = (Topology()
                .add_global_store(store, "GSOURCE", "dims", "GREAD", ReadsStreamTime, key_serde=s, value_serde=s)
                .add_source("SOURCE", "in", key_serde=s, value_serde=s)
                .add_sink("SINK", "out", "SOURCE", key_serde=s, value_serde=s))  # fmt: skip
    (query,) = SparkRunner(topology, CONFIG).plan().queries
    with pytest.raises(StreamsError, match="'GREAD': there is no concept of stream-time for a global processor"):
        SubtopologyExecutor(replace(query.spec, global_records=(InputRow("dims", 0, 0, 1, b"d", b"x", ()),)))


def test_the_keyed_stage_forwards_a_caching_stores_updates_once_per_key_and_call() -> None:
    """Kafka Streams' record cache coalesces a key's updates per commit; the keyed stage's call is the commit."""
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde=Serdes.String(), value_serde=Serdes.Long())
    orders.filter(lambda customer, amount: amount > 100).to("big-orders")
    orders.group_by_key().reduce(lambda a, b: a + b).to_stream().to("totals")
    (query,) = SparkRunner(builder.build(), CONFIG).plan().queries
    assert query.stage == "keyed"
    executor = SubtopologyExecutor(query.spec)
    try:
        (store,) = executor.stores.values()
        store.load({})
        rows = [InputRow("orders", 0, i, 10 + i, b"c1", amount.to_bytes(8, "big"), ()) for i, amount in enumerate((50, 150, 7))]
        out = executor.process(rows) + executor.commit()
    finally:
        executor.close()
    assert [(r.topic, int.from_bytes(r.value or b"", "big")) for r in out] == [("big-orders", 150), ("totals", 207)]
