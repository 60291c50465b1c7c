"""The native count's Python side (CountKeys) on Arrow batches, without Spark: partial counts per key."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from streams_core import Grouped, LogAndSkipOnInvalidTimestamp, Produced, Serdes, StreamsBuilder, Topology
from streams_core.spark import SparkRunner
from streams_core.spark.native_count import CountKeys

S = Serdes.String()
CONFIG = {"application.id": "native", "bootstrap.servers": "127.0.0.1:9"}
LINES = ["a bb a", "ccc bb", "", "a dddd eeeee"]


def stage(topology: Topology, **config: Any) -> tuple[CountKeys, tuple[str, ...]]:
    (query,) = SparkRunner(topology, {**CONFIG, **config}).plan().queries
    assert query.stage == "native" and query.native is not None
    return CountKeys(query.spec.topology, query.spec.props, query.native), query.source_topics


def counted(count_keys: CountKeys, topics: tuple[str, ...], rows: list[tuple[str, int, bytes | None, bytes | None]]) -> dict[Any, int]:
    columns = count_keys.columns(topics)
    arrays = {
        "topic": pa.array([r[0] for r in rows], pa.string()),
        "timestamp": pa.array([r[1] for r in rows], pa.int64()),
        "key": pa.array([r[2] for r in rows], pa.binary()),
        "value": pa.array([r[3] for r in rows], pa.binary()),
    }
    batch = pa.RecordBatch.from_arrays([arrays[c] for c in columns], names=columns)
    total: Counter[Any] = Counter()
    for out in count_keys(iter([batch, batch.slice(0, 0), batch])):
        assert out.schema.names == ["key", "n"]
        total.update(dict(zip(out.column("key").to_pylist(), out.column("n").to_pylist(), strict=True)))
    return dict(total)


def word_count(extractor: Any = None, key_serde: Any = None) -> Topology:
    builder = StreamsBuilder()
    lines = builder.stream("in", key_serde=S, value_serde=S, timestamp_extractor=extractor)
    grouped = lines.flat_map_values(str.split).group_by(
        (lambda k, w: len(w)) if key_serde else (lambda k, w: w), Grouped.with_(key_serde=key_serde))
    grouped.count().to_stream().to("out", Produced.with_(key_serde, Serdes.Long()) if key_serde else None)
    return builder.build()


def test_the_chain_counts_each_batch_as_the_count_would() -> None:
    count_keys, topics = stage(word_count())
    assert count_keys.schema == "key string, n bigint" and count_keys.columns(topics) == ["timestamp", "key", "value"]
    rows = [("in", 10 + i, f"k{i}".encode(), line.encode()) for i, line in enumerate(LINES)]
    rows.append(("in", 20, b"k-null", None))  # a None line: str.split(None) fails, as on the runtime
    with pytest.raises(TypeError):
        counted(count_keys, topics, rows)
    expected = Counter(w for line in LINES for w in line.split())
    assert counted(count_keys, topics, rows[:-1]) == {w: 2 * n for w, n in expected.items()}


def test_keys_other_than_strings_are_counted_by_their_serde_bytes() -> None:
    count_keys, topics = stage(word_count(key_serde=Serdes.Integer()))
    assert count_keys.schema == "key binary, n bigint"
    rows = [("in", 1, b"k", line.encode()) for line in LINES]
    lengths = Counter(len(w) for line in LINES for w in line.split())
    assert counted(count_keys, topics, rows) == {Serdes.Integer().serialize("out", n): 2 * c for n, c in lengths.items()}


def test_negative_timestamps_follow_the_sources_extractor() -> None:
    rows = [("in", 5, b"k", b"a b"), ("in", -1, b"k", b"c d")]
    skipping, topics = stage(word_count(LogAndSkipOnInvalidTimestamp()))
    assert counted(skipping, topics, rows) == {"a": 2, "b": 2}
    failing, topics = stage(word_count())
    with pytest.raises(Exception, match="negative"):
        counted(failing, topics, rows)


def test_a_merge_of_two_topics_runs_each_topics_chain() -> None:
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=S, value_serde=S).map_values(str.upper)
    right = builder.stream("right", key_serde=S, value_serde=S).filter(lambda k, v: v != "skip")
    left.merge(right).group_by_key().count().to_stream().to("out", value_serde=Serdes.Long())
    count_keys, topics = stage(builder.build())
    assert topics == ("left", "right") and "topic" in count_keys.columns(topics)
    rows = [("left", 1, b"x", b"a"), ("right", 2, b"y", b"skip"), ("right", 3, b"y", b"b"), ("left", 4, None, b"c")]
    assert counted(count_keys, topics, rows) == {"x": 2, "y": 2}, "a None key is not counted"
