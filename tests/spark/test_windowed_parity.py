"""Windowed operators on Spark and on the asyncio runtime: the same final tables, late records dropped by both.

Both engines keep stream time per task (per input partition), as Kafka Streams does: Spark's
task stage carries each task's stream time between micro-batches instead of using Spark's global
watermark. The input is split over several micro-batches (`maxOffsetsPerTrigger`) so that a
record late for a global watermark but not for its own partition shows the difference.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from streams_core import BufferConfig, CopartitioningError, JoinWindows, Serdes, StreamsBuilder, Suppressed, TimeWindows, Topology
from streams_core.spark import SparkRunner
from tests.kafka_utils import Rec, create_topic, produce, unique_topic
from tests.spark.engines import BASE_TS, ENGINES, run_both_engines

#: Window starts are aligned to the epoch: times below are seconds after a 10 s boundary.
W0 = (BASE_TS // 10_000) * 10_000
SMALL_BATCHES = {"maxOffsetsPerTrigger": "4"}


def at(seconds: float) -> int:
    return W0 + int(seconds * 1000)


async def test_a_windowed_count_with_grace_gives_the_same_table(bootstrap_servers: str, spark: Any, tmp_path: Path) -> None:
    """Every update, and only the final counts (`suppress(until_window_closes)`), on both engines."""
    suffix = unique_topic("windowed")
    events = f"events-{suffix}"
    outputs = {engine: (f"{engine}-windows-{suffix}", f"{engine}-final-{suffix}") for engine in ENGINES}
    for topic in (events, *outputs["spark"], *outputs["asyncio"]):
        await create_topic(bootstrap_servers, topic, partitions=2)
    # Partition 0 runs ahead to 30 s early; partition 1 stays behind. Per-task stream time keeps
    # partition 1's record at 2 s (its stream time is 12 s); a global watermark (30 s - grace)
    # would drop it. Both partitions have a record too late for their own stream time.
    await produce(bootstrap_servers, events, [
        *(Rec(b"a", str(t).encode(), partition=0, timestamp_ms=at(t)) for t in (0, 1, 30, 24, 2, 26)),
        *(Rec(b"b", str(t).encode(), partition=1, timestamp_ms=at(t)) for t in (1, 3, 11, 12, 2, 20, 4)),
    ])

    def build(engine: str) -> Topology:
        updates, final = outputs[engine]
        builder = StreamsBuilder()
        counts = (builder.stream(events, key_serde=Serdes.String(), value_serde=Serdes.String())
                  .group_by_key()
                  .windowed_by(TimeWindows.of_size_and_grace(10_000, 5_000))
                  .count())
        for table, output in ((counts, updates), (counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())), final)):
            (table.to_stream()
             .map(lambda wk, n: (f"{wk.key}@{(wk.window.start - W0) // 1000}", str(n)))
             .to(output, key_serde=Serdes.String(), value_serde=Serdes.String()))
        return builder.build()

    tables, runner = await run_both_engines(build, bootstrap_servers, spark, tmp_path, suffix, outputs, SMALL_BATCHES)
    assert len([p for p in runner.progress[0] if p["numInputRows"]]) >= 3, "several micro-batches"
    assert tables["spark"] == tables["asyncio"]
    updates, final = tables["spark"]
    assert updates == {
        "a@0": "2",   # 0 s, 1 s; the record at 2 s came after stream time 30 s: window [0, 10) closed at 15 s
        "a@20": "2", "a@30": "1",
        "b@0": "3",   # 1 s, 3 s and 2 s: partition 1's stream time was 12 s (close time 7 s)
        "b@10": "2", "b@20": "1",  # the record at 4 s came after 20 s: dropped
    }
    # Closed windows only, once: partition 0 reached 30 s (close time 25 s), partition 1 20 s (15 s).
    assert final == {"a@0": "2", "b@0": "3"}


async def test_joins_and_a_table_regrouping_give_the_same_tables(
    bootstrap_servers: str, spark: Any, tmp_path: Path
) -> None:
    suffix = unique_topic("joins")
    clicks, views, left_table, right_table = (f"{name}-{suffix}" for name in ("clicks", "views", "profiles", "scores"))
    for topic in (clicks, views, left_table, right_table):
        await create_topic(bootstrap_servers, topic, partitions=2)
    outputs = {engine: tuple(f"{engine}-{name}-{suffix}" for name in ("stream-join", "table-join", "regrouped"))
               for engine in ENGINES}
    for names in outputs.values():
        for topic in names:
            await create_topic(bootstrap_servers, topic, partitions=2)
    # A click joins its user's views within 5 s before or after it. With grace 30 s over a 30 s
    # span nothing expires and no unmatched click is emitted alone (its window plus grace never
    # passes), so the final table does not depend on how either engine interleaves the topics.
    await produce(bootstrap_servers, clicks, [
        Rec(b"u1", b"c1", timestamp_ms=at(10)), Rec(b"u2", b"c3", timestamp_ms=at(11)),
        Rec(b"u1", b"c5", timestamp_ms=at(25)), Rec(b"u1", b"c2", timestamp_ms=at(28)),
        Rec(b"u2", b"c6", timestamp_ms=at(29)),  # no view: waits for its window to close
        Rec(b"u2", b"c7", timestamp_ms=at(12)),  # out of order
    ])
    await produce(bootstrap_servers, views, [
        Rec(b"u1", b"v1", timestamp_ms=at(8)), Rec(b"u2", b"v2", timestamp_ms=at(15)),
        Rec(b"u1", b"v3", timestamp_ms=at(14)), Rec(b"u1", b"far", timestamp_ms=at(21)),
        Rec(b"u1", b"v5", timestamp_ms=at(27)), Rec(b"u3", b"v4", timestamp_ms=at(30)),
    ])
    await produce(bootstrap_servers, left_table, [
        Rec(b"u1", b"ann", timestamp_ms=at(1)), Rec(b"u2", b"bob", timestamp_ms=at(2)),
        Rec(b"u3", b"cy", timestamp_ms=at(3)), Rec(b"u2", None, timestamp_ms=at(9)),
    ])
    await produce(bootstrap_servers, right_table, [
        Rec(b"u1", b"10", timestamp_ms=at(4)), Rec(b"u3", b"30", timestamp_ms=at(5)),
        Rec(b"u1", b"11", timestamp_ms=at(6)), Rec(b"u4", b"40", timestamp_ms=at(7)),
        Rec(b"u4", None, timestamp_ms=at(8)),
    ])

    def build(engine: str) -> Topology:
        stream_out, table_out, regrouped_out = outputs[engine]
        builder = StreamsBuilder()
        strings = {"key_serde": Serdes.String(), "value_serde": Serdes.String()}
        (builder.stream(clicks, **strings)
         .left_join(builder.stream(views, **strings), lambda click, view: f"{click}:{view}",
                    JoinWindows.of_time_difference_and_grace(5_000, 30_000))
         .map(lambda user, joined: (joined.split(":")[0], f"{user}:{joined}"))
         .to(stream_out, **strings))
        scores = builder.table(right_table, **strings)
        (builder.table(left_table, **strings)
         .outer_join(scores, lambda name, score: f"{name}/{score}")
         .to_stream()
         .to(table_out, **strings))
        (scores.group_by(lambda user, score: ("odd" if int(score) % 2 else "even", score))
         .count()
         .to_stream()
         .map_values(str)
         .to(regrouped_out, **strings))
        return builder.build()

    tables, _ = await run_both_engines(build, bootstrap_servers, spark, tmp_path, suffix, outputs, **{"max.task.idle.ms": 2_000})
    assert tables["spark"] == tables["asyncio"]
    stream_join, table_join, regrouped = tables["spark"]
    assert stream_join == {
        "c1": "u1:c1:v3",  # v1 (8 s) and v3 (14 s) are within 5 s of 10 s, "far" (21 s) is not
        "c3": "u2:c3:v2", "c7": "u2:c7:v2", "c5": "u1:c5:v5", "c2": "u1:c2:v5",
    }, "c6 has no view and its window has not closed"
    assert table_join == {"u1": "ann/11", "u3": "cy/30"}, "u2 and u4 deleted on one side, absent on the other"
    assert regrouped == {"even": "1", "odd": "1"}, "u1 moved from even to odd, u4 came and went: only u3 is even"


async def test_a_join_of_topics_with_different_partition_counts_is_refused_before_any_query(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """As KafkaStreams refuses to start: a task stage groups by partition number."""
    suffix = unique_topic("copartition")
    left, right = f"left-{suffix}", f"right-{suffix}"
    await create_topic(bootstrap_servers, left, partitions=2)
    await create_topic(bootstrap_servers, right, partitions=3)
    builder = StreamsBuilder()
    strings = {"key_serde": Serdes.String(), "value_serde": Serdes.String()}
    (builder.stream(left, **strings)
     .join(builder.stream(right, **strings), lambda a, b: a + b, JoinWindows.of_time_difference_with_no_grace(1000))
     .to(f"out-{suffix}", **strings))
    runner = SparkRunner(builder.build(), {"application.id": f"spark-{suffix}", "bootstrap.servers": bootstrap_servers})
    with pytest.raises(CopartitioningError, match=left):
        await asyncio.to_thread(runner.run, "available_now", tmp_path / "checkpoints")
    assert runner._spark is None, "refused before a Spark session was needed"
