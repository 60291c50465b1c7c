"""The inner stream-stream join compiled to one native query (native_stream_join.py).

The per-task step alone (no Spark, a fake state handle) against the `TopologyTestDriver` fed the
same records in the same order, over micro-batches with the task kept live or restored from Spark
state: out-of-order records within grace are joined, late ones dropped as the window stores drop
them. Then on Spark against `KafkaStreams` on the same input, over several micro-batches and two
runs from one checkpoint.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from streams_core import JoinWindows, Serdes, StreamJoined, StreamsBuilder, Topology
from streams_core.spark import SparkRunner
from streams_core.spark.subtopology_executor import InputRow, kafka_order
from streams_core.testing.topology_test_driver import TopologyTestDriver
from tests.spark.test_native_join_count import _Handle

S = Serdes.String()
CONFIG = {"application.id": "stream-join", "bootstrap.servers": "127.0.0.1:9"}


def joined(left: str, right: str, output: str, windows: JoinWindows, chained: bool = False) -> Topology:
    """left ⋈ right within `windows`, value "left+right"; `chained`: stateless operators on both sides
    and after the join, Long values on the right (the record-by-record path)."""
    builder = StreamsBuilder()
    if not chained:
        other = builder.stream(right, key_serde=S, value_serde=S)
        (builder.stream(left, key_serde=S, value_serde=S)
         .join(other, lambda a, b: f"{a}+{b}", windows, StreamJoined.with_(S, S, S)).to(output, key_serde=S, value_serde=S))
        return builder.build()
    long = Serdes.Long()
    other = builder.stream(right, key_serde=S, value_serde=S).map_values(lambda v: int(v[1:].rstrip("x")))  # type: ignore[arg-type, return-value]
    (builder.stream(left, key_serde=S, value_serde=S).filter(lambda k, v: not v.endswith("x"))
     .join(other, lambda a, b: f"{a}+{b}", windows, StreamJoined.with_(S, S, long))
     .map(lambda k, v: (f"{k}/{v}", v.upper())).to(output, key_serde=S, value_serde=S))
    return builder.build()


def _records(rnd: random.Random, n: int) -> list[InputRow]:
    """Both sides' records of partition 0, mostly in time order, some out of order (within grace or late)."""
    rows = []
    for topic in ("left", "right"):
        ts = 1_000
        for offset in range(n):
            ts += rnd.randrange(0, 40)
            at = ts - rnd.choice([0, 0, 0, 0, 30, 120, 400])  # late by up to 400 ms
            value = f"{topic[0]}{offset}{'x' if rnd.random() < 0.1 else ''}"
            rows.append(InputRow(topic, 0, offset, at, f"k{rnd.randrange(4)}".encode(), value.encode(), ()))
    return rows


def _frame(rows: list[InputRow]) -> Any:
    import pandas as pd  # type: ignore[import-untyped]  # no stubs in the venv

    return pd.DataFrame({"topic": [r.topic for r in rows], "partition": [r.partition for r in rows],
                         "offset": [r.offset for r in rows], "timestamp": [r.timestamp for r in rows],
                         "key": [r.key for r in rows], "value": [r.value for r in rows]})  # fmt: skip


@pytest.mark.parametrize("chained", [False, True])
@pytest.mark.parametrize("keep_live", [True, False])
def test_the_task_step_joins_what_the_test_driver_joins(chained: bool, keep_live: bool) -> None:
    from streams_core.spark.native_count import CountKeys
    from streams_core.spark.native_stream_join import StreamJoinTask, _live

    windows = JoinWindows.of_time_difference_and_grace(50, 150).after(20)  # before 50 ms, after 20 ms
    (query,) = SparkRunner(joined("left", "right", "out", windows, chained), CONFIG).plan().queries
    assert query.stage == "native" and query.native is not None and query.native.kind == "stream-join"
    rnd = random.Random(7 + chained)
    rows = _records(rnd, 120)
    cuts = [0, *sorted(rnd.sample(range(1, 120), 6)), 120]  # micro-batches: offset ranges of both partitions
    batches = [[r for r in rows if lo <= r.offset < hi] for lo, hi in itertools.pairwise(cuts)]
    task = StreamJoinTask(CountKeys(query.spec.topology, query.spec.props, query.native), {})
    task.init(_Handle())  # type: ignore[arg-type]  # the fake has the calls the task makes
    ours: list[tuple[bytes, bytes]] = []
    ordered: list[InputRow] = []
    for batch in batches:
        if not keep_live:
            _live.clear()
        for out in task.handleInputRows((0,), iter([_frame(batch)]), None):
            ours.extend(zip(out["key"], out["value"], strict=True))
        ordered.extend(kafka_order(batch))
    with TopologyTestDriver(joined("left", "right", "out", windows, chained), {"application.id": "driver"}) as driver:
        inputs = {t: driver.create_input_topic(t, Serdes.Bytes(), Serdes.Bytes()) for t in ("left", "right")}
        for row in ordered:
            inputs[row.topic].pipe_input(row.key, row.value, row.timestamp)
        expected = [(r.key.encode(), r.value.encode()) for r in driver.create_output_topic("out", S, S).read_records_to_list()]
    assert ours == expected
    assert 50 < len(expected) < 120 * 120, "pairs joined, not every pair"
